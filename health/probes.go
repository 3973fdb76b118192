package health

import (
	"context"
	"fmt"

	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Conn is what the NATS probe reads of a connection (*nats.Conn).
type Conn interface{ Status() nats.Status }

// NATS is the probe "nats": healthy while the client is connected.
func NATS(nc Conn) Probe {
	return Probe{"nats", func(context.Context) error {
		if s := nc.Status(); s != nats.CONNECTED {
			return fmt.Errorf("%w: %s", ErrNotConnected, s)
		}
		return nil
	}}
}

// Writable is what the database probe reads of a ledger (*ledger.Store).
type Writable interface {
	CheckWritable(ctx context.Context) error
}

var _ Writable = (*ledger.Store)(nil)

// Database is the probe "database": it looks at what the next commit
// needs (ledger.Store.CheckWritable) without taking the writer, so a long
// batch does not make the process look dead.
func Database(st Writable) Probe {
	return Probe{"database", st.CheckWritable}
}

// ConsumerInfo is what the consumer probe asks of a consumer
// (*consumer.Consumer).
type ConsumerInfo interface {
	Info(ctx context.Context) (*jetstream.ConsumerInfo, error)
}

// Consumer is the probe "consumer": healthy while the server answers for
// the consumer's durable.
func Consumer(c ConsumerInfo) Probe {
	return Probe{"consumer", func(ctx context.Context) error {
		if _, err := c.Info(ctx); err != nil {
			return fmt.Errorf("%w: %w", ErrConsumerUnavailable, err)
		}
		return nil
	}}
}

// Store is the probe "store" of an embedded JetStream server: fault
// returns the write the server failed and keeps failed (reported as
// StateWriteFailed), nil while it has failed none; then the disk under
// dir (ledger.CheckDisk).
func Store(fault func() error, dir string) Probe {
	return Probe{"store", func(context.Context) error {
		if err := fault(); err != nil {
			return fmt.Errorf("%w: %w", ErrWriteFailed, err)
		}
		return ledger.CheckDisk(dir)
	}}
}

// Link is the probe "hub" of an edge: its leaf link to the hub, down
// reported as StateLinkDown, which degrades the report and leaves it
// healthy.
func Link(up func() (bool, string)) Probe {
	return Probe{"hub", func(context.Context) error {
		if ok, why := up(); !ok {
			return fmt.Errorf("%w: %s", ErrLinkDown, why)
		}
		return nil
	}}
}

// AttentionReader is what the attention probe reads of a ledger
// (*ledger.Store).
type AttentionReader interface {
	Attention(ctx context.Context) ([]ledger.Attention, error)
}

var _ AttentionReader = (*ledger.Store)(nil)

// LedgerDo is what to do about each kind of ledger.Attention.
var LedgerDo = map[string]string{
	ledger.AttentionReview:     "jetledger outbox list --status review; then outbox resolve, retry or cancel",
	ledger.AttentionDeadLetter: "jetledger dlq list; then dlq requeue or discard",
	ledger.AttentionConflict:   "jetledger conflicts list; settle each with its sender, then jetledger conflicts ack ID --note HOW",
	ledger.AttentionNearCap:    "the ledger is near --db-max-size, where every commit fails: jetledger ledger prune, or raise the cap",
}

// Attention is the probe "attention": while any of the ledger's rows need
// a person (ledger.Store.Attention), an *AttentionError with a Need per
// kind that has some. Healthy either way.
func Attention(st AttentionReader) Probe {
	return Probe{"attention", func(ctx context.Context) error {
		as, err := st.Attention(ctx)
		if err != nil {
			return err
		}
		needs := LedgerNeeds(as, "")
		if len(needs) == 0 {
			return nil
		}
		return &AttentionError{Needs: needs}
	}}
}
