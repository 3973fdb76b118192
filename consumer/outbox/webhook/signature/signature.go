package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names of a signed request.
const (
	HeaderIdempotencyKey = "Idempotency-Key"      // the outbox row's id, the same on every resend; signed by v2
	HeaderMessageID      = "Jetledger-Message-Id" // the consumed message's id; signed by v2
	HeaderTimestamp      = "Jetledger-Timestamp"  // Unix seconds; signed by v2 and v1
	HeaderSignature      = "Jetledger-Signature"  // "v2=<hex>" per secret, then the deprecated "v1=<hex>" per secret, comma-separated
)

// ToleranceDefault is how far a timestamp may be from now, either way,
// when a Verifier's Tolerance is 0.
const ToleranceDefault = 5 * time.Minute

// Timestamp is t as Jetledger-Timestamp carries it: Unix seconds.
func Timestamp(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

// Sign returns Jetledger-Signature's value for a request: one v2 entry per
// secret, in order, comma-separated. The fields are the headers' values
// as sent; none may hold a line break, which no HTTP header can carry.
func Sign(secrets []string, timestamp, key, messageID string, body []byte) string {
	entries := make([]string, len(secrets))
	for i, s := range secrets {
		entries[i] = "v2=" + hex.EncodeToString(macV2(s, timestamp, key, messageID, body))
	}
	return strings.Join(entries, ", ")
}

// SignV1 returns the deprecated v1 entries, one per secret: what a
// receiver older than v2 checks. The sink sends them after Sign's entries
// until every receiver verifies v2; v1 signs neither the Idempotency-Key
// nor the message id.
func SignV1(secrets []string, timestamp string, body []byte) string {
	entries := make([]string, len(secrets))
	for i, s := range secrets {
		entries[i] = "v1=" + hex.EncodeToString(macV1(s, timestamp, body))
	}
	return strings.Join(entries, ", ")
}

// macV2 signs the fields joined by "\n", after a "v2" tag that keeps its
// input apart from v1's. The join is unambiguous because no field before
// the body can hold "\n": an HTTP header value cannot (net/http refuses to
// send one, so such a signature never leaves the sender), and Verify
// refuses a field with one. A separator, not length prefixes, so that a
// receiver in any language rebuilds the string without counting bytes.
// Spaces and tabs around a field are trimmed, as HTTP trims them in
// transit.
func macV2(secret, timestamp, key, messageID string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	for _, f := range []string{"v2", timestamp, key, messageID} {
		m.Write([]byte(trim(f)))
		m.Write([]byte("\n"))
	}
	m.Write(body)
	return m.Sum(nil)
}

// macV1 is the deprecated signature: timestamp "." body.
func macV1(secret, timestamp string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(trim(timestamp)))
	m.Write([]byte("."))
	m.Write(body)
	return m.Sum(nil)
}

func trim(s string) string { return strings.Trim(s, " \t") }

// Verify checks a request's signature with Verifier{Secrets: secrets,
// Tolerance: tolerance}: any secret matching any v2 entry passes, within
// tolerance of now either way (0: ToleranceDefault). A request with only
// v1 entries is refused (ErrOnlyV1).
func Verify(secrets []string, header http.Header, body []byte, tolerance time.Duration) error {
	return Verifier{Secrets: secrets, Tolerance: tolerance}.Verify(header, body)
}

// Verifier checks signed requests. The zero value, given Secrets, checks
// v2 with a tolerance of ToleranceDefault against time.Now.
type Verifier struct {
	// Secrets are the secrets a request may be signed with: two while the
	// sender rotates. Any of them matching any v2 entry passes. Required;
	// none may be empty.
	Secrets []string
	// Tolerance is how far Jetledger-Timestamp may be from Now, in the
	// past or the future. Default (0) ToleranceDefault; not negative.
	Tolerance time.Duration
	// AllowV1 accepts a request whose only entries are v1, from a sender
	// older than v2. v1 signs neither the Idempotency-Key nor the message
	// id, so a request captured within Tolerance can be replayed under
	// another key: allow it only until such senders are gone. A request
	// with a v2 entry is checked by v2 alone. Default false: ErrOnlyV1.
	AllowV1 bool
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Verify checks the signature of a request with header and the raw body.
// A refusal is one of the package's errors, for errors.Is.
func (v Verifier) Verify(header http.Header, body []byte) error {
	if err := v.validate(); err != nil {
		return err
	}
	sigs := header.Values(HeaderSignature)
	if len(sigs) == 0 {
		return fmt.Errorf("%w: no %s header", ErrNoSignature, HeaderSignature)
	}
	ts, err := single(header, HeaderTimestamp)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadTimestamp, err)
	}
	at, err := parseTimestamp(ts)
	if err != nil {
		return err
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	tolerance := v.Tolerance
	if tolerance == 0 {
		tolerance = ToleranceDefault
	}
	if off := now().Sub(at); off > tolerance || off < -tolerance {
		return fmt.Errorf("%w: %s is %s from now, beyond %s", ErrStale, HeaderTimestamp, off.Round(time.Second), tolerance)
	}
	v2, v1, err := parse(sigs)
	if err != nil {
		return err
	}
	// The headers v2 signs are read once, here, as the receiver will read
	// them: a second value could be the one the receiver's code picks.
	key, err := single(header, HeaderIdempotencyKey)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	msgID, err := single(header, HeaderMessageID)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	switch {
	case len(v2) > 0:
		if anyMatch(v2, v.Secrets, func(s string) []byte { return macV2(s, ts, key, msgID, body) }) {
			return nil
		}
		return fmt.Errorf("%w: no v2 entry matches a secret", ErrBadSignature)
	case len(v1) > 0 && !v.AllowV1:
		return ErrOnlyV1
	case len(v1) > 0:
		if anyMatch(v1, v.Secrets, func(s string) []byte { return macV1(s, ts, body) }) {
			return nil
		}
		return fmt.Errorf("%w: no v1 entry matches a secret", ErrBadSignature)
	}
	return fmt.Errorf("%w: no v2 or v1 entry in %s", ErrNoSignature, HeaderSignature)
}

