package main

import (
	"fmt"
	"net"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/alecthomas/kong"

	"github.com/jetledger/jetledger/ackwait"
)

// Flag values kong would take as given: a flag left without a value, a
// value that is the next flag, an explicitly empty value, and names NATS
// would refuse. Each is a usage error naming the flag, found before any I/O.

// missingValueError is a flag that takes a value given none: it ended the
// command line, or the word after it is another flag.
type missingValueError struct {
	flag string // --name
	next string // the flag that followed it, if any
}

func (e *missingValueError) Error() string {
	if e.next == "" {
		return e.flag + " needs a value"
	}
	return fmt.Sprintf("%s needs a value, not the flag %s (write %s=VALUE for a value that starts with '-')", e.flag, e.next, e.flag)
}

// valueMappers make kong's mappers of the value types the flags use refuse
// a missing value. kong.WithHyphenPrefixedParameters lets a negative number
// be a value (--max-deliver -1), and with it any word that starts with '-',
// even the next flag or none at all; this takes the flags back.
func valueMappers() []kong.Option {
	defaults := kong.NewRegistry().RegisterDefaults()
	var opts []kong.Option
	for _, t := range []reflect.Type{reflect.TypeFor[string](), reflect.TypeFor[int](), reflect.TypeFor[int64](), reflect.TypeFor[uint64]()} {
		opts = append(opts, kong.KindMapper(t.Kind(), requireValue(defaults.ForType(t))))
	}
	return append(opts, kong.TypeMapper(reflect.TypeFor[time.Duration](), requireValue(durationMapper())))
}

// durationMapper reads a time.Duration as ackwait.ParseDuration does, so
// every duration flag takes days and weeks (--max-age 7d, 1d12h) as the
// nats CLI does; a number from the config file is nanoseconds, as kong's own.
func durationMapper() kong.MapperFunc {
	return func(ctx *kong.DecodeContext, target reflect.Value) error {
		t, err := ctx.Scan.PopValue("duration")
		if err != nil {
			return err
		}
		var d time.Duration
		switch v := t.Value.(type) {
		case string:
			if d, err = ackwait.ParseDuration(v); err != nil {
				return fmt.Errorf("expected duration but got %q: want a number and a unit such as 90s, 1h30m, 7d or 2w", v)
			}
		case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
			d = reflect.ValueOf(v).Convert(reflect.TypeFor[time.Duration]()).Interface().(time.Duration)
		default:
			return fmt.Errorf("expected duration but got %q", v)
		}
		target.Set(reflect.ValueOf(d))
		return nil
	}
}

func requireValue(next kong.Mapper) kong.Mapper {
	return kong.MapperFunc(func(ctx *kong.DecodeContext, target reflect.Value) error {
		if err := checkValueGiven(ctx); err != nil {
			return err
		}
		return next.Decode(ctx, target)
	})
}

// checkValueGiven refuses a flag on the command line whose value is missing
// or is another flag. A value after '=', from the environment or the config
// file is a typed token, taken as it is.
func checkValueGiven(ctx *kong.DecodeContext) error {
	if ctx.Value.Flag == nil {
		return nil // a positional argument
	}
	t := ctx.Scan.Peek()
	if t.IsEOL() {
		return &missingValueError{flag: "--" + ctx.Value.Name}
	}
	if s, ok := t.Value.(string); ok && t.Type == kong.UntypedToken && strings.HasPrefix(s, "-") && s != "-" && !negativeNumber(s) {
		return &missingValueError{flag: "--" + ctx.Value.Name, next: s}
	}
	return nil
}

// popFlagValue reads the value of a flag of a custom type for kong, refusing
// a missing one as checkValueGiven does.
func popFlagValue(ctx *kong.DecodeContext, what string) (string, error) {
	if err := checkValueGiven(ctx); err != nil {
		return "", err
	}
	var v string
	err := ctx.Scan.PopValueInto(what, &v)
	return v, err
}

// negativeNumber says whether s, which starts with '-', is a negative
// number or duration (-1, -0.5, -5s) rather than a flag.
func negativeNumber(s string) bool {
	return len(s) > 1 && (s[1] == '.' || s[1] >= '0' && s[1] <= '9')
}

// checkNotEmpty refuses a flag given an empty value on the command line or
// in the config file: an unset shell variable (--webhook "$URL") must not
// silently turn a feature off or a default on.
func checkNotEmpty(kctx *kong.Context) error {
	for _, p := range kctx.Path {
		f := p.Flag
		if f == nil || f.IsBool() || f.Target.Kind() != reflect.String || f.Target.String() != "" {
			continue
		}
		if p.Resolved {
			return usagef("--%s is empty in the config file: give it a value, or leave it out", f.Name)
		}
		return usagef("--%s is empty: give it a value, or leave the flag out", f.Name)
	}
	return nil
}

// maxNameLen is the longest stream or consumer name NATS accepts
// (nats-server's JSMaxNameLen).
const maxNameLen = 255

// checkName refuses a stream or consumer name that NATS would: empty, too
// long, or with '.', '*', '>', '/', '\' or whitespace (nats-server's
// isValidAssetName; nats.go's jetstream checks a subset of it).
func checkName(flag, name string) error {
	switch {
	case name == "":
		return usagef("%s needs a name", flag)
	case len(name) > maxNameLen:
		return usagef("%s is %d bytes long; NATS allows at most %d", flag, len(name), maxNameLen)
	case strings.ContainsAny(name, `.*>/\`) || strings.ContainsFunc(name, unicode.IsSpace):
		return usagef(`%s %q: a NATS name may not contain '.', '*', '>', '/', '\' or whitespace`, flag, name)
	}
	return nil
}

// hostPort reads the host:port of flag; port 0 picks a free port.
func hostPort(flag, addr string) (host string, port int, err error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, usagef("%s %q: want host:port", flag, addr)
	}
	port, err = strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, usagef("%s %q: the port must be a number from 0 to 65535", flag, addr)
	}
	return host, port, nil
}

// checkDurations refuses a negative duration among flags (name to value).
func checkDurations(flags ...durationFlag) error {
	for _, f := range flags {
		if f.v < 0 {
			return usagef("%s %s: must not be negative", f.name, f.v)
		}
	}
	return nil
}

// durationFlag is a duration flag's name and value, for checkDurations.
type durationFlag struct {
	name string
	v    time.Duration
}

// checkSubjects refuses a --subjects entry that is no NATS subject: an empty
// token, whitespace, a wildcard inside a token, or '>' before the last token.
func checkSubjects(list string) error {
	for _, subject := range splitList(list) {
		tokens := strings.Split(subject, ".")
		for i, t := range tokens {
			if t == "" || strings.ContainsFunc(t, unicode.IsSpace) || len(t) > 1 && strings.ContainsAny(t, "*>") ||
				t == ">" && i < len(tokens)-1 {
				return usagef("--subjects %q: not a NATS subject (tokens separated by '.'; '*' stands for one token, a last '>' for the rest)", subject)
			}
		}
	}
	return nil
}

// firstError is the first of errs that is not nil.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
