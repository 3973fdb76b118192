package stream

import (
	"strings"
	"unicode"
)

// ValidSubject reports whether subject is a NATS subject a stream can
// capture: tokens separated by '.', none empty or with white space, '*' a
// whole token, and '>' only as the last.
func ValidSubject(subject string) bool {
	tokens := strings.Split(subject, ".")
	for i, t := range tokens {
		if t == "" || strings.ContainsFunc(t, unicode.IsSpace) || len(t) > 1 && strings.ContainsAny(t, "*>") ||
			t == ">" && i < len(tokens)-1 {
			return false
		}
	}
	return true
}

// LiteralSubject reports whether subject names one subject, without
// wildcards: what a publish goes to (Effects.Subject).
func LiteralSubject(subject string) bool {
	return !strings.ContainsAny(subject, "*> \t") && !strings.HasPrefix(subject, ".") && !strings.HasSuffix(subject, ".") && !strings.Contains(subject, "..")
}
