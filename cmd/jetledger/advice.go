package main

import (
	"errors"
	"strings"

	"github.com/jetledger/jetledger/stream"
)

// advise says the stream package's refusals with the flags, in the words
// the errors say themselves with Names (stream.NoFloorError.Names, ...).
// Their makers (stream.EnsureSourced, CheckServed, EnsureEffects, called
// by the service and prune) do not take the names yet, and wrap them with
// fmt.Errorf, which fixes the text: until they do, the typed error's text
// is replaced by its text with the flags. What err is stays.
func advise(err error) error {
	var (
		floor        *stream.NoFloorError
		inst         *stream.NotTheInstanceError
		fx           *stream.EffectsError
		typed, named error
	)
	switch {
	case errors.As(err, &floor):
		n := *floor
		n.Names, typed, named = map[string]string{"Start": "--hub-start-seq"}, floor, &n
	case errors.As(err, &inst):
		n := *inst
		n.Names, typed, named = map[string]string{"NATS": "--nats", "Run": "run"}, inst, &n
	case errors.As(err, &fx):
		n := *fx
		n.Names, typed, named = map[string]string{"Stream": "--effects-stream", "Subject": "--effects-subject"}, fx, &n
	default:
		return err
	}
	return reworded{err: err, msg: strings.Replace(err.Error(), typed.Error(), named.Error(), 1)}
}

// reworded is an error said in the command line's terms (advise), or
// with its advice (its flags and commands).
type reworded struct {
	err error
	msg string
}

func (r reworded) Error() string { return r.msg }
func (r reworded) Unwrap() error { return r.err }
