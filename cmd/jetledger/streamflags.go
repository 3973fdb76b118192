package main

import (
	"context"
	"errors"

	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/service"
)

// streamDefault is the stream of a command told none, whose ledger names
// none either.
const streamDefault = service.StreamDefault

// streamFlags name the stream and run's durable consumer on it. A name left
// out is the one run recorded in the ledger (service.Choose), else the
// default. The flags have no default of their own, so that one given, even
// as EVENTS, is told apart from one left out: what is given always wins.
type streamFlags struct {
	Stream  string `name:"stream" placeholder:"NAME" help:"stream (default: the one run recorded in the ledger, or EVENTS)"`
	Durable string `name:"durable" placeholder:"NAME" help:"${durable_help} (default: the one run recorded with the stream, or ${durable_default})"`

	given  *service.Want // the names given, kept by validate, so resolve may replace the defaults
	from   namesFrom
	chosen service.Chosen
}

// namesFrom is where the stream and durable a command uses came from.
type namesFrom = service.From

const (
	fromGiven   = service.FromGiven   // the command line, environment or config file
	fromLedger  = service.FromLedger  // the pair run recorded in the ledger
	fromDefault = service.FromDefault // EVENTS and the default durable
)

// streamNames are what the choice of a stream and durable calls them.
var streamNames = service.Names{Program: "run", Settings: map[string]string{"Stream": "--stream", "Durable": "--durable", "Run": "'jetledger run'"}}

// validate checks the names given and fills in the defaults for those left
// out; where a ledger can name them, resolve replaces the defaults next.
func (f *streamFlags) validate() error {
	if f.given == nil {
		f.given = &service.Want{Stream: f.Stream, Durable: f.Durable, Names: streamNames}
		f.take(f.given.Defaults())
	}
	if err := checkName("--stream", f.Stream); err != nil {
		return err
	}
	return checkName("--durable", f.Durable)
}

// use takes the names chosen; several recorded pairs that fit are a usage
// error naming them: which one is meant is the user's to say.
func (f *streamFlags) use(c service.Chosen, err error) error {
	if errors.As(err, new(*service.AmbiguousError)) {
		return usageError{err}
	}
	if err == nil {
		f.take(c)
	}
	return err
}

func (f *streamFlags) take(c service.Chosen) {
	f.chosen, f.Stream, f.Durable, f.from = c, c.Stream, c.Durable, c.From
}

// resolve replaces the names validate defaulted with the pair run recorded
// in st that matches the names given.
func (f *streamFlags) resolve(ctx context.Context, st *ledger.Store) error {
	return f.use(service.Choose(ctx, st, *f.given))
}

// resolveFrom is resolve for run and replay, whose ledger may not exist
// yet: a new one names nothing, and is not created here.
func (f *streamFlags) resolveFrom(ctx context.Context, db dbFlag) error {
	c, err := service.ChooseAt(ctx, db.DB, ledgerConfig(ledger.Config{Logger: quiet}), *f.given)
	if errors.Is(err, ledger.ErrInvalidConfig) {
		return usagef("--db %q: %w", db.DB, err)
	}
	return f.use(c, err)
}

// origin says where the names came from (service.Chosen.Origin); "" when
// they were given.
func (f *streamFlags) origin(db string) string { return f.chosen.Origin(db, streamNames) }

// explain adds to err, a stream or durable not found, where the names came
// from when they were not given (service.Chosen.Explain).
func (f *streamFlags) explain(err error, db string) error {
	return f.chosen.Explain(err, db, streamNames)
}
