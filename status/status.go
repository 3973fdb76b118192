package status

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/partition"
	"github.com/jetledger/jetledger/fleet"
	"github.com/jetledger/jetledger/health"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStream is what Read and Check ask of the server: a
// jetstream.JetStream has it.
type JetStream interface {
	Stream(ctx context.Context, stream string) (jetstream.Stream, error)
	Consumer(ctx context.Context, stream, consumer string) (jetstream.Consumer, error)
}

var _ JetStream = jetstream.JetStream(nil)

// Config says which consumer Read and Check look at, and how. The zero
// value reads a ledger alone; a JetStream needs Stream and Durable.
type Config struct {
	// Stream is the stream read. Required when a JetStream is given.
	Stream string
	// Durable is the durable consumer read on Stream; of a partitioned
	// stream, the name its partitions' durables are made from
	// (partition.Durable). Required when a JetStream is given.
	Durable string
	// Plan is the timing plan the consumer's AckWait is checked against.
	// The zero value is the default plan.
	Plan ackwait.Plan
	// Partitions are the partitions of a partitioned run whose ledgers,
	// partition.Ledger(DB, i), are on this host (LocalPartitions finds
	// them): Read opens and reads each of them instead of a ledger of its
	// own. Default none.
	Partitions []int
	// DB is the path the partitions' ledgers are named from. Required with
	// Partitions.
	DB string
	// Logger is given to the partitions' ledgers. Default slog.Default().
	Logger *slog.Logger
	// Effects is an edge's effects stream, whose effects not yet at the
	// hub are counted (fleet.ReadSourcing). Default "": not counted.
	Effects string
	// Names are what a consumer's Refusal (*consumer.PlanError) calls the
	// settings: a setting's path in Config ("Plan.Deadline") to the
	// caller's name for it ("--deadline"). Default: the paths.
	Names map[string]string
}

