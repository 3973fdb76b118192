package kongx

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/alecthomas/kong"

	"github.com/jetledger/jetledger/ackwait"
)

// Flag values kong would take as given: a flag left without a value, a
// value that is the next flag, an explicitly empty value. Each is a usage
// error naming the flag, found before any I/O.

// valueMappers make kong's mappers of the value types flags commonly use
// refuse a missing value. kong.WithHyphenPrefixedParameters lets a negative
// number be a value (--max-deliver -1), and with it any word that starts
// with '-', even the next flag or none at all; this takes the flags back.
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
		return &MissingValueError{Flag: "--" + ctx.Value.Name}
	}
	if s, ok := t.Value.(string); ok && t.Type == kong.UntypedToken && strings.HasPrefix(s, "-") && s != "-" && !negativeNumber(s) {
		return &MissingValueError{Flag: "--" + ctx.Value.Name, Next: s}
	}
	return nil
}

// PopFlagValue reads the value of a flag of a custom type, in its
// kong.MapperValue's Decode, refusing a missing one (a *MissingValueError)
// as the mappers of Options do. what names the value in kong's errors.
func PopFlagValue(ctx *kong.DecodeContext, what string) (string, error) {
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

// CheckNotEmpty refuses (with an *EmptyValueError) a string flag given an
// empty value on the command line or in the config file: an unset shell
// variable (--webhook "$URL") must not silently turn a feature off or a
// default on. Call it after kong.Kong.Parse.
func CheckNotEmpty(kctx *kong.Context) error {
	for _, p := range kctx.Path {
		f := p.Flag
		if f == nil || f.IsBool() || f.Target.Kind() != reflect.String || f.Target.String() != "" {
			continue
		}
		return &EmptyValueError{Flag: "--" + f.Name, InFile: p.Resolved}
	}
	return nil
}
