package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/partition"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// StreamDefault is the stream of a Want that names none, whose ledger
// records none either.
const StreamDefault = "EVENTS"

// ErrAmbiguous: a name was left out and the ledger records several
// consumers it could be (AmbiguousError).
var ErrAmbiguous = errors.New("service: the ledger records several consumers that fit")

// Want is the stream and durable a caller is told to use, for Choose. A
// name left out is the one Run recorded in the ledger, else the default:
// what is given always wins.
type Want struct {
	// Stream is the stream. Default "": the one Run recorded in the ledger
	// (with Durable, if given), else StreamDefault.
	Stream string
	// Durable is the durable consumer. Default "": the one Run recorded
	// with the stream, else consumer.DurableDefault.
	Durable string
	// Names are what an AmbiguousError calls Stream and Durable (the paths
	// "Stream" and "Durable"), and Program is what ran: it recorded the
	// consumers. Default: the paths, and "the program".
	Names Names
}

// From is where a chosen name came from.
type From string

// Where the names of a Chosen came from.
const (
	FromGiven   From = "given"   // Want named the stream
	FromLedger  From = "ledger"  // the pair Run recorded in the ledger
	FromDefault From = "default" // StreamDefault and, unless given, consumer.DurableDefault
)

// Chosen is the stream and durable to use, where they came from, and what
// the ledger said of them, for the caller to tell its user.
type Chosen struct {
	Stream, Durable string
	From            From
	// Read is whether the ledger was asked: a name was left out. A ledger
	// yet to be made (ChooseAt) was asked, and records nothing.
	Read bool
	// Recorded is how many consumers the ledger records.
	Recorded int
}

// Defaults is w with the defaults in place of the names left out, no
// ledger asked.
func (w Want) Defaults() Chosen {
	c := Chosen{Stream: w.Stream, Durable: w.Durable, From: FromGiven}
	if c.Stream == "" {
		c.Stream, c.From = StreamDefault, FromDefault
	}
	if c.Durable == "" {
		c.Durable = consumer.DurableDefault
	}
	return c
}

// Origin says where c's names came from, for output and for an error
// about a stream or durable not found (Explain); "" when they were given.
// db is the ledger asked. n names the setting "Stream", the program that
// records the consumers (Program) and, as the setting "Run", how it is
// started (default Program).
func (c Chosen) Origin(db string, n Names) string {
	n = n.withDefaults()
	switch c.From {
	case FromLedger:
		return fmt.Sprintf("as %s recorded them in %s", n.Program, db)
	case FromDefault:
		stream := n.Say("Stream")
		switch {
		case !c.Read:
			return fmt.Sprintf("the defaults: %s not given", stream)
		case c.Recorded > 0:
			return fmt.Sprintf("the defaults: %s not given, and no consumer %s recorded in %s has durable %s", stream, n.Program, db, c.Durable)
		}
		return fmt.Sprintf("the defaults: %s not given, and %s records no stream; %s records the one it consumes",
			stream, db, cmp.Or(n.Settings["Run"], n.Program))
	}
	return ""
}

// Explain adds to err, a stream or durable not found
// (jetstream.ErrStreamNotFound, ErrConsumerNotFound), where c's names came
// from (Origin) when they were not given.
func (c Chosen) Explain(err error, db string, n Names) error {
	o := c.Origin(db, n)
	if o == "" || !(errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrConsumerNotFound)) {
		return err
	}
	return fmt.Errorf("%w (%s)", err, o)
}

