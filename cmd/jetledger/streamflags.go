package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// streamDefault is the stream of a command told none, whose ledger names
// none either.
const streamDefault = "EVENTS"

// streamFlags name the stream and run's durable consumer on it. A name left
// out is the one run recorded in the ledger (resolve), else the default.
// The flags have no default of their own, so that one given, even as
// EVENTS, is told apart from one left out: what is given always wins.
type streamFlags struct {
	Stream  string `name:"stream" placeholder:"NAME" help:"stream (default: the one run recorded in the ledger, or EVENTS)"`
	Durable string `name:"durable" placeholder:"NAME" help:"${durable_help} (default: the one run recorded with the stream, or ${durable_default})"`

	defaulted struct{ stream, durable bool } // filled in by validate, so resolve may replace them
	from      namesFrom
	read      bool // resolve read the ledger
	recorded  int  // pairs the ledger records
}

// namesFrom is where the stream and durable a command uses came from.
type namesFrom string

const (
	fromGiven   namesFrom = "given"   // the command line, environment or config file
	fromLedger  namesFrom = "ledger"  // the pair run recorded in the ledger
	fromDefault namesFrom = "default" // EVENTS and the default durable
)

// validate checks the names given and fills in the defaults for those left
// out; where a ledger can name them, resolve replaces the defaults next.
func (f *streamFlags) validate() error {
	if f.from == "" {
		f.from = fromGiven
		if f.Stream == "" {
			f.Stream, f.defaulted.stream, f.from = streamDefault, true, fromDefault
		}
		if f.Durable == "" {
			f.Durable, f.defaulted.durable = consumer.DurableDefault, true
		}
	}
	if err := checkName("--stream", f.Stream); err != nil {
		return err
	}
	return checkName("--durable", f.Durable)
}

// resolve replaces the names validate defaulted with the pair run recorded
// in st that matches the names given. Several such pairs are a usage error
// naming them: which one is meant is the user's to say.
func (f *streamFlags) resolve(ctx context.Context, st *ledger.Store) error {
	if !f.defaulted.stream && !f.defaulted.durable {
		return nil
	}
	all, err := st.Consumers(ctx)
	if err != nil {
		return err
	}
	f.read, f.recorded = true, len(all)
	var match []ledger.Consumer
	for _, c := range all {
		if (f.defaulted.stream || c.Stream == f.Stream) && (f.defaulted.durable || c.Durable == f.Durable) {
			match = append(match, c)
		}
	}
	switch {
	case len(match) == 1:
		f.Stream, f.Durable, f.from = match[0].Stream, match[0].Durable, fromLedger
		return nil
	case len(match) > 1:
		return f.ambiguous(st.Path(), match)
	case f.defaulted.stream && len(all) > 0:
		// A new durable given alone: its stream is the one this ledger
		// serves, never the default, which would apply another stream's
		// messages into it.
		streams := map[string]bool{}
		for _, c := range all {
			streams[c.Stream] = true
		}
		if len(streams) > 1 {
			return f.ambiguous(st.Path(), all)
		}
		f.Stream, f.from = all[0].Stream, fromLedger
	}
	return nil
}

// ambiguous is the usage error of several recorded pairs that fit.
func (f *streamFlags) ambiguous(db string, match []ledger.Consumer) error {
	streams := map[string]bool{}
	pairs := make([]string, len(match))
	for i, c := range match {
		streams[c.Stream] = true
		pairs[i] = fmt.Sprintf("stream %s (durable %s)", c.Stream, c.Durable)
	}
	if len(streams) == 1 {
		return usagef("--durable not given and %s records %d durables that run served on stream %s: %s; give --durable to say which",
			db, len(match), match[0].Stream, strings.Join(pairs, ", "))
	}
	flags := "--stream"
	if len(streams) < len(match) {
		flags = "--stream and --durable"
	}
	return usagef("--stream not given and %s records %d consumers that run served: %s; give %s to say which",
		db, len(match), strings.Join(pairs, ", "), flags)
}

// resolveFrom is resolve for run and replay, whose ledger may not exist
// yet: a new one names nothing, and is not created here.
func (f *streamFlags) resolveFrom(ctx context.Context, db dbFlag) error {
	if !f.defaulted.stream && !f.defaulted.durable {
		return nil
	}
	if _, err := os.Stat(db.DB); errors.Is(err, fs.ErrNotExist) {
		f.read = true // a ledger yet to be made records nothing
		return nil
	}
	st, err := db.open(ledger.Config{Logger: quiet})
	if err != nil {
		return err
	}
	defer st.Close()
	return f.resolve(ctx, st)
}

// origin says where the names came from, for output and for an error about
// a stream or durable not found; "" when they were given.
func (f *streamFlags) origin(db string) string {
	switch f.from {
	case fromLedger:
		return fmt.Sprintf("as run recorded them in %s", db)
	case fromDefault:
		switch {
		case !f.read:
			return "the defaults: --stream not given"
		case f.recorded > 0:
			return fmt.Sprintf("the defaults: --stream not given, and no consumer run recorded in %s has durable %s", db, f.Durable)
		}
		return fmt.Sprintf("the defaults: --stream not given, and %s records no stream; 'jetledger run' records the one it consumes", db)
	}
	return ""
}

// explain adds to err, a stream or durable not found, where the names came
// from when they were not given.
func (f *streamFlags) explain(err error, db string) error {
	o := f.origin(db)
	if o == "" || !(errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrConsumerNotFound)) {
		return err
	}
	return fmt.Errorf("%w (%s)", err, o)
}
