package lazyfs_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/integration/lazyfs"
	"github.com/jetledger/jetledger/ledger"
)

// TestLedgerPipelinedCommits applies batches with ApplyBatchPipelined,
// which commits at synchronous=NORMAL and syncs the WAL in Pending.Durable,
// kills the process in the middle, cuts the power, and finds every message
// acknowledged after Durable, each with its change (ledger row and event
// row together, never one without the other).
func TestLedgerPipelinedCommits(t *testing.T) {
	t.Parallel()
	d := newDisk(t, lazyfs.Options{})
	fsys := d.mount(t)
	w := startChild(t, roleLedgerApply, childArgs{Dir: d.mnt, Rows: 5000})
	seen := w.until(t, childTimeout, func(r report) bool { return r.Event == "acked" && r.N >= 1000 })
	acked := max(seen.N, lastAcked(w.kill()))
	st := powerCut(t, fsys)
	t.Logf("acked %d messages; power cut dropped %d bytes in %d files", acked, st.DroppedBytes, st.DroppedFiles)

	d.mount(t)
	got := ledgerCounts(t, d.mnt)
	if got.N < acked || got.Value != got.N {
		t.Fatalf("after the cut: %d ledger rows and %d events; want every one of the %d acknowledged, in both", got.N, got.Value, acked)
	}
}

// TestLedgerPipelinedWithoutDurableLoses is the same run acknowledging each
// batch without waiting for Pending.Durable: the cut loses acknowledged
// messages, which is what Durable is for.
func TestLedgerPipelinedWithoutDurableLoses(t *testing.T) {
	t.Parallel()
	d := newDisk(t, lazyfs.Options{})
	fsys := d.mount(t)
	w := startChild(t, roleLedgerApply, childArgs{Dir: d.mnt, Rows: 2000, SkipDurable: true})
	w.until(t, childTimeout, func(r report) bool { return r.Event == "done" })
	w.kill()
	powerCut(t, fsys)

	d.mount(t)
	got := ledgerCounts(t, d.mnt)
	t.Logf("acked 2000 messages without Durable; %d survived the cut", got.N)
	if got.N >= 2000 {
		t.Fatal("every message survived without Durable: the test cannot see a missing sync")
	}
	if got.Value != got.N {
		t.Fatalf("%d ledger rows but %d events: a batch survived in part", got.N, got.Value)
	}
}

func ledgerCounts(tb testing.TB, dir string) report {
	tb.Helper()
	for _, r := range startChild(tb, roleLedgerCount, childArgs{Dir: dir}).wait(tb, childTimeout) {
		if r.Event == "count" {
			return r
		}
	}
	tb.Fatal("count child reported no count")
	return report{}
}

var lazyEvents = &ledger.Insert{Table: "events", Columns: []string{"message_id", "data"}}

func openLedger(args childArgs) (*ledger.Store, error) {
	// No background checkpoint: a checkpoint syncs the WAL, which would
	// hide a missing sync from the test.
	st, err := ledger.Open(filepath.Join(args.Dir, "ledger.db"), ledger.Config{CheckpointInterval: time.Hour})
	if err != nil {
		return nil, err
	}
	if _, err := st.Exec(context.Background(), `CREATE TABLE IF NOT EXISTS events (message_id TEXT PRIMARY KEY, data BLOB) WITHOUT ROWID`); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

func ledgerApply(ctx context.Context, args childArgs) error {
	st, err := openLedger(args)
	if err != nil {
		return err
	}
	defer st.Close()
	h := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		return tx.InsertLater(lazyEvents, d.MessageID, d.Data)
	}
	const size = 50
	for n := 0; n < args.Rows; n += size {
		batch := make([]ledger.Delivery, size)
		for i := range batch {
			seq := n + i + 1
			batch[i] = ledger.Delivery{MessageID: fmt.Sprintf("m%06d", seq), Stream: "S", Sequence: uint64(seq), Subject: "s",
				Data: []byte(fmt.Sprintf("message %d of a durability test, padded to span pages %0200d", seq, seq))}
		}
		_, pending, err := st.ApplyBatchPipelined(ctx, batch, h, ledger.Budget{Work: time.Minute})
		if err != nil {
			return err
		}
		if !args.SkipDurable {
			if err := pending.Durable(ctx); err != nil {
				return err
			}
		}
		emit(report{Event: "acked", N: n + size})
	}
	emit(report{Event: "done"})
	awaitKill()
	return nil
}

func ledgerCount(ctx context.Context, args childArgs) error {
	st, err := openLedger(args)
	if err != nil {
		return err
	}
	defer st.Close()
	r := report{Event: "count"}
	if err := st.DB().QueryRowContext(ctx, `SELECT count(*) FROM processed_messages`).Scan(&r.N); err != nil {
		return err
	}
	if err := st.DB().QueryRowContext(ctx, `SELECT count(*) FROM events`).Scan(&r.Value); err != nil {
		return err
	}
	emit(r)
	return nil
}
