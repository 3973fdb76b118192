package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

const statusHelp = `
One screen of what matters: which stream and durable it reads (without
--stream, the ones run recorded in the ledger), the stream (first and last
sequence, messages, duplicate window), the consumer (AckWait against the plan
of the given timing flags, pending, waiting for ack, redelivered), the ledger
(rows, size, oldest), the outbox per state, dead letters and conflicts. For
a partitioned stream (run --partitions), every partition: its durable
<durable>-p<I> (pending, waiting for ack, acked through, whether a consumer
is fetching now) and its ledger <db>-p<I> when it is on this host. Exit 1
when a part cannot be read or the consumer's AckWait is unsafe; exit 2 when
--stream is left out and the ledger recorded several consumers.`

type streamStatus struct {
	Name            string        `json:"name"`
	FirstSeq        uint64        `json:"first_seq"`
	LastSeq         uint64        `json:"last_seq"`
	Messages        uint64        `json:"messages"`
	DuplicateWindow time.Duration `json:"duplicate_window_ns"`
}

type consumerStatus struct {
	Name             string        `json:"name"`
	AckWait          time.Duration `json:"ack_wait_ns"`
	PlanAckWait      time.Duration `json:"plan_ack_wait_ns"`
	Safe             bool          `json:"safe"`
	Pending          uint64        `json:"pending"`
	AckPending       int           `json:"ack_pending"`
	Redelivered      int           `json:"redelivered"`
	AckFloorSeq      uint64        `json:"ack_floor_seq"`
	ServerMaxDeliver int           `json:"server_max_deliver"`
}

// servesStatus is the stream and durable status read, and where their
// names came from: given, the ledger (as run recorded them) or the defaults.
type servesStatus struct {
	Stream  string    `json:"stream"`
	Durable string    `json:"durable"`
	From    namesFrom `json:"from"`
	origin  string
}

type statusReport struct {
	Serves   *servesStatus           `json:"serves,omitempty"`
	Stream   *streamStatus           `json:"stream,omitempty"`
	Consumer *consumerStatus         `json:"consumer,omitempty"`
	Ledger   *ledger.Stats           `json:"ledger,omitempty"`
	Outbox   map[ledger.Status]int64 `json:"outbox,omitempty"`
	// A partitioned stream: every partition, its durable and its ledger.
	Partitions []partitionStatus `json:"partitions,omitempty"`
	Problems   []string          `json:"problems,omitempty"`
}

// statusCmd is `jetledger status`.
type statusCmd struct {
	dbFlag
	NATS natsFlags `embed:"" group:"nats"`
	streamFlags
	jsonFlag
	Plan planFlags `embed:"" group:"timing"`
}

func (statusCmd) Help() string { return statusHelp }

func (c *statusCmd) Run(inv *invocation) error {
	plan, err := c.Plan.plan()
	if err == nil {
		err = firstError(c.dbFlag.validate(), c.streamFlags.validate())
	}
	if err != nil {
		return err
	}
	var rep statusReport
	ctx, cancel := context.WithTimeout(inv.ctx, 10*time.Second)
	defer cancel()
	// A partitioned run keeps a ledger per partition beside --db: every one
	// here is read, and the names come from the first.
	db := c.dbFlag
	var local []int
	if !fileExists(c.DB) {
		if local = localPartitions(c.DB); len(local) > 0 {
			db.DB = partitionDB(c.DB, local[0])
		}
	}
	if st, err := db.openExisting(); err != nil {
		rep.Problems = append(rep.Problems, err.Error())
	} else {
		defer st.Close()
		// Which consumer to read is settled before anything is printed:
		// several recorded in the ledger are the user's to choose from.
		if err := c.resolve(ctx, st); errors.As(err, new(usageError)) {
			return err
		} else if err != nil {
			rep.Problems = append(rep.Problems, err.Error())
		}
		if len(local) == 0 {
			c.readLedger(ctx, st, &rep)
		}
	}
	if len(local) > 0 {
		readPartitionLedgers(ctx, c.DB, local, &rep)
	}
	rep.Serves = &servesStatus{c.Stream, c.Durable, c.from, c.origin(db.DB)}
	if nc, js, err := connect(ctx, c.NATS, quiet); err != nil {
		rep.Problems = append(rep.Problems, err.Error())
	} else {
		defer nc.Close()
		c.readServer(ctx, js, plan, &rep)
	}
	if c.JSON {
		if err := printJSON(inv.stdout, rep); err != nil {
			return err
		}
	} else {
		printStatus(inv.stdout, rep)
	}
	if len(rep.Problems) > 0 {
		return fmt.Errorf("%d problem(s): %s", len(rep.Problems), rep.Problems[0])
	}
	return nil
}

// readLedger fills in the ledger's part of rep.
func (c *statusCmd) readLedger(ctx context.Context, st *ledger.Store, rep *statusReport) {
	s, err := st.Stats(ctx)
	if err == nil {
		rep.Ledger = &s
		rep.Outbox, err = st.OutboxCounts(ctx)
	}
	if err != nil {
		rep.Problems = append(rep.Problems, err.Error())
	}
}

// readServer fills in the stream's and the consumer's parts of rep.
func (c *statusCmd) readServer(ctx context.Context, js jetstream.JetStream, plan ackwait.Plan, rep *statusReport) {
	if s, err := js.Stream(ctx, c.Stream); err != nil {
		rep.Problems = append(rep.Problems, fmt.Sprintf("stream %s: %v", c.Stream, c.explain(err, c.DB)))
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return // and so is its consumer: one problem, not two
		}
	} else if info, err := s.Info(ctx); err != nil {
		rep.Problems = append(rep.Problems, fmt.Sprintf("stream %s: %v", c.Stream, err))
	} else {
		rep.Stream = &streamStatus{c.Stream, info.State.FirstSeq, info.State.LastSeq, info.State.Msgs, info.Config.Duplicates}
		if n := partitionsOf(info.Config); n > 0 {
			c.readPartitions(ctx, js, n, rep)
			return
		}
	}
	cons, err := js.Consumer(ctx, c.Stream, c.Durable)
	var info *jetstream.ConsumerInfo
	if err == nil {
		info, err = cons.Info(ctx)
	}
	if err != nil {
		rep.Problems = append(rep.Problems, fmt.Sprintf("consumer %s/%s: %v", c.Stream, c.Durable, c.explain(err, c.DB)))
		return
	}
	verr := plan.Validate(consumer.DurableOf(info.Config))
	if verr != nil {
		rep.Problems = append(rep.Problems, refusal(c.Stream, c.Durable, plan.BatchSize, verr).Error())
	}
	rep.Consumer = &consumerStatus{c.Durable, info.Config.AckWait, plan.AckWait(), verr == nil, info.NumPending, info.NumAckPending,
		info.NumRedelivered, info.AckFloor.Stream, info.Config.MaxDeliver}
}
