package service

import (
	"cmp"
	"errors"
	"fmt"
	"strings"

	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/node"
	"github.com/jetledger/jetledger/stream"
)

// Say is err, an error of Start or Run, with the refusals of the
// libraries below said in c.Names' words: node.Start's of a store in use
// (node.StoreInUseError), a client address it cannot listen on
// (node.ListenError) and a setting (a *node.ConfigError, which becomes a
// *ConfigError), the ledger at Ledger.MaxSizeBytes (ledger.MaxSizeError),
// and the NATS sink's stream missing (ErrNoEffectsStream)
// or another than Effects.Stream (stream.SubjectTakenError), and a stream
// partitioned otherwise than Partitions says (PartitionedError,
// PartitionCountError; a partition named past the count becomes a
// *ConfigError). What err is stays for errors.Is and errors.As, a
// *StepError outermost.
func (c Config) Say(err error) error {
	if st, ok := err.(*StepError); ok { //nolint:errorlint // the service's own, kept outermost
		if said := c.say(st.Err); said != st.Err { //nolint:errorlint // said or not
			return &StepError{Step: st.Step, Err: said}
		}
		return err
	}
	return c.say(err)
}

func (c Config) say(err error) error {
	n := c.Names.withDefaults()
	var (
		inUse *node.StoreInUseError
		held  *node.PathInUseError
		le    *node.ListenError
		ce    *node.ConfigError
		taken *stream.SubjectTakenError
		full  *ledger.MaxSizeError
	)
	switch {
	case errors.As(err, &inUse):
		owner, url := node.LockHolder(inUse.PID), "URL"
		if inUse.URL != "" {
			owner += ", serving " + inUse.URL
			url = inUse.URL
		}
		return said(err, "embedded server store %s is in use by %s (lock %s): stop that process, or give this one another %s or %s, or connect to the running server with %s %s",
			inUse.Dir, owner, inUse.LockFile(), n.Say("DB"), n.Say("Node.StoreDir"), n.Say("NATS.URL"), url)
	case errors.As(err, &held):
		return said(err, "ledger %s is in use by %s (lock %s): another run of this partition on this host; stop it, or give this run its own %s",
			strings.TrimSuffix(held.Path, LedgerLockSuffix), node.LockHolder(held.PID), held.Path, n.Say("DB"))
	case errors.As(err, &le):
		return said(err, "embedded server cannot listen on %s: %v; pass %s URL to use the server already there, or %s to pick another address",
			cmp.Or(c.Node.Listen, node.DefaultListen), le.Err, n.Say("NATS.URL"), n.Say("Node.Listen"))
	case errors.As(err, &ce):
		return &ConfigError{Reason: ce.Reason, Err: err}
	case errors.As(err, &taken) && c.Effects != nil:
		return said(err, "%s %s is captured by stream %s, not %s %s", n.Say("Effects.Subject"), taken.Subject, taken.By, n.Say("Effects.Stream"), c.Effects.Stream)
	case errors.As(err, &full) && c.Ledger.MaxSizeBytes > 0:
		// Not a full disk: the cap, which the user set and may raise.
		return said(err, "the database reached %s %s while its disk has room: raise %s, or prune it (%s); nothing of the failed batch was acked, so it is applied after the restart (%v)",
			n.Say("Ledger.MaxSizeBytes"), node.ByteSize(c.Ledger.MaxSizeBytes), n.Say("Ledger.MaxSizeBytes"), n.Say("Prune"), err)
	case errors.Is(err, ErrNoEffectsStream) && c.Effects != nil:
		return said(err, "no stream captures %s %s: create one, or pass %s NAME to have %s create it", n.Say("Effects.Subject"), c.Effects.Subject, n.Say("Effects.Stream"), n.Program)
	}
	return sayPartitions(err, n)
}

// sayPartitions says the stream's refusals of a run partitioned otherwise
// than the stream is.
func sayPartitions(err error, n Names) error {
	var share *PartitionedError
	var count *PartitionCountError
	switch {
	case errors.As(err, &share):
		return said(err, "stream %s is partitioned into %d: consume it with %s %s I (each partition into its own ledger), or name a partition's durable (%s %s-p0); one consumer over every partition would apply them all into one ledger, beside the partitions' own",
			share.Stream, share.Partitions, n.Program, n.Say("Partitions.Named"), n.Say("Consumer.Durable"), share.Durable)
	case errors.As(err, &count) && count.Have == 0:
		return said(err, "stream %s is not partitioned (no {{partition(N,…)}} subject mapping): create it with %s %s … %s N, or leave out %s",
			count.Stream, n.Program, n.Say("Stream.Subjects"), n.Say("Partitions.Count"), n.Say("Partitions.Named"))
	case errors.As(err, &count) && count.Named:
		return &ConfigError{Reason: fmt.Sprintf("%s %d: stream %s has %d partitions, numbered 0 to %d", n.Say("Partitions.Named"), count.Want, count.Stream, count.Have, count.Have-1), Err: err}
	case errors.As(err, &count):
		return said(err, "stream %s has %d partitions, not %s %d; a partitioned stream keeps its count (leave out %s)",
			count.Stream, count.Have, n.Say("Partitions.Count"), count.Want, n.Say("Partitions.Count"))
	}
	return err
}

// saidError is an error said in the caller's words (Config.Say).
type saidError struct {
	msg string
	err error
}

func said(err error, format string, a ...any) error {
	return &saidError{msg: fmt.Sprintf(format, a...), err: err}
}

func (e *saidError) Error() string { return e.msg }
func (e *saidError) Unwrap() error { return e.err }
