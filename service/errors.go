package service

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

var (
	// ErrInvalidConfig: a Config is refused before any I/O.
	ErrInvalidConfig = errors.New("service: invalid config")
	// ErrNoStream: the stream does not exist and Config.Stream gives no
	// subjects to create it with (stream.ErrNotFound, outside an edge).
	ErrNoStream = errors.New("service: the stream does not exist and no subjects are given to create it")
	// ErrNoEffectsStream: no stream captures Effects.Subject and
	// Effects.Stream is empty.
	ErrNoEffectsStream = errors.New("service: no stream captures the effects subject")
	// ErrPartitioned: the stream is partitioned and the consumer is given
	// no partition's share (PartitionedError).
	ErrPartitioned = errors.New("service: the stream is partitioned and the consumer takes no partition")
	// ErrNotPartitioned: RunPartitions met a stream without a partition
	// mapping (PartitionCountError).
	ErrNotPartitioned = errors.New("service: the stream is not partitioned")
	// ErrPartitionCount: the stream has another partition count than
	// Partitions.Count, or fewer partitions than one named
	// (PartitionCountError).
	ErrPartitionCount = errors.New("service: the stream has another partition count")
)

// ConfigError is ErrInvalidConfig with what is wrong, said in Names'
// words: a command line prints Reason as its usage error.
type ConfigError struct {
	Reason string
	Err    error // the library's refusal it says, if any
}

func (e *ConfigError) Error() string { return ErrInvalidConfig.Error() + ": " + e.Reason }

// Refusal is Reason: what a command line prints as its usage error.
func (e *ConfigError) Refusal() string { return e.Reason }

// Unwrap gives ErrInvalidConfig and the library's refusal, for errors.Is.
func (e *ConfigError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalidConfig}
	}
	return []error{ErrInvalidConfig, e.Err}
}

// Step names the part of a run an error came from, so that a caller can
// say it in its own terms (a command line names its flags) without
// matching error text.
type Step string

// The steps of Start and Run, in their order.
const (
	StepSQL      Step = "sql"      // Config.SQL checked or run (sqlhandler.Check, sqlhandler.New)
	StepNode     Step = "node"     // the embedded node started (node.Start)
	StepConnect  Step = "connect"  // Config.Dial
	StepServer   Step = "server"   // the server's JetStream (stream.RequireJetStream)
	StepLedger   Step = "ledger"   // the ledger opened (ledger.Open)
	StepStream   Step = "stream"   // the stream ensured (stream.Ensure, stream.EnsureSourced)
	StepEffects  Step = "effects"  // the NATS sink and its stream (natssink.New, stream.EnsureEffects)
	StepOutbox   Step = "outbox"   // the dispatcher made (outbox.New)
	StepConsumer Step = "consumer" // the consumer bound (consumer.New)
	StepMetrics  Step = "metrics"  // the collectors and health handler made
	StepPrune    Step = "prune"    // the pruner checked (prune.Pruner.Check)
	StepRun      Step = "run"      // consuming: the consumer, dispatcher and store watch
	StepBounds   Step = "bounds"   // a replay's bounds read (replay.ReadBounds)
)

// StepError is an error of Start or Run with the step it came from. Its
// text is the step's error unchanged: the step is for errors.As.
type StepError struct {
	Step Step
	Err  error
}

func (e *StepError) Error() string { return e.Err.Error() }
func (e *StepError) Unwrap() error { return e.Err }

// step wraps a non-nil err as a *StepError of s.
func step(s Step, err error) error {
	if err == nil {
		return nil
	}
	return &StepError{Step: s, Err: err}
}

// PartitionedError is ErrPartitioned with the stream's partition count.
type PartitionedError struct {
	Stream     string
	Partitions int
	Durable    string // the consumer's, no partition's
}

func (e *PartitionedError) Error() string {
	return fmt.Sprintf("service: stream %s is partitioned into %d and durable %s names no partition", e.Stream, e.Partitions, e.Durable)
}
func (e *PartitionedError) Unwrap() error { return ErrPartitioned }

// PartitionCountError is ErrNotPartitioned (Have 0) or ErrPartitionCount.
type PartitionCountError struct {
	Stream string
	Have   int // the stream's partitions
	Want   int // Partitions.Count, or the partition named past the count (Named set)
	Named  bool
}

func (e *PartitionCountError) Error() string {
	if e.Have == 0 {
		return fmt.Sprintf("service: stream %s is not partitioned", e.Stream)
	}
	if e.Named {
		return fmt.Sprintf("service: stream %s has %d partitions, none numbered %d", e.Stream, e.Have, e.Want)
	}
	return fmt.Sprintf("service: stream %s has %d partitions, not %d", e.Stream, e.Have, e.Want)
}

func (e *PartitionCountError) Unwrap() error {
	if e.Have == 0 {
		return ErrNotPartitioned
	}
	return ErrPartitionCount
}

// NoStreamError is ErrNoStream for the stream, said in Names' words.
type NoStreamError struct {
	Stream   string
	Subjects string // what the caller calls Stream.Subjects
	Err      error  // stream.ErrNotFound's
}

func (e *NoStreamError) Error() string {
	return fmt.Sprintf("stream %s does not exist; pass %s to create it", e.Stream, e.Subjects)
}
func (e *NoStreamError) Unwrap() []error { return []error{ErrNoStream, e.Err} }

// NoJetStreamError is stream.ErrNoJetStream of the server at URL, said in
// Names' words.
type NoJetStreamError struct {
	URL  string // redacted
	NATS string // what the caller calls NATS
	Err  error
}

func (e *NoJetStreamError) Error() string {
	why := jetstream.ErrJetStreamNotEnabled
	if errors.Is(e.Err, jetstream.ErrJetStreamNotEnabledForAccount) {
		why = jetstream.ErrJetStreamNotEnabledForAccount
	}
	return fmt.Sprintf("the server at %s has no JetStream for this account (%v): enable JetStream there, or leave out %s to use the embedded server", e.URL, why, e.NATS)
}
func (e *NoJetStreamError) Unwrap() error { return e.Err }
