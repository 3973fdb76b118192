package ledger_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/jetledger/jetledger/ledger"
)

// Batches of random ids back to back (a backlog) keep the WAL bounded: the
// writer reuses it from its start once it is long. The background
// checkpoint copies it beside the batches, but the WAL is reused only by a
// transaction that begins after a checkpoint ended, which back-to-back
// batches never do: 100 000 messages left a WAL of 505 MB beside a ledger
// of 15, and a backlog of a few million filled the disk.
func TestBackToBackBatchesKeepTheWALBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "l.db")
	st, err := ledger.Open(file, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	noop := func(context.Context, *ledger.Tx, ledger.Delivery) error { return nil }
	n, most := 0, int64(0)
	for range 200 {
		batch := make([]ledger.Delivery, 500)
		for i := range batch {
			n++
			// Random-looking ids: each lands on a leaf of its own.
			batch[i] = ledger.Delivery{MessageID: fmt.Sprintf("%016x", uint64(n)*0x9E3779B97F4A7C15), Stream: "S", Sequence: uint64(n), Subject: "s", Data: []byte("{}")}
		}
		_, p, err := st.ApplyBatchPipelined(ctx, batch, noop, ledger.Budget{})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Durable(ctx); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(file + "-wal"); err == nil {
			most = max(most, fi.Size())
		}
	}
	db, _ := os.Stat(file)
	t.Logf("%d messages: the WAL at most %d bytes, the ledger %d", n, most, db.Size())
	if limit := int64(320 << 20); most > limit {
		t.Fatalf("after %d messages back to back the WAL held %d bytes, want at most %d (the ledger is %d)", n, most, limit, db.Size())
	}
}
