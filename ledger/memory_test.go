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
