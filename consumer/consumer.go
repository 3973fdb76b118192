package consumer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Ledger is what the consumer needs of the store.
type Ledger interface {
	ApplyBatchPipelined(ctx context.Context, batch []ledger.Delivery, h ledger.Handler, b ledger.Budget) ([]ledger.Result, ledger.Pending, error)
	RecordDeadLetters(ctx context.Context, dls []ledger.DeadLetter) error
	HasDeadLetter(ctx context.Context, stream, instance string, seq uint64) (bool, error)
	HasProcessed(ctx context.Context, stream string, seq uint64, id string) (bool, error)
	ClassifyUnseen(ctx context.Context, d ledger.Delivery) (ledger.Outcome, error)
	AdoptSequenceIDs(ctx context.Context, stream, prefix string, created time.Time) (int64, error)
	WarmIndex(ctx context.Context) error
}

var _ Ledger = (*ledger.Store)(nil)

// JetStream is what the consumer needs of the JetStream client: consumer
// management, and the connection to flush acks before it returns.
type JetStream interface {
	jetstream.StreamConsumerManager
	Stream(ctx context.Context, stream string) (jetstream.Stream, error)
	Conn() *nats.Conn
}

// Defaults for Config fields left at zero.
const (
	DurableDefault     = "jetledger"
	MaxDeliverDefault  = 5
	BackoffBaseDefault = time.Second
	BackoffMaxDefault  = time.Minute
	FetchWaitDefault   = time.Second
)

