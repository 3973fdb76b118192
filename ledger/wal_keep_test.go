package ledger

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// While batches come back to back (a backlog), the writer reuses a long
// WAL without cutting its file back to walSizeLimit: cut at each reuse and
// grown again, it cost a backlog of random ids 0.72 of its rate. Once the
// WAL is no longer long, the next reuse cuts it back.
func TestABacklogReusesTheWALWithoutCuttingItBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "l.db")
	st, err := Open(file, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// The keep outlasts the backlog however slow the host: a loaded one
	// took more than walKeep between two long WALs, and the file was cut.
	st.walMu.Lock()
	st.walKeep = time.Hour
	st.walMu.Unlock()
	// A handler keyed by the id: random ids land each on a leaf of its own.
	if _, err := st.Exec(ctx, `CREATE TABLE seen (id TEXT PRIMARY KEY, at INTEGER) WITHOUT ROWID`); err != nil {
		t.Fatal(err)
	}
	noop := func(ctx context.Context, tx *Tx, d Delivery) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO seen VALUES (?, ?)`, d.MessageID, int64(d.Sequence))
		return err
	}
	n := 0
	batch := func() {
		t.Helper()
		b := make([]Delivery, 500)
		for i := range b {
			n++
			b[i] = Delivery{MessageID: fmt.Sprintf("%016x", uint64(n)*0x9E3779B97F4A7C15), Stream: "S", Sequence: uint64(n), Subject: "s", Data: []byte("{}")}
		}
		_, p, err := st.ApplyBatchPipelined(ctx, b, noop, Budget{})
		if err == nil {
			err = p.Durable(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	size := func() int64 { return walFileSize(t, file) }
	reused, cuts, last := 0, 0, int64(0)
	lastFrames := uint32(0)
	for range 150 {
		batch()
		frames, _, ok := st.walLength()
		if !ok {
			t.Skip("this platform has no look at the WAL index")
		}
		if frames < lastFrames {
			reused++
		}
		if sz := size(); sz < last {
			cuts++
		}
		last, lastFrames = size(), frames
	}
	t.Logf("%d messages: the WAL reused %d times, its file cut back %d times, %d bytes at the end", n, reused, cuts, last)
	if reused == 0 {
		t.Fatal("the WAL was never reused: the test proves nothing")
	}
	if cuts > 0 {
		t.Fatalf("the WAL's file was cut back %d times during the backlog, want 0", cuts)
	}
	// The backlog is over: once the WAL is not long for walKeep (none
	// here), its next reuse cuts it back.
	st.walMu.Lock()
	st.walKeep, st.walKeepUntil = 0, st.walKeepUntil.AddDate(-1, 0, 0)
	st.walMu.Unlock()
	for range 3 {
		if err := st.checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
		batch()
	}
	if got := size(); got > walSizeLimit {
		t.Fatalf("WAL %d bytes after the backlog ended and it was reused, want at most %d", got, walSizeLimit)
	}
}

// walFileSize is the size of file's WAL.
func walFileSize(t *testing.T, file string) int64 {
	t.Helper()
	fi, err := os.Stat(file + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
