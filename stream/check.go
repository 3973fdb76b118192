package stream

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/jetledger/jetledger/internal/say"
)

// MaxNameLen is the longest stream or consumer name NATS accepts
// (nats-server's JSMaxNameLen).
const MaxNameLen = 255

// ConfigError is ErrInvalidConfig with what is wrong, each setting named as
// Config.Names says: a command line prints Reason as its usage error.
type ConfigError struct{ Reason string }

func (e *ConfigError) Error() string { return ErrInvalidConfig.Error() + ": " + e.Reason }

// Refusal is Reason: what a command line prints as its usage error.
func (e *ConfigError) Refusal() string { return e.Reason }
func (e *ConfigError) Unwrap() error   { return ErrInvalidConfig }

func refusef(format string, a ...any) error { return &ConfigError{Reason: fmt.Sprintf(format, a...)} }

// CheckName refuses a stream or consumer name that NATS would: empty, too
// long, or with '.', '*', '>', '/', '\' or whitespace (nats-server's
// isValidAssetName; nats.go's jetstream checks a subset of it). setting
// is what the refusal calls the name (a *ConfigError).
func CheckName(setting, name string) error {
	switch {
	case name == "":
		return refusef("%s needs a name", setting)
	case len(name) > MaxNameLen:
		return refusef("%s is %d bytes long; NATS allows at most %d", setting, len(name), MaxNameLen)
	case strings.ContainsAny(name, `.*>/\`) || strings.ContainsFunc(name, unicode.IsSpace):
		return refusef(`%s %q: a NATS name may not contain '.', '*', '>', '/', '\' or whitespace`, setting, name)
	}
	return nil
}

// Check refuses, before any I/O, what the server would refuse later: a
// name NATS refuses, a subject that is none, a negative window or limit,
// and an age shorter than the duplicate window. Each refusal is a
// *ConfigError naming the setting as Names says.
func (c Config) Check() error {
	n := func(path string) string { return say.Name(c.Names, path) }
	if err := CheckName(n("Name"), c.Name); err != nil {
		return err
	}
	for _, s := range c.Subjects {
		if !ValidSubject(s) {
			return refusef("%s %q: not a NATS subject (tokens separated by '.'; '*' stands for one token, a last '>' for the rest)", n("Subjects"), s)
		}
	}
	l := c.Limits
	switch {
	case c.Duplicates < 0:
		return refusef("%s %s: must not be negative", n("Duplicates"), c.Duplicates)
	case l.MaxAge < 0:
		return refusef("%s %s: must not be negative", n("Limits.MaxAge"), l.MaxAge)
	case l.MaxBytes < 0:
		return refusef("%s %d: want a positive number (0: no limit)", n("Limits.MaxBytes"), l.MaxBytes)
	case l.MaxMsgs < 0:
		return refusef("%s %d: want a positive number (0: no limit)", n("Limits.MaxMsgs"), l.MaxMsgs)
	case l.Replicas < 0 || l.Replicas > 5:
		return refusef("%s %d: want 1 to 5 (JetStream's limit)", n("Limits.Replicas"), l.Replicas)
	case l.MaxAge > 0 && l.MaxAge < c.Duplicates:
		return refusef("%s %s is shorter than the duplicate window %s of the stream %s creates: raise %s or lower %s",
			n("Limits.MaxAge"), l.MaxAge, c.Duplicates, n("Subjects"), n("Limits.MaxAge"), n("Duplicates"))
	}
	return nil
}

// Set is the path of the first limit l gives, or "" for none.
func (l Limits) Set() string {
	switch {
	case l.MaxAge > 0:
		return "MaxAge"
	case l.MaxBytes > 0:
		return "MaxBytes"
	case l.MaxMsgs > 0:
		return "MaxMsgs"
	case l.Replicas > 0:
		return "Replicas"
	}
	return ""
}