// Config configures a Consumer.
type Config struct {
	// Stream is the stream to consume. Required.
	Stream string
	// Durable is the durable pull consumer's name. Default "jetledger".
	Durable string
	// FilterSubjects restricts a consumer this package creates. Default: all.
	FilterSubjects []string
	// Plan is the timing budget; AckWait of a created consumer is
	// Plan.AckWait(), and an existing consumer must satisfy Plan.Validate.
	Plan ackwait.Plan
	// Handler applies one message inside the batch transaction. Required.
	Handler ledger.Handler
	// MaxDeliver is how many deliveries a failing message gets before it is
	// dead-lettered. Default 5; -1 is unlimited. The consumer enforces it
	// itself and creates durables with no server-side limit; an existing
	// durable's own lower limit is honoured, with a warning.
	MaxDeliver int
	// Backoff spaces the redeliveries of a failing message (its nak delay).
	// Default 1s doubling to 1m.
	Backoff ackwait.Backoff
	// FetchWait is how long an idle consumer's pull request waits for a
	// message; it bounds how long shutdown waits. Default 1s, and never more
	// than the plan's BufferWait: a message's age counts from its request.
	FetchWait time.Duration
	// AllowSequenceIDs makes a message without Nats-Msg-Id use
	// SequenceID's "<stream>@<created>/<seq>" as its id (created: the
	// stream's creation time in Unix nanoseconds, so a stream made again
	// does not meet the old one's rows) instead of being dead-lettered. Such
	// an id catches redeliveries but not a publisher's retried publish.
	AllowSequenceIDs bool
	// AfterCommit, if set, is called after each batch commits and its
	// commit is on disk, before its acks are sent.
	AfterCommit func(BatchReport)
	// AfterAcks, if set, is called once a batch's acks, naks and terms are
	// sent (or it was handed back), with how long that took and how long the
	// batch held its messages.
	AfterAcks func(AckReport)
	// Replay, if set, makes New create an ephemeral consumer that starts at
	// this position, instead of binding Durable.
	Replay *ReplayFrom
	// Metadata is added to the metadata of the consumers New creates, so
	// that a NATS user can tell who made them: give the program's version
	// under MetadataVersion, say. The package's own keys (MetadataCreatedBy,
	// MetadataPlan, MetadataMaxDeliver) are set over it; keys beginning
	// with "_nats." are the server's and refused. Default: none.
	Metadata map[string]string
	// Names are what a refusal (*PlanError) calls the settings: a
	// setting's path in Config ("Plan.Deadline") to the caller's name for
	// it ("--deadline"). Default: the paths.
	Names map[string]string
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// ReplayFrom is where a replay starts: a stream sequence, a time, or (both
// zero) the start of the stream; and where it ends.
type ReplayFrom struct {
	Seq  uint64
	Time time.Time
	// UpTo is the last stream sequence replayed; later messages are left to
	// the live consumer. 0: to the end of the stream.
	UpTo uint64
}

// BatchReport describes a committed batch.
type BatchReport struct {
	Deliveries []ledger.Delivery
	Results    []ledger.Result
	// Elapsed is the time from the start of the batch's transaction to its
	// commit on disk, handlers included.
	Elapsed time.Duration
	// Received is when each of Deliveries arrived from the server, in
	// their order; Started, Committed and Durable are when the batch's
	// transaction began, when it committed, and when the commit was known
	// to be on disk (this report's time): where a slow message's time went.
	Received                    []time.Time
	Started, Committed, Durable time.Time
}

// AckReport describes the answers sent for one batch.
type AckReport struct {
	N       int           // acks, naks and terms sent
	Elapsed time.Duration // time to send them
	// Held is the longest a message of the batch was held since the server
	// last restarted its AckWait (its receipt, or an InProgress) until the
	// answer. It must stay below AckWait, or the server delivers the message
	// again meanwhile.
	Held time.Duration
	// Batch is the time from the batch's start (after its messages were
	// admitted) to the answers: the plan keeps it within Deadline +
	// CommitTimeout plus the ack's trip.
	Batch time.Duration
}

// Counts are running totals since the Consumer was made.
type Counts struct {
	Applied     uint64 `json:"applied"`
	Duplicates  uint64 `json:"duplicates"`
	Conflicts   uint64 `json:"conflicts"`
	Failed      uint64 `json:"failed"`
	Naks        uint64 `json:"naks"`
	Terms       uint64 `json:"terms"`
	DeadLetters uint64 `json:"dead_letters"`
	Stale       uint64 `json:"stale"` // left to redelivery: waited past AckWait in the buffer
	Batches     uint64 `json:"batches"`
	Advisories  uint64 `json:"advisories"` // max-deliveries advisories handled
	Beyond      uint64 `json:"beyond"`     // replay: messages past ReplayFrom.UpTo, left alone
}

type counters struct {
	applied, duplicates, conflicts, failed, naks, terms, deadLetters, stale, batches, advisories, beyond atomic.Uint64
}

// Consumer consumes one durable through the ledger.
type Consumer struct {
	cfg       Config
	plan      ackwait.Plan
	js        JetStream
	cons      jetstream.Consumer
	consName  string    // cons's name: the durable, or a replay's ephemeral one
	serverMax int       // the durable's server-side MaxDeliver, 0 or -1 for none
	created   time.Time // the stream's creation time: part of sequence ids
	// streamInstance names the stream instance (StreamInstance): dead
	// letters and deliveries carry it.
	streamInstance string
	ledger         Ledger
	log            *slog.Logger
	maxDeliver     int
	n              counters
	warnSeqIDs     sync.Once
	fenced         atomic.Bool // a batch was fenced since the last commit (sayHandedBack)
}

// New validates cfg, then binds to the durable consumer or creates it with
// the plan's AckWait. An existing consumer that does not satisfy the plan is
// refused with an error wrapping ackwait.ErrAckWaitTooShort (or another
// ackwait sentinel) that names the durations and the fix: a *PlanError
// where the durable or the plan can be changed to fit.
func New(ctx context.Context, js JetStream, l Ledger, cfg Config) (*Consumer, error) {
	if cfg.Stream == "" {
		return nil, fmt.Errorf("%w: Stream is required", ErrInvalidConfig)
	}
	if cfg.Handler == nil {
		return nil, fmt.Errorf("%w: Handler is required", ErrInvalidConfig)
	}
	if cfg.MaxDeliver < -1 || cfg.Backoff.Base < 0 || cfg.Backoff.Max < 0 || cfg.FetchWait < 0 {
		return nil, fmt.Errorf("%w: MaxDeliver must be -1 or more, durations not negative", ErrInvalidConfig)
	}
	if err := cfg.Plan.Check(); err != nil {
		return nil, err
	}
	cfg.Durable = cmp.Or(cfg.Durable, DurableDefault)
	cfg.MaxDeliver = cmp.Or(cfg.MaxDeliver, MaxDeliverDefault)
	cfg.Backoff.Base = cmp.Or(cfg.Backoff.Base, BackoffBaseDefault)
	cfg.Backoff.Max = cmp.Or(cfg.Backoff.Max, BackoffMaxDefault)
	cfg.FetchWait = cmp.Or(cfg.FetchWait, FetchWaitDefault)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Consumer{cfg: cfg, plan: cfg.Plan.WithDefaults(), js: js, ledger: l, log: cfg.Logger}
	cons, err := c.bind(ctx)
	if err != nil {
		return nil, err
	}
	c.cons, c.consName = cons, cons.CachedInfo().Name
	return c, nil
}

// refusal is err, the plan's refusal of the durable, as New returns it: a
// *PlanError (PlanRefusal), or err after the consumer's name.
func (c *Consumer) refusal(err error) error {
	if err = PlanRefusal(c.cfg.Stream, c.cfg.Durable, c.plan.BatchSize, err, c.cfg.Names); errors.As(err, new(*PlanError)) {
		return err
	}
	return fmt.Errorf("consumer %s/%s: %w", c.cfg.Stream, c.cfg.Durable, err)
}

// Info returns the server's view of the consumer: pending, redelivered,
// ack floor.
func (c *Consumer) Info(ctx context.Context) (*jetstream.ConsumerInfo, error) {
	return c.cons.Info(ctx)
}

// Counts returns the running totals.
func (c *Consumer) Counts() Counts {
	return Counts{
		Applied: c.n.applied.Load(), Duplicates: c.n.duplicates.Load(), Conflicts: c.n.conflicts.Load(),
		Failed: c.n.failed.Load(), Naks: c.n.naks.Load(), Terms: c.n.terms.Load(),
		DeadLetters: c.n.deadLetters.Load(), Stale: c.n.stale.Load(), Batches: c.n.batches.Load(),
		Advisories: c.n.advisories.Load(), Beyond: c.n.beyond.Load(),
	}
}