func (v Verifier) validate() error {
	if len(v.Secrets) == 0 {
		return fmt.Errorf("%w: no secret", ErrInvalidConfig)
	}
	for i, s := range v.Secrets {
		if s == "" {
			return fmt.Errorf("%w: secret %d is empty", ErrInvalidConfig, i+1)
		}
	}
	if v.Tolerance < 0 {
		return fmt.Errorf("%w: tolerance %s is negative", ErrInvalidConfig, v.Tolerance)
	}
	return nil
}

// anyMatch reports whether the MAC of any secret equals any entry, each
// MAC computed once and compared in constant time.
func anyMatch(entries [][]byte, secrets []string, mac func(secret string) []byte) bool {
	for _, s := range secrets {
		want := mac(s)
		for _, e := range entries {
			if hmac.Equal(e, want) {
				return true
			}
		}
	}
	return false
}

// single is the one value of a signed header, "" if absent; given twice or
// holding a line break it is an error.
func single(header http.Header, name string) (string, error) {
	vals := header.Values(name)
	switch {
	case len(vals) == 0:
		return "", nil
	case len(vals) > 1:
		return "", fmt.Errorf("%s given %d times", name, len(vals))
	case strings.ContainsAny(vals[0], "\r\n"):
		return "", fmt.Errorf("%s holds a line break", name)
	}
	return vals[0], nil
}

// parseTimestamp reads Unix seconds: decimal digits only, so that the
// string signed is the one number.
func parseTimestamp(ts string) (time.Time, error) {
	ts = trim(ts)
	if ts == "" {
		return time.Time{}, fmt.Errorf("%w: no %s header", ErrBadTimestamp, HeaderTimestamp)
	}
	if len(ts) > 18 || strings.Trim(ts, "0123456789") != "" {
		return time.Time{}, fmt.Errorf("%w: %s %s: want Unix seconds", ErrBadTimestamp, HeaderTimestamp, excerpt(ts))
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %s %s: %v", ErrBadTimestamp, HeaderTimestamp, excerpt(ts), err)
	}
	return time.Unix(sec, 0), nil
}

// parse reads Jetledger-Signature's values: "scheme=hex" entries separated
// by commas, spaces around them ignored. An entry of another scheme is
// skipped, so that a later version can be sent beside these; a v2 or v1
// entry must hold exactly one SHA-256 in hex.
func parse(values []string) (v2, v1 [][]byte, err error) {
	for _, val := range values {
		for entry := range strings.SplitSeq(val, ",") {
			entry = trim(entry)
			if entry == "" {
				continue
			}
			scheme, digest, ok := strings.Cut(entry, "=")
			if !ok || scheme == "" {
				return nil, nil, fmt.Errorf("%w: entry %s: want scheme=hex", ErrMalformed, excerpt(entry))
			}
			if scheme != "v2" && scheme != "v1" {
				continue
			}
			mac, err := hex.DecodeString(digest)
			if err != nil || len(mac) != sha256.Size {
				return nil, nil, fmt.Errorf("%w: %s entry %s: want %d hex digits", ErrMalformed, scheme, excerpt(entry), 2*sha256.Size)
			}
			if scheme == "v2" {
				v2 = append(v2, mac)
			} else {
				v1 = append(v1, mac)
			}
		}
	}
	return v2, v1, nil
}

// excerpt quotes a value from the request for an error, cut short: it is
// the sender's text, and a receiver logs it.
func excerpt(s string) string {
	const limit = 80
	if len(s) > limit {
		s = s[:limit] + "…"
	}
	return strconv.Quote(s)
}