// Choose is w with the names left out taken from the consumers Run
// recorded in st: the one pair that fits what w names. Several that fit
// are the caller's to choose from (*AmbiguousError); none, the defaults.
// A durable given alone whose pair is not recorded takes the stream st
// serves, never the default, which would apply another stream's messages
// into st.
func Choose(ctx context.Context, st *ledger.Store, w Want) (Chosen, error) {
	c := w.Defaults()
	if w.Stream != "" && w.Durable != "" {
		return c, nil
	}
	all, err := st.Consumers(ctx)
	if err != nil {
		return Chosen{}, err
	}
	c.Read, c.Recorded = true, len(all)
	var match []ledger.Consumer
	for _, r := range all {
		if (w.Stream == "" || r.Stream == w.Stream) && (w.Durable == "" || r.Durable == w.Durable) {
			match = append(match, r)
		}
	}
	switch {
	case len(match) == 1:
		c.Stream, c.Durable, c.From = match[0].Stream, match[0].Durable, FromLedger
	case len(match) > 1:
		return Chosen{}, &AmbiguousError{Path: st.Path(), Match: match, Names: w.Names.withDefaults()}
	case w.Stream == "" && len(all) > 0:
		streams := map[string]bool{}
		for _, r := range all {
			streams[r.Stream] = true
		}
		if len(streams) > 1 {
			return Chosen{}, &AmbiguousError{Path: st.Path(), Match: all, Names: w.Names.withDefaults()}
		}
		c.Stream, c.From = all[0].Stream, FromLedger
	}
	return c, nil
}

// ChooseAt is Choose with the ledger at path, opened with cfg if a name is
// left out. A ledger that does not exist yet records nothing, and is not
// created. An error of ledger.Open is returned as it is.
func ChooseAt(ctx context.Context, path string, cfg ledger.Config, w Want) (Chosen, error) {
	if w.Stream != "" && w.Durable != "" {
		return w.Defaults(), nil
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		c := w.Defaults()
		c.Read = true
		return c, nil
	}
	st, err := ledger.Open(path, cfg)
	if err != nil {
		return Chosen{}, err
	}
	defer st.Close()
	return Choose(ctx, st, w)
}

// AmbiguousError is ErrAmbiguous: the consumers recorded in the ledger at
// Path that fit what was given. Its text names the settings that say which
// in Names' words.
type AmbiguousError struct {
	Path  string
	Match []ledger.Consumer
	Names Names
}

func (e *AmbiguousError) Error() string {
	streams := map[string]bool{}
	pairs := make([]string, len(e.Match))
	for i, c := range e.Match {
		streams[c.Stream] = true
		pairs[i] = fmt.Sprintf("stream %s (durable %s)", c.Stream, c.Durable)
	}
	stream, durable := e.Names.Say("Stream"), e.Names.Say("Durable")
	if len(streams) == 1 {
		return fmt.Sprintf("%s not given and %s records %d durables that %s served on stream %s: %s; give %s to say which",
			durable, e.Path, len(e.Match), e.Names.Program, e.Match[0].Stream, strings.Join(pairs, ", "), durable)
	}
	give := stream
	if len(streams) < len(e.Match) {
		give = stream + " and " + durable
	}
	return fmt.Sprintf("%s not given and %s records %d consumers that %s served: %s; give %s to say which",
		stream, e.Path, len(e.Match), e.Names.Program, strings.Join(pairs, ", "), give)
}

// Unwrap makes errors.Is(err, ErrAmbiguous) hold.
func (e *AmbiguousError) Unwrap() error { return ErrAmbiguous }

// RecordedServer is the NATS server the ledger at path records for the
// consumer w names, else the one it reached last (ledger.Consumer.
// ServerURL); a partitioned run's first partition's ledger is read when
// path is not there. "" when none is recorded or nothing can be read.
func RecordedServer(ctx context.Context, path string, w Want) string {
	if _, err := os.Stat(path); err != nil {
		path = partition.Ledger(path, 0)
	}
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	st, err := ledger.OpenExisting(path, ledger.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return ""
	}
	defer st.Close()
	all, _ := st.Consumers(ctx) // the one seen last first
	last := ""
	for _, c := range all {
		if (w.Stream == "" || c.Stream == w.Stream) && (w.Durable == "" || c.Durable == w.Durable) && c.ServerURL != "" {
			return c.ServerURL
		}
		last = cmp.Or(last, c.ServerURL)
	}
	return last // another consumer's: the server this ledger's run used last
}
