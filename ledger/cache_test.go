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
// same batch on SQLite's default cache spills.
func TestTheWritersCacheHoldsABatchOfRandomIDs(t *testing.T) {
	spills := func(cacheKiB int) int {
		st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		ctx := context.Background()
		if _, err := st.DB().ExecContext(ctx, `CREATE TABLE events (message_id TEXT NOT NULL UNIQUE, subject TEXT NOT NULL, stream_seq INTEGER NOT NULL, data BLOB, applied_at INTEGER NOT NULL);
			WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 40000)
			INSERT INTO processed_messages (message_id, stream, stream_seq, last_seq, subject, payload_sha256, processed_at, last_seen_at)
			SELECT lower(hex(randomblob(16))), 'S', i, i, 's', randomblob(32), 0, 0 FROM n;
			INSERT INTO events SELECT message_id, subject, stream_seq, '{}', 0 FROM processed_messages`); err != nil {
			t.Fatal(err)
		}
		if cacheKiB > 0 {
			if _, err := st.DB().ExecContext(ctx, fmt.Sprintf("PRAGMA cache_size = -%d", cacheKiB)); err != nil {
				t.Fatal(err)
			}
		}
		before, err := ledger.CacheSpills(st)
		if err != nil {
			t.Fatal(err)
		}
		batch := make([]ledger.Delivery, 500)
		for i := range batch {
			var id [16]byte
			rand.Read(id[:])
			batch[i] = ledger.Delivery{MessageID: hex.EncodeToString(id[:]), Stream: "S", Sequence: uint64(40001 + i), Subject: "s", Data: []byte(`{}`)}
		}
		if _, err := st.ApplyBatch(ctx, batch, eventsHandler, ledger.Budget{}); err != nil {
			t.Fatal(err)
		}
		after, err := ledger.CacheSpills(st)
		if err != nil {
			t.Fatal(err)
		}
		return after - before
	}
	if n := spills(0); n != 0 {
		t.Errorf("the writer spilled %d pages of a batch of 500 random ids; want its cache to hold them", n)
	}
	if n := spills(2000); n == 0 {
		t.Errorf("on SQLite's default 2 MiB cache the batch spilled nothing; the check above proves nothing")
	}
}

var spillEvents = &ledger.Insert{Table: "events", Columns: []string{"message_id", "subject", "stream_seq", "data", "applied_at"}}

// eventsHandler writes the built-in handler's events row.
func eventsHandler(_ context.Context, tx *ledger.Tx, d ledger.Delivery) error {
	return tx.InsertLater(spillEvents, d.MessageID, d.Subject, int64(d.Sequence), d.Data, int64(0))
}
