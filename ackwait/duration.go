package ackwait

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Day and Week are the units ParseDuration adds to time.ParseDuration's.
const (
	Day  = 24 * time.Hour
	Week = 7 * Day
)

// ParseDuration parses a duration as time.ParseDuration does, and also with
// the units d (24h) and w (7d), alone or mixed with the others: "7d", "2w",
// "1d12h", "1.5d". Days are of fixed length, as the nats CLI reads them; a
// string with neither unit is parsed by time.ParseDuration alone. An error
// wraps ErrInvalidDuration.
func ParseDuration(s string) (time.Duration, error) {
	if !strings.ContainsAny(s, "dw") {
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("%w: %w", ErrInvalidDuration, err)
		}
		return d, nil
	}
	rest, neg := s, false
	if rest != "" && (rest[0] == '-' || rest[0] == '+') {
		neg, rest = rest[0] == '-', rest[1:]
	}
	if rest == "" {
		return 0, fmt.Errorf("%w: %q", ErrInvalidDuration, s)
	}
	var total time.Duration
	for rest != "" {
		seg, tail, ok := nextSegment(rest)
		if !ok {
			return 0, fmt.Errorf("%w: %q", ErrInvalidDuration, s)
		}
		d, err := segmentDuration(seg)
		if err != nil || total > math.MaxInt64-d {
			return 0, fmt.Errorf("%w: %q", ErrInvalidDuration, s)
		}
		total, rest = total+d, tail
	}
	if neg {
		total = -total
	}
	return total, nil
}

// nextSegment splits one number and its unit ("1.5d") off the front of s.
func nextSegment(s string) (seg, rest string, ok bool) {
	i := 0
	for i < len(s) && (s[i] == '.' || s[i] >= '0' && s[i] <= '9') {
		i++
	}
	j := i
	for j < len(s) && s[j] != '.' && (s[j] < '0' || s[j] > '9') {
		j++
	}
	if i == 0 || j == i {
		return "", "", false
	}
	return s[:j], s[j:], true
}

// segmentDuration is one number and unit: d and w are counted in hours, so
// a fraction is exact where time.ParseDuration's hours are.
func segmentDuration(seg string) (time.Duration, error) {
	unit, mult := "", time.Duration(1)
	switch {
	case strings.HasSuffix(seg, "d"):
		unit, mult = "d", 24
	case strings.HasSuffix(seg, "w"):
		unit, mult = "w", 7*24
	}
	if unit == "" {
		return time.ParseDuration(seg)
	}
	h, err := time.ParseDuration(strings.TrimSuffix(seg, unit) + "h")
	if err != nil || h > math.MaxInt64/mult {
		return 0, fmt.Errorf("out of range")
	}
	return h * mult, nil
}
