package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// partitionStatus is one partition of a partitioned stream: its durable on
// the server, and its ledger when that is on this host.
type partitionStatus struct {
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

// maxPartitions bounds the search for partition ledgers beside --db.
const maxPartitions = 1024

// localPartitions are the partitions whose ledgers are beside db on this
// host: where a partitioned run keeps its state when --db names no ledger
// itself.
func localPartitions(db string) []int {
	var parts []int
	for i := range maxPartitions {
		if fileExists(partitionDB(db, i)) {
			parts = append(parts, i)
		}
	}
	return parts
}

// readPartitionLedgers reads the ledger of each of parts beside db, each
// into its partition and all of them summed into the report's ledger and
// outbox: a dead letter in any partition is counted, a ledger that cannot
// be read is a problem.
func readPartitionLedgers(ctx context.Context, db string, parts []int, rep *statusReport) {
	sum := &ledger.Stats{}
	rep.Outbox = map[ledger.Status]int64{}
	for _, i := range parts {
		p := partitionStatus{Partition: i, Ledger: partitionDB(db, i)}
		s, outbox, err := readPartitionLedger(ctx, p.Ledger)
		if err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("partition %d: %v", i, err))
		} else {
			p.LedgerRows, p.DeadLetters, p.Conflicts, p.Outbox = s.Processed, s.DeadLetters, s.Conflicts, outbox
			sum.Add(s) // its path is none of theirs: each partition names its own
			for k, n := range outbox {
				rep.Outbox[k] += n
			}
		}
		rep.Partitions = append(rep.Partitions, p)
	}
	rep.Ledger = sum
}

func readPartitionLedger(ctx context.Context, path string) (ledger.Stats, map[ledger.Status]int64, error) {
	st, err := ledger.Open(path, ledger.Config{Logger: quiet})
	if err != nil {
		return ledger.Stats{}, nil, err
	}
	defer st.Close()
	s, err := st.Stats(ctx)
	if err != nil {
		return ledger.Stats{}, nil, err
	}
	outbox, err := st.OutboxCounts(ctx)
	return s, outbox, err
}

// readPartitions fills in every partition of a partitioned stream with its
// durable <durable>-p<i> on the server, beside the ledgers read here; a
// ledger here of a partition the stream does not have is a problem.
func (c *statusCmd) readPartitions(ctx context.Context, js jetstream.JetStream, n int, rep *statusReport) {
	base := trimPartition(c.Durable)
	byIndex := map[int]*partitionStatus{}
	for k := range rep.Partitions {
		byIndex[rep.Partitions[k].Partition] = &rep.Partitions[k]
	}
	all := make([]partitionStatus, 0, n)
	for i := range n {
		p := partitionStatus{Partition: i}
		if here, ok := byIndex[i]; ok {
			p = *here
			delete(byIndex, i)
		}
		p.Durable = partitionDurable(base, i)
		cons, err := js.Consumer(ctx, c.Stream, p.Durable)
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
			rep.Problems = append(rep.Problems, fmt.Sprintf("partition %d: durable %s: %v", i, p.Durable, err))
		}
		all = append(all, p)
	}
	for _, p := range byIndex {
		rep.Problems = append(rep.Problems, fmt.Sprintf("ledger %s is of partition %d, but stream %s has %d partitions", p.Ledger, p.Partition, c.Stream, n))
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

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func printPartitions(w io.Writer, ps []partitionStatus) {
	for _, p := range ps {
		owner := "no ledger on this host"
		if p.Ledger != "" {
			owner = fmt.Sprintf("ledger %s, %d rows, %d dead letters, %d conflicts", p.Ledger, p.LedgerRows, p.DeadLetters, p.Conflicts)
			for _, st := range ledger.Statuses {
				if n := p.Outbox[st]; n > 0 {
					owner += fmt.Sprintf(", outbox %s %d", st, n)
				}
			}
		}
		durable := fmt.Sprintf("%s: %d pending, %d waiting for ack, acked through seq %d", p.Durable, p.Pending, p.AckPending, p.AckFloorSeq)
		switch {
		case p.Durable == "":
			durable = "durable not read"
		case !p.Consumer:
			durable = p.Durable + ": no such durable yet"
		case p.Waiting > 0:
			durable += ", being consumed"
		case !p.LastDelivered.IsZero():
			durable += ", last delivery " + p.LastDelivered.Format(time.RFC3339)
		}
		field(w, fmt.Sprintf("partition %d", p.Partition), durable+"; "+owner)
	}
}

// ledgersHere is how many partitions have their ledger on this host.
func ledgersHere(ps []partitionStatus) int {
	n := 0
	for _, p := range ps {
		if p.Ledger != "" {
			n++
		}
	}
	return n
}
