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
}

// localLedger is the first partition ledger of db on this host, if any:
// where a partitioned run keeps its state when --db names no ledger itself.
func localLedger(db string) (string, bool) {
	for i := range 1024 {
		if _, err := os.Stat(partitionDB(db, i)); err == nil {
			return partitionDB(db, i), true
		}
	}
	return "", false
}

// readPartitions fills in every partition of a partitioned stream: the
// durable <durable>-p<i> on the server and the ledger <db>-p<i> here.
func (c *statusCmd) readPartitions(ctx context.Context, js jetstream.JetStream, n int, rep *statusReport) {
	base := trimPartition(c.Durable)
	for i := range n {
		p := partitionStatus{Partition: i, Durable: partitionDurable(base, i)}
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
		if path := partitionDB(c.DB, i); fileExists(path) {
			if st, err := ledger.Open(path, ledger.Config{Logger: quiet}); err != nil {
				rep.Problems = append(rep.Problems, fmt.Sprintf("partition %d: %v", i, err))
			} else {
				if s, err := st.Stats(ctx); err == nil {
					p.Ledger, p.LedgerRows = path, s.Processed
				}
				st.Close()
			}
		}
		rep.Partitions = append(rep.Partitions, p)
	}
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
			owner = fmt.Sprintf("ledger %s, %d rows", p.Ledger, p.LedgerRows)
		}
		durable := fmt.Sprintf("%s: %d pending, %d waiting for ack, acked through seq %d", p.Durable, p.Pending, p.AckPending, p.AckFloorSeq)
		switch {
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
