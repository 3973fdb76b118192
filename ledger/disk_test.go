package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
)

// records keeps the levels and attribute keys of what a store logs.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec.Clone())
	return nil
}

// count counts the records at level that carry the attribute key.
func (r *records) count(level slog.Level, key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rec := range r.recs {
		rec.Attrs(func(a slog.Attr) bool {
			if rec.Level == level && a.Key == key {
				n++
				return false
			}
			return true
		})
	}
	return n
}

// immutable makes files immutable (chattr +i: not even root may write
// them) and returns the undo; the test is skipped where that cannot be.
func immutable(t *testing.T, files ...string) (undo func()) {
	t.Helper()
	if _, err := exec.LookPath("chattr"); err != nil {
		t.Skip("chattr not available: cannot make a file read-only for root")
	}
	if out, err := exec.Command("chattr", append([]string{"+i"}, files...)...).CombinedOutput(); err != nil {
		t.Skipf("chattr +i: %v %s", err, out)
	}
	var once sync.Once
	undo = func() {
		once.Do(func() {
			if out, err := exec.Command("chattr", append([]string{"-i"}, files...)...).CombinedOutput(); err != nil {
				t.Errorf("chattr -i: %v %s", err, out)
			}
		})
	}
	t.Cleanup(undo)
	return undo
}

// A checkpoint that cannot write the database file is said once, at warn,
// with its cause, however often it is retried; its recovery is said once,
// at the first attempt after the file is writable again. That holds for a
// checkpoint connection that opened the file while it was writable and for
// one that opened it while it was not: SQLite then opens it read-only,
// silently, and that connection can never checkpoint again.
func TestCheckpointFailureSaidOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		whileReadOnly bool // the checkpoints' connection opens the immutable file
	}{{"connection opened writable", false}, {"connection opened read-only", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := filepath.Join(t.TempDir(), "ckpt.db")
			logs := &records{}
			st, err := ledger.Open(db, ledger.Config{Logger: slog.New(logs), CheckpointInterval: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if _, err := st.Exec(context.Background(), `CREATE TABLE t (v BLOB)`); err != nil {
				t.Fatal(err)
			}
			if !tc.whileReadOnly {
				if err := ledger.RenewCheckpointConn(st); err != nil {
					t.Fatal(err)
				}
			}
			writable := immutable(t, db)
			if tc.whileReadOnly {
				if err := ledger.RenewCheckpointConn(st); err != nil {
					t.Fatal(err)
				}
			}
			// Commits go to the WAL, which stays writable; every checkpoint
			// must copy them into the database file, and fails.
			if _, err := st.Exec(context.Background(), `INSERT INTO t VALUES (zeroblob(100000))`); err != nil {
				t.Fatal(err)
			}
			consumertest.Eventually(t, time.Minute, "checkpoints retried", func() bool { return ledger.CheckpointFailures(st) >= 4 })
			if n := logs.count(slog.LevelWarn, "err"); n != 1 {
				t.Fatalf("%d warnings for a failing checkpoint retried %d times, want 1", n, ledger.CheckpointFailures(st))
			}
			writable()
			// One attempt may be under way with a connection opened before
			// the file was writable; the one after it must succeed. Each
			// wait is at most the backoff's cap.
			k := ledger.CheckpointFailures(st)
			consumertest.Eventually(t, 3*time.Minute, "a checkpoint after the file is writable again", func() bool {
				n := ledger.CheckpointFailures(st)
				return n == 0 || n > k+1
			})
			if n := ledger.CheckpointFailures(st); n != 0 {
				t.Fatalf("checkpoints still fail after the file is writable again: %d in a row, %d of them since", n, n-k)
			}
			if n := logs.count(slog.LevelInfo, "failed_attempts"); n != 1 {
				t.Fatalf("%d records of the recovery, want 1", n)
			}
			if n := logs.count(slog.LevelWarn, "err"); n != 1 {
				t.Fatalf("%d warnings, want still 1", n)
			}
		})
	}
}

