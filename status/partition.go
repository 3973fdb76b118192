package status

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/jetledger/jetledger/consumer/partition"
	"github.com/jetledger/jetledger/health"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// Partition is one partition of a partitioned stream: its durable on the
// server, and its ledger when that is on this host.
type Partition struct {
	Partition     int       `json:"partition"`
	Durable       string    `json:"durable"`
	Consumer      bool      `json:"consumer"` // the durable exists
	Pending       uint64    `json:"pending"`
	AckPending    int       `json:"ack_pending"`
	AckFloorSeq   uint64    `json:"ack_floor_seq"`
	LastDelivered time.Time `json:"last_delivered,omitzero"`
	Waiting       int       `json:"waiting"` // pull requests waiting: a consumer is fetching now
	Ledger        string    `json:"ledger,omitempty"`
	LedgerRows    int64     `json:"ledger_rows"`
	DeadLetters   int64     `json:"dead_letters"`
	Conflicts     int64     `json:"conflicts"`
	// Outbox is the partition's outbox rows per state.
	Outbox map[ledger.Status]int64 `json:"outbox,omitempty"`
}

// MaxPartitions bounds LocalPartitions' search.
const MaxPartitions = 1024

// LocalPartitions are the partitions, below MaxPartitions, whose ledgers
// (partition.Ledger(db, i)) are beside db on this host: where a
// partitioned run keeps its state when db names no ledger itself. None
// when db exists: that ledger is the one to read.
func LocalPartitions(db string) []int {
	if _, err := os.Stat(db); err == nil {
		return nil
	}
	var parts []int
	for i := range MaxPartitions {
		if _, err := os.Stat(partition.Ledger(db, i)); err == nil {
			parts = append(parts, i)
		}
	}
	return parts
}

// readPartitionLedgers reads the ledger of each of cfg.Partitions, each
// into its partition and all of them summed into the report's ledger and
// outbox: a dead letter in any partition is counted, a ledger that cannot
// be read is a problem.
func readPartitionLedgers(ctx context.Context, cfg Config, rep *Report) {
	sum := &ledger.Stats{}
	rep.Outbox = map[ledger.Status]int64{}
	log := cmp.Or(cfg.Logger, slog.Default())
	for _, i := range cfg.Partitions {
		p := Partition{Partition: i, Ledger: partition.Ledger(cfg.DB, i)}
		s, outbox, as, err := readPartitionLedger(ctx, p.Ledger, log)
		if err != nil {
			rep.Problems = append(rep.Problems, fmt.Errorf("partition %d: %w", i, err))
		} else {
			p.LedgerRows, p.DeadLetters, p.Conflicts, p.Outbox = s.Processed, s.DeadLetters, s.Conflicts, outbox
			sum.Add(s) // its path is none of theirs: each partition names its own
			rep.Attention = append(rep.Attention, health.LedgerNeeds(as, p.Ledger)...)
			for k, n := range outbox {
				rep.Outbox[k] += n
			}
		}
		rep.Partitions = append(rep.Partitions, p)
	}
	rep.Ledger = sum
}

func readPartitionLedger(ctx context.Context, path string, log *slog.Logger) (ledger.Stats, map[ledger.Status]int64, []ledger.Attention, error) {
	st, err := ledger.Open(path, ledger.Config{Logger: log})
	if err != nil {
		return ledger.Stats{}, nil, nil, err
	}
	defer st.Close()
	s, err := st.Stats(ctx)
	if err != nil {
		return ledger.Stats{}, nil, nil, err
	}
	outbox, err := st.OutboxCounts(ctx)
	if err != nil {
		return ledger.Stats{}, nil, nil, err
	}
	as, err := st.Attention(ctx)
	return s, outbox, as, err
}

// readPartitions fills in every partition of a partitioned stream with its
// durable <durable>-p<i> on the server, beside the ledgers read here; a
// ledger here of a partition the stream does not have is a problem.
func readPartitions(ctx context.Context, js JetStream, cfg Config, n int, rep *Report) {
	base := trimPartition(cfg.Durable)
	byIndex := map[int]*Partition{}
	for k := range rep.Partitions {
		byIndex[rep.Partitions[k].Partition] = &rep.Partitions[k]
	}
	all := make([]Partition, 0, n)
	for i := range n {
		p := Partition{Partition: i}
		if here, ok := byIndex[i]; ok {
			p = *here
			delete(byIndex, i)
		}
		p.Durable = partition.Durable(base, i)
		cons, err := js.Consumer(ctx, cfg.Stream, p.Durable)
		var info *jetstream.ConsumerInfo
		if err == nil {
			info, err = cons.Info(ctx)
		}
		switch {
		case err == nil:
			p.Consumer, p.Pending, p.AckPending, p.AckFloorSeq, p.Waiting = true, info.NumPending, info.NumAckPending, info.AckFloor.Stream, info.NumWaiting
			if info.Delivered.Last != nil {
				p.LastDelivered = *info.Delivered.Last
			}
		case !errors.Is(err, jetstream.ErrConsumerNotFound):
			// Not "no such durable": the server could not say (an election).
			rep.Problems = append(rep.Problems, fmt.Errorf("partition %d: durable %s: %w", i, p.Durable, err))
		}
		all = append(all, p)
	}
	for _, p := range byIndex {
		rep.Problems = append(rep.Problems, &StrayLedgerError{Ledger: p.Ledger, Partition: p.Partition, Stream: cfg.Stream, Partitions: n})
	}
	rep.Partitions = all
}

// trimPartition is the durable a partition's durable was named from.
func trimPartition(durable string) string {
	for i := len(durable) - 1; i > 0; i-- {
		if durable[i] == 'p' && durable[i-1] == '-' {
			rest := durable[i+1:]
			if rest != "" && strings.Trim(rest, "0123456789") == "" {
				return durable[:i-1]
			}
			break
		}
		if durable[i] < '0' || durable[i] > '9' {
			break
		}
	}
	return durable
}