func (c Config) validate(js JetStream, st *ledger.Store) error {
	if js != nil && (c.Stream == "" || c.Durable == "") {
		return fmt.Errorf("%w: a JetStream without Stream and Durable", ErrInvalidConfig)
	}
	if len(c.Partitions) > 0 && (c.DB == "" || st != nil) {
		return fmt.Errorf("%w: Partitions need DB, and no ledger of their own", ErrInvalidConfig)
	}
	seen := map[int]bool{}
	for _, i := range c.Partitions {
		if i < 0 || seen[i] {
			return fmt.Errorf("%w: partition %d is negative or given twice", ErrInvalidConfig, i)
		}
		seen[i] = true
	}
	if err := c.Plan.Check(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

// Report is what Read found. A part that could not be read is nil, and
// why is among Problems.
type Report struct {
	Stream   *Stream                 `json:"stream,omitempty"`
	Consumer *Consumer               `json:"consumer,omitempty"` // nil for a partitioned stream: see Partitions
	Ledger   *ledger.Stats           `json:"ledger,omitempty"`   // of partitions, their sum with no Path
	Outbox   map[ledger.Status]int64 `json:"outbox,omitempty"`   // rows per state
	// Partitions is every partition of a partitioned stream, its durable
	// and its ledger when that is on this host.
	Partitions []Partition `json:"partitions,omitempty"`
	// Hub is an edge's sourcing from its hub, when the stream copies one.
	Hub *fleet.Link `json:"hub,omitempty"`
	// Attention is what needs a person in the ledgers read: each kind
	// that has some, and where.
	Attention []health.Need `json:"attention,omitempty"`
	// Problems are the parts that could not be read and the plan's refusal
	// of the consumer (ackwait.Plan.Validate's error), in the order met.
	Problems []error `json:"-"`
}

// Stream is the stream's part of a Report.
type Stream struct {
	Name            string        `json:"name"`
	FirstSeq        uint64        `json:"first_seq"`
	LastSeq         uint64        `json:"last_seq"`
	Messages        uint64        `json:"messages"`
	DuplicateWindow time.Duration `json:"duplicate_window_ns"`
}

// Consumer is the durable consumer's part of a Report: what its AckWait is
// against what the plan needs, and how far it got.
type Consumer struct {
	Name             string        `json:"name"`
	AckWait          time.Duration `json:"ack_wait_ns"`
	PlanAckWait      time.Duration `json:"plan_ack_wait_ns"`
	Safe             bool          `json:"safe"` // the plan holds for it
	Pending          uint64        `json:"pending"`
	AckPending       int           `json:"ack_pending"`
	Redelivered      int           `json:"redelivered"`
	AckFloorSeq      uint64        `json:"ack_floor_seq"`
	ServerMaxDeliver int           `json:"server_max_deliver"`
	// Refusal is why the plan refuses the consumer (wrapping
	// ackwait.ErrAckWaitTooShort, ErrAckPolicy or ErrMaxAckPending): a
	// *consumer.PlanError, saying the fix in Config.Names' words, where
	// changing the durable or the plan fixes it. Nil when Safe.
	Refusal error `json:"-"`
}

// Read gathers the report of the consumer cfg names: the stream and the
// consumer (or every partition's durable) from js, and the ledger's stats
// and outbox counts from st, or from the ledgers of cfg.Partitions. js nil
// reads no server, st nil and no partitions no ledger. What cannot be read
// is a problem in the report; the error is only of an invalid cfg, found
// before any I/O. ctx bounds every call: give it a deadline.
func Read(ctx context.Context, js JetStream, st *ledger.Store, cfg Config) (Report, error) {
	if err := cfg.validate(js, st); err != nil {
		return Report{}, err
	}
	var rep Report
	switch {
	case len(cfg.Partitions) > 0:
		readPartitionLedgers(ctx, cfg, &rep)
	case st != nil:
		readLedger(ctx, st, &rep)
	}
	if js != nil {
		readServer(ctx, js, cfg, &rep)
	}
	return rep, nil
}

// readLedger fills in the ledger's part of rep.
func readLedger(ctx context.Context, st *ledger.Store, rep *Report) {
	s, err := st.Stats(ctx)
	if err == nil {
		rep.Ledger = &s
		rep.Outbox, err = st.OutboxCounts(ctx)
	}
	var as []ledger.Attention
	if err == nil {
		as, err = st.Attention(ctx)
		rep.Attention = health.LedgerNeeds(as, st.Path())
	}
	if err != nil {
		rep.Problems = append(rep.Problems, err)
	}
}

// readServer fills in the stream's and the consumer's parts of rep.
func readServer(ctx context.Context, js JetStream, cfg Config, rep *Report) {
	if s, err := js.Stream(ctx, cfg.Stream); err != nil {
		rep.Problems = append(rep.Problems, fmt.Errorf("stream %s: %w", cfg.Stream, err))
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return // and so is its consumer: one problem, not two
		}
	} else if info, err := s.Info(ctx); err != nil {
		rep.Problems = append(rep.Problems, fmt.Errorf("stream %s: %w", cfg.Stream, err))
	} else {
		rep.Stream = &Stream{cfg.Stream, info.State.FirstSeq, info.State.LastSeq, info.State.Msgs, info.Config.Duplicates}
		if len(info.Sources) > 0 {
			readHub(ctx, js, cfg, rep)
		}
		if n := partition.Count(info.Config); n > 0 {
			readPartitions(ctx, js, cfg, n, rep)
			return
		}
	}
	cons, err := js.Consumer(ctx, cfg.Stream, cfg.Durable)
	var info *jetstream.ConsumerInfo
	if err == nil {
		info, err = cons.Info(ctx)
	}
	if err != nil {
		rep.Problems = append(rep.Problems, fmt.Errorf("consumer %s/%s: %w", cfg.Stream, cfg.Durable, err))
		return
	}
	rep.Consumer = consumerOf(cfg, info)
	if rep.Consumer.Refusal != nil {
		rep.Problems = append(rep.Problems, rep.Consumer.Refusal)
	}
}

// readHub fills in an edge's sourcing from its hub.
func readHub(ctx context.Context, js JetStream, cfg Config, rep *Report) {
	full, ok := js.(jetstream.JetStream)
	if !ok {
		return
	}
	l, err := fleet.ReadSourcing(ctx, full, cfg.Stream, cfg.Effects)
	if err != nil {
		rep.Problems = append(rep.Problems, err)
		return
	}
	rep.Hub = &l
	rep.Attention = append(rep.Attention, l.Needs()...)
}

// consumerOf is the consumer's part of a report, checked against cfg.Plan.
func consumerOf(cfg Config, info *jetstream.ConsumerInfo) *Consumer {
	verr := cfg.Plan.Validate(consumer.DurableOf(info.Config))
	if verr != nil {
		verr = consumer.PlanRefusal(cfg.Stream, cfg.Durable, cfg.Plan.WithDefaults().BatchSize, verr, cfg.Names)
	}
	return &Consumer{cfg.Durable, info.Config.AckWait, cfg.Plan.AckWait(), verr == nil, info.NumPending, info.NumAckPending,
		info.NumRedelivered, info.AckFloor.Stream, info.Config.MaxDeliver, verr}
}

// Check looks up the durable cfg names and checks its configuration
// against cfg.Plan, as run does before it consumes. A consumer the plan
// refuses is no error: its Safe is false and its Refusal says why, as
// consumer.New refuses it (naming the consumer). The
// error is of an invalid cfg or of the lookup, wrapping
// jetstream.ErrStreamNotFound or ErrConsumerNotFound when there is none.
func Check(ctx context.Context, js JetStream, cfg Config) (*Consumer, error) {
	if js == nil {
		return nil, fmt.Errorf("%w: Check without a JetStream", ErrInvalidConfig)
	}
	if err := cfg.validate(js, nil); err != nil {
		return nil, err
	}
	cons, err := js.Consumer(ctx, cfg.Stream, cfg.Durable)
	if err != nil {
		return nil, fmt.Errorf("look up consumer %s/%s: %w", cfg.Stream, cfg.Durable, err)
	}
	c := consumerOf(cfg, cons.CachedInfo())
	if c.Refusal != nil && !errors.As(c.Refusal, new(*consumer.PlanError)) {
		c.Refusal = fmt.Errorf("consumer %s/%s: %w", cfg.Stream, cfg.Durable, c.Refusal)
	}
	return c, nil
}
