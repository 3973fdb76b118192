package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jetledger/jetledger/ledger"
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
		typed, say = check, sqlAdvice(check)
	case errors.As(err, &cond) && cond.Field == "Schema":
		typed, say = cond, fmt.Sprintf("--schema %s could not run: %v (the ledger, not the SQL: another process may hold its writer)", cond.Name, cond.Err)
	case errors.As(err, &cond):
		typed, say = cond, fmt.Sprintf("--apply could not be checked: %v (the ledger, not the SQL: another process may hold its writer)", cond.Err)
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

// reworded is an error said in the command line's terms (advise).
type reworded struct {
	err error
	msg string
}

func (r reworded) Error() string { return r.msg }
func (r reworded) Unwrap() error { return r.err }

// sqlAdvice is bad --schema or --apply SQL, said as run says it.
func sqlAdvice(e *sqlhandler.CheckError) string {
	var unbound *sqlhandler.UnboundParamError
	switch {
	case e.Kind == sqlhandler.ErrSchema && errors.Is(e.Err, ledger.ErrFixedSetting):
		return fmt.Sprintf("--schema %s: %v; the ledger runs with synchronous=FULL in WAL mode, which its guarantee rests on: drop the pragma", e.Name, e.Err)
	case e.Kind == sqlhandler.ErrSchema:
		return fmt.Sprintf("--schema %s: %v", e.Name, e.Err)
	case errors.As(e.Err, &unbound):
		return unboundAdvice(unbound)
	case errors.Is(e.Err, ledger.ErrTransactionControl), errors.Is(e.Err, ledger.ErrFixedSetting):
		return fmt.Sprintf("--apply: %v: the ledger owns the transaction and its settings; drop that statement", e.Err)
	}
	return fmt.Sprintf("--apply does not compile: %v (tables it uses must exist: create them with --schema)", e.Err)
}

// unboundAdvice names the parameters of --apply that are not bound, each
// with the bound one it was probably meant to be.
func unboundAdvice(e *sqlhandler.UnboundParamError) string {
	var b strings.Builder
	b.WriteString("--apply uses ")
	positional := false
	for i, p := range e.Params {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p)
		if s := e.Closest(p); s != "" {
			fmt.Fprintf(&b, " (did you mean %s?)", s)
		}
		positional = positional || p[0] == '?'
	}
	if len(e.Params) == 1 {
		b.WriteString(", which is not bound")
	} else {
		b.WriteString(", which are not bound")
	}
	if positional {
		b.WriteString(" (positional parameters never are)")
	}
	b.WriteString(": the parameters are :msg_id, :subject, :seq and :data")
	return b.String()
}