// CheckWritable sees what a commit would meet, without the writer: it
// answers while a batch holds the write lock, and names a read-only file,
// a full disk and a database at its cap.
func TestCheckWritableSeesFullAndReadOnlyDisks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	check := func(st *ledger.Store) error {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return st.CheckWritable(cctx)
	}

	t.Run("writer held", func(t *testing.T) {
		t.Parallel()
		st := open(t, filepath.Join(t.TempDir(), "held.db"), ledger.Config{})
		tx, err := st.DB().BeginTx(ctx, nil) // BEGIN IMMEDIATE: the write lock
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if err := check(st); err != nil {
			t.Fatalf("CheckWritable behind a held writer: %v, want nil at once", err)
		}
	})
	t.Run("read-only file", func(t *testing.T) {
		t.Parallel()
		db := filepath.Join(t.TempDir(), "ro.db")
		st := open(t, db, ledger.Config{})
		immutable(t, db)
		if err := check(st); !errors.Is(err, ledger.ErrReadOnly) {
			t.Fatalf("CheckWritable on an immutable file: %v, want ErrReadOnly", err)
		}
	})
	t.Run("disk full", func(t *testing.T) {
		t.Parallel()
		dir := consumertest.SmallDisk(t, 4<<20)
		st := open(t, filepath.Join(dir, "full.db"), ledger.Config{MaxSizeBytes: 64 << 20})
		if err := check(st); err != nil {
			t.Fatalf("CheckWritable with room: %v", err)
		}
		free := consumertest.FillDisk(t, dir)
		err := check(st)
		if !errors.Is(err, ledger.ErrFull) || errors.Is(err, ledger.ErrAtMaxSize) {
			t.Fatalf("CheckWritable on a full disk: %v, want ErrFull and not ErrAtMaxSize", err)
		}
		free()
		if err := check(st); err != nil {
			t.Fatalf("CheckWritable after freeing the disk: %v", err)
		}
	})
	t.Run("at max size", func(t *testing.T) {
		t.Parallel()
		st := open(t, filepath.Join(t.TempDir(), "cap.db"), ledger.Config{MaxSizeBytes: 400_000})
		fillToCap(t, st)
		err := check(st)
		var capErr *ledger.MaxSizeError
		if !errors.Is(err, ledger.ErrAtMaxSize) || !errors.As(err, &capErr) || capErr.MaxSizeBytes != 400_000 {
			t.Fatalf("CheckWritable at the cap: %v, want ErrAtMaxSize naming 400000", err)
		}
	})
}

// A write refused by the cap says so, naming it; the same SQLITE_FULL
// from a full disk does not blame the cap.
func TestFullNamesItsCause(t *testing.T) {
	t.Parallel()
	t.Run("cap", func(t *testing.T) {
		t.Parallel()
		st := open(t, filepath.Join(t.TempDir(), "cap.db"), ledger.Config{MaxSizeBytes: 400_000})
		err := fillToCap(t, st)
		var capErr *ledger.MaxSizeError
		if !errors.Is(err, ledger.ErrFull) || !errors.Is(err, ledger.ErrAtMaxSize) || !errors.As(err, &capErr) || capErr.MaxSizeBytes != 400_000 {
			t.Fatalf("err = %v, want ErrFull and ErrAtMaxSize naming the cap of 400000", err)
		}
	})
	t.Run("disk", func(t *testing.T) {
		t.Parallel()
		dir := consumertest.SmallDisk(t, 2<<20)
		st := open(t, filepath.Join(dir, "disk.db"), ledger.Config{MaxSizeBytes: 64 << 20})
		err := fillToCap(t, st)
		if !errors.Is(err, ledger.ErrFull) || errors.Is(err, ledger.ErrAtMaxSize) {
			t.Fatalf("err = %v, want ErrFull and not ErrAtMaxSize: the disk filled, not the 64 MiB cap", err)
		}
	})
}

// A cap below what a new ledger needs is refused before the file exists.
func TestMaxSizeBelowANewLedgerRefused(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "tiny.db")
	if _, err := ledger.Open(db, ledger.Config{MaxSizeBytes: ledger.MinSizeBytes - 1}); !errors.Is(err, ledger.ErrInvalidConfig) {
		t.Fatalf("Open with a cap of %d: %v, want ErrInvalidConfig", ledger.MinSizeBytes-1, err)
	}
	if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused Open left %s behind (%v)", db, err)
	}
	// At the minimum a new ledger opens and takes its first messages.
	st := open(t, db, ledger.Config{MaxSizeBytes: ledger.MinSizeBytes})
	for i := range 10 {
		rs, err := st.ApplyBatch(context.Background(), []ledger.Delivery{delivery(fmt.Sprint("m", i), uint64(i+1), "x")}, noop, ledger.Budget{})
		if err != nil || rs[0].Outcome != ledger.Applied {
			t.Fatalf("message %d at the minimum cap: %v %v", i, err, rs)
		}
	}
}

func noop(context.Context, *ledger.Tx, ledger.Delivery) error { return nil }

func open(t *testing.T, db string, cfg ledger.Config) *ledger.Store {
	t.Helper()
	st, err := ledger.Open(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// fillToCap applies batches that each add 20 KB until one fails, and
// returns that error.
func fillToCap(t *testing.T, st *ledger.Store) error {
	t.Helper()
	ctx := context.Background()
	if _, err := st.Exec(ctx, `CREATE TABLE IF NOT EXISTS blobs (b BLOB)`); err != nil {
		t.Fatal(err)
	}
	fill := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO blobs VALUES (randomblob(20000))`)
		return err
	}
	for i := 0; i < 10_000; i++ {
		if _, err := st.ApplyBatch(ctx, []ledger.Delivery{delivery(fmt.Sprint("f", i), uint64(i+1), "x")}, fill, ledger.Budget{}); err != nil {
			return err
		}
	}
	t.Fatal("the database never filled up")
	return nil
}
