package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jetledger/jetledger/sqlhandler"
	"github.com/jetledger/jetledger/stream"
)

// advise rewords a command's error in the command line's terms: the
// libraries' typed errors name the Config fields a Go program sets
// (sqlhandler's Config.Apply, stream's Sourced.Start); the command line
// names the flags that set them, with its own advice. What err is
// (errors.Is, errors.As, a usageError) is kept. fmt.Errorf fixes a
// wrapper's text when it wraps, so the typed error's own text is the part
// replaced, and the context the callers added stays around it.
func advise(err error) error {
	var (
		check *sqlhandler.CheckError
		cond  *sqlhandler.ConditionError
		floor *stream.NoFloorError
		inst  *stream.NotTheInstanceError
		fx    *stream.EffectsError
		typed error
		say   string
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &check):
		typed, say = check, check.Say("--schema", "--apply")
	case errors.As(err, &cond):
		typed, say = cond, cond.Say("--schema", "--apply")
	case errors.As(err, &floor):
		typed, say = floor, fmt.Sprintf("%v: stream %s is missing, and this ledger holds %d rows of it but no record of where in %s the rows it pruned end (an earlier jetledger pruned it without one); copied from its start, %s would apply those messages a second time: "+
			"give --hub-start-seq with %s's sequence of the first message this ledger has not applied (1 if it never pruned this stream), or bring the stream's store back",
			stream.ErrNoFloor, floor.Stream, floor.Rows, floor.Source, floor.Stream, floor.Hub)
	case errors.As(err, &inst):
		typed, say = inst, fmt.Sprintf("%v: stream %s here was created %s, the one this ledger served %s (another server's stream of that name, or one made again since): point --nats at the server run consumes, or run on this stream first, which records it",
			stream.ErrNotTheInstance, inst.Stream, inst.Created.UTC().Format(time.RFC3339Nano), inst.Served)
	case errors.As(err, &fx) && fx.Op == "create":
		typed, say = fx, fmt.Sprintf("create --effects-stream %s: %v", fx.Stream, fx.Err)
	case errors.As(err, &fx):
		typed, say = fx, fmt.Sprintf("find the stream for --effects-subject %s: %v", fx.Subject, fx.Err)
	default:
		return err
	}
	return reworded{err: err, msg: strings.Replace(err.Error(), typed.Error(), say, 1)}
}

// reworded is an error said in the command line's terms (advise), or
// with its advice (its flags and commands).
type reworded struct {
	err error
	msg string
}

func (r reworded) Error() string { return r.msg }
func (r reworded) Unwrap() error { return r.err }
