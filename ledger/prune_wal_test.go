package ledger_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

// A long prune on an otherwise idle ledger keeps its WAL small: it is
// checkpointed between steps, so each step after a checkpoint reuses the
// WAL from its start. The background checkpoint ran beside the steps, never
// between them, and the WAL grew by every step: 43 MB for a ledger of 7,
// which filled the disk the prune was to free (under -race, in CI).
func TestALongPruneKeepsTheWALSmall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := &agingClock{now: time.Now()}
	file := filepath.Join(t.TempDir(), "l.db")
	st, err := ledger.Open(file, ledger.Config{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.DB().Exec(attackOpsEventsTable); err != nil {
		t.Fatal(err)
	}
	rows := 40_000
	fillPrunable(t, st, clock, rows)
	if _, err := st.DB().Exec(`INSERT INTO events (message_id, body) SELECT message_id, hex(randomblob(100)) FROM processed_messages`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	db, _ := os.Stat(file)
	// Small steps, as a prune beside batches or on a slow host takes them.
	res, err := st.Prune(ctx, ledger.PruneOptions{Stream: "S", FirstSeq: uint64(rows) + 1, AlsoFrom: []string{"events"}, Hold: 2 * time.Millisecond})
	if err != nil || res.Processed != int64(rows) {
		t.Fatalf("prune: %+v, %v", res, err)
	}
	wal, err := os.Stat(file + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a prune of %d rows in %d steps: WAL %d bytes, ledger %d bytes", rows, res.Steps, wal.Size(), db.Size())
	if limit := int64(8 << 20); wal.Size() > limit {
		t.Fatalf("after a prune of %d rows in %d steps the WAL holds %d bytes, want at most %d (the ledger is %d)", rows, res.Steps, wal.Size(), limit, db.Size())
	}
}
