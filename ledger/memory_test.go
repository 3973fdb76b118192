package ledger

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// SetHeapLimit sets SQLite's process-wide soft heap limit: a connection
// opened later reads it back; 0 removes it; a negative one is refused.
func TestSetHeapLimitIsTheEnginesAndProcessWide(t *testing.T) {
	read := func() int64 {
		n, err := HeapLimit()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	t.Cleanup(func() { SetHeapLimit(0) }) //nolint:errcheck // the default again
	if err := SetHeapLimit(8 << 20); err != nil || read() != 8<<20 {
		t.Fatalf("after SetHeapLimit(8 MiB): %d, %v", read(), err)
	}
	if err := SetHeapLimit(0); err != nil || read() != 0 {
		t.Fatalf("after SetHeapLimit(0): %d, %v", read(), err)
	}
	if err := SetHeapLimit(-1); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("SetHeapLimit(-1): %v, want ErrInvalidConfig", err)
	}
}

// A burst of writes grows the WAL file past walSizeLimit; once it is
// checkpointed and reused, it is cut back to the limit instead of keeping
// the burst's size for ever (a small edge disk).
func TestWALFileIsCutBackAfterABurst(t *testing.T) {
	ctx := t.Context()
	st, err := Open(filepath.Join(t.TempDir(), "l.db"), Config{CheckpointInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Exec(ctx, `CREATE TABLE burst (b BLOB);
		WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i < 6000)
		INSERT INTO burst SELECT randomblob(4000) FROM c`); err != nil {
		t.Fatal(err)
	}
	wal := st.Path() + "-wal"
	size := func() int64 {
		fi, err := os.Stat(wal)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	if got := size(); got <= walSizeLimit {
		t.Fatalf("WAL %d bytes after the burst; the test wants more than %d", got, walSizeLimit)
	}
	if err := st.checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Exec(ctx, `INSERT INTO burst VALUES (x'00')`); err != nil { // reuses the WAL from its start
		t.Fatal(err)
	}
	if got := size(); got > walSizeLimit {
		t.Fatalf("WAL %d bytes after it was checkpointed and reused; want at most %d", got, walSizeLimit)
	}
}

// walPending reads SQLite's own WAL index in place: the frames a write
// added, then none once they are checkpointed.
func TestWALPendingReadsTheWALIndex(t *testing.T) {
	ctx := t.Context()
	st, err := Open(filepath.Join(t.TempDir(), "l.db"), Config{CheckpointInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Exec(ctx, `CREATE TABLE w (b BLOB); INSERT INTO w VALUES (randomblob(100000))`); err != nil {
		t.Fatal(err)
	}
	fd := newWALIndexFD(st.Path())
	if n, ok := walPending(fd); !ok || n < 100000 {
		t.Fatalf("pending %d bytes (%v) after a 100 kB write", n, ok)
	}
	if err := st.checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if n, ok := walPending(fd); !ok || n != 0 {
		t.Fatalf("pending %d bytes (%v) after a checkpoint", n, ok)
	}
	if due, _ := st.checkpointDue(1000, time.Second); due {
		t.Fatal("a checkpoint is due with nothing to copy")
	}
}

// The checkpointer copies a WAL that holds checkpointBytes at its next
// tick, and a small one only checkpointMaxTicks after the last copy: a
// copy, and its fsync, every second stalled every other fsync on the disk.
func TestCheckpointWaitsForTheWALToFill(t *testing.T) {
	ctx := t.Context()
	st, err := Open(filepath.Join(t.TempDir(), "l.db"), Config{CheckpointInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fd := newWALIndexFD(st.Path())
	if _, err := st.Exec(ctx, `CREATE TABLE w (b BLOB)`); err != nil {
		t.Fatal(err)
	}
	// A checkpoint now, so that the small WAL below waits its full count.
	eventually(t, "the table's WAL checkpointed", func() bool { n, ok := walPending(fd); return ok && n == 0 })
	from := st.ckpt.ticks.Load()
	for range 20 {
		if _, err := st.Exec(ctx, `INSERT INTO w VALUES (randomblob(1000))`); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "ticks", func() bool { return st.ckpt.ticks.Load() >= from+checkpointMaxTicks/2 })
	if n, ok := walPending(fd); !ok || n == 0 {
		t.Fatalf("pending %d bytes (%v) after %d ticks: a small WAL was checkpointed before its time", n, ok, checkpointMaxTicks/2)
	}
	eventually(t, "a small WAL checkpointed in the end", func() bool { n, ok := walPending(fd); return ok && n == 0 })
	if got := st.ckpt.ticks.Load() - from; got < checkpointMaxTicks {
		t.Fatalf("a small WAL checkpointed after %d ticks, want at least %d", got, checkpointMaxTicks)
	}
	// A WAL of 5 MB is due at the next tick, whatever the count (the loop's
	// ticks themselves are the machine's to space: under load they were
	// hundreds before the copy finished).
	if _, err := st.Exec(ctx, `INSERT INTO w VALUES (randomblob(5000000))`); err != nil {
		t.Fatal(err)
	}
	if n, ok := walPending(fd); n > 0 && n < checkpointBytes {
		t.Fatalf("pending %d bytes (%v) after a 5 MB write", n, ok)
	}
	if n, _ := walPending(fd); n > 0 && !first(st.checkpointDue(1, time.Second)) {
		t.Fatalf("a WAL of %d bytes is not due at the first tick", n)
	}
	eventually(t, "a WAL of 5 MB checkpointed", func() bool { n, ok := walPending(fd); return ok && n == 0 })
}

// eventually polls cond for up to a minute (consumertest.Eventually, which
// this package's own tests cannot import).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func first(due bool, _ time.Duration) bool { return due }

// walPending is walFrames' pending bytes alone.
func walPending(fd *walIndexFD) (bytes int64, ok bool) {
	_, bytes, ok = walFrames(fd)
	return bytes, ok
}
