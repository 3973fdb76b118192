package ledger_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/jetledger/jetledger/ledger"
)

// A batch of 500 random ids (a webhook provider's, UUIDv4s) dirties a leaf
// per id in the ledger's id index and in the events table's: the writer's
// page cache holds them all to the commit, not writing them out mid-way
// and reading them back, which halved random ids' speed (issue 45). The
// same batch on half of SQLite's default cache spills.
func TestTheWritersCacheHoldsABatchOfRandomIDs(t *testing.T) {
	spills := func(cacheKiB int) int {
		st := openWithRandomRows(t, 40_000)
		ctx := context.Background()
		if cacheKiB > 0 {
			if _, err := st.DB().ExecContext(ctx, fmt.Sprintf("PRAGMA cache_size = -%d", cacheKiB)); err != nil {
				t.Fatal(err)
			}
		}
		before, err := ledger.CacheSpills(st)
		if err != nil {
			t.Fatal(err)
		}
		applyRandomBatches(t, st, 1, 40_000)
		after, err := ledger.CacheSpills(st)
		if err != nil {
			t.Fatal(err)
		}
		return after - before
	}
	if n := spills(0); n != 0 {
		t.Errorf("the writer spilled %d pages of a batch of 500 random ids; want its cache to hold them", n)
	}
	if n := spills(1000); n == 0 {
		t.Errorf("on a 1 MiB cache (half of SQLite's default) the batch spilled nothing; the check above proves nothing")
	}
}

// Under a memory limit (the service sets SQLite's heap limit before it
// opens the ledger) the writer's cache keeps to a quarter of the limit:
// this build of SQLite does not enforce the limit itself (no memory
// statistics), so without this bound the 32 MiB cache would grow past it.
// Not parallel: the heap limit is the process's.
func TestTheWritersCacheKeepsToTheHeapLimit(t *testing.T) {
	const limit = 8 << 20
	cache := func(limit int64) int {
		if err := ledger.SetHeapLimit(limit); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ledger.SetHeapLimit(0) }) //nolint:errcheck // the default again
		rows, batches := 100_000, 20
		if raceEnabled {
			rows, batches = 40_000, 6
		}
		st := openWithRandomRows(t, rows)
		applyRandomBatches(t, st, batches, rows)
		n, err := ledger.WriterCacheUsed(st)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := cache(limit); n > limit/4+limit/8 {
		t.Errorf("under a heap limit of %d MiB the writer's cache holds %.1f MiB; want a quarter of it", limit>>20, float64(n)/(1<<20))
	}
	if n := cache(0); n <= limit {
		t.Errorf("without a limit the writer's cache holds %.1f MiB after the same batches; the check above proves little", float64(n)/(1<<20))
	}
}

// openWithRandomRows opens a ledger holding rows random ids, each with its
// events row, as the built-in handler writes them.
func openWithRandomRows(t *testing.T, rows int) *ledger.Store {
	t.Helper()
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.DB().Exec(`CREATE TABLE events (message_id TEXT NOT NULL UNIQUE, subject TEXT NOT NULL, stream_seq INTEGER NOT NULL, data BLOB, applied_at INTEGER NOT NULL);
		WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
		INSERT INTO processed_messages (message_id, stream, stream_seq, last_seq, subject, payload_sha256, processed_at, last_seen_at)
		SELECT lower(hex(randomblob(16))), 'S', i, i, 's', randomblob(32), 0, 0 FROM n;
		INSERT INTO events SELECT message_id, subject, stream_seq, '{}', 0 FROM processed_messages`, rows); err != nil {
		t.Fatal(err)
	}
	return st
}

// applyRandomBatches applies n batches of 500 random ids, from sequence
// after+1 on.
func applyRandomBatches(t *testing.T, st *ledger.Store, n, after int) {
	t.Helper()
	for b := range n {
		batch := make([]ledger.Delivery, 500)
		for i := range batch {
			var id [16]byte
			rand.Read(id[:])
			batch[i] = ledger.Delivery{MessageID: hex.EncodeToString(id[:]), Stream: "S", Sequence: uint64(after + b*500 + i + 1), Subject: "s", Data: []byte(`{}`)}
		}
		if _, err := st.ApplyBatch(context.Background(), batch, eventsHandler, ledger.Budget{}); err != nil {
			t.Fatal(err)
		}
	}
}

var spillEvents = &ledger.Insert{Table: "events", Columns: []string{"message_id", "subject", "stream_seq", "data", "applied_at"}}

// eventsHandler writes the built-in handler's events row.
func eventsHandler(_ context.Context, tx *ledger.Tx, d ledger.Delivery) error {
	return tx.InsertLater(spillEvents, d.MessageID, d.Subject, int64(d.Sequence), d.Data, int64(0))
}
