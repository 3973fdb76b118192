//go:build linux

package ledger

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Tests of the deferred checkpoint (walsize.go,
// walindex_linux.go): wherever the WAL index cannot be found, or is found
// wrong, a WAL past checkpointBytes must still be copied within a few
// ticks, and a small one within checkpointMaxTicks and some.

const fastTick = 20 * time.Millisecond

// mainSize is the size of the database file itself: it grows only when a
// checkpoint copies the WAL's pages into it.
func mainSize(t *testing.T, file string) int64 {
	t.Helper()
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// copiedWithin writes n bytes through write and asserts the database file
// grows by them within ticks ticks of the store's loop.
func copiedWithin(t *testing.T, st *Store, file string, n int, ticks int64, write func(q string) error) {
	t.Helper()
	before := mainSize(t, file)
	if err := write(fmt.Sprintf(`INSERT INTO w VALUES (randomblob(%d))`, n)); err != nil {
		t.Fatal(err)
	}
	from := st.ckpt.ticks.Load()
	deadline := time.Now().Add(time.Minute)
	for mainSize(t, file) < before+int64(n)*9/10 { // a page or two may be reused
		if got := st.ckpt.ticks.Load() - from; got > ticks {
			t.Fatalf("%d bytes still not in the database file after %d ticks (want within %d): the WAL is not checkpointed", n, got, ticks)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes not in the database file within a minute", n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func openTickStore(t *testing.T, file string) *Store {
	t.Helper()
	st, err := Open(file, Config{CheckpointInterval: fastTick})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Exec(t.Context(), `CREATE TABLE IF NOT EXISTS w (b BLOB)`); err != nil {
		t.Fatal(err)
	}
	return st
}

func execOn(st *Store) func(string) error {
	return func(q string) error { _, err := st.Exec(context.Background(), q); return err }
}

// checkpointsBigAndSmall is the property every situation below must keep.
func checkpointsBigAndSmall(t *testing.T, st *Store, file string, write func(string) error) {
	t.Helper()
	copiedWithin(t, st, file, 5<<20, 5, write)
	copiedWithin(t, st, file, 100_000, checkpointMaxTicks+5, write)
}

// The lookup finds SQLite's descriptor for every spelling of the path that
// Open takes: otherwise the deferral is silently lost (a checkpoint and a
// /proc/self/fd scan every tick).
func TestWALIndexFoundForEveryPathSpelling(t *testing.T) {
	for _, tc := range []struct {
		name string
		path func(t *testing.T) string
	}{
		{"plain", func(t *testing.T) string { return filepath.Join(t.TempDir(), "l.db") }},
		{"spaces and newline", func(t *testing.T) string { return filepath.Join(t.TempDir(), "a b\nc", "l d.db") }},
		{"symlinked directory", func(t *testing.T) string {
			real := t.TempDir()
			link := filepath.Join(t.TempDir(), "link")
			if err := os.Symlink(real, link); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(link, "l.db")
		}},
		{"symlinked file", func(t *testing.T) string {
			real := filepath.Join(t.TempDir(), "real.db")
			link := filepath.Join(t.TempDir(), "l.db")
			if err := os.WriteFile(real, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(real, link); err != nil {
				t.Fatal(err)
			}
			return link
		}},
		{"dot-dot", func(t *testing.T) string {
			d := t.TempDir()
			os.Mkdir(filepath.Join(d, "x"), 0o700)
			return d + "/x/../l.db"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := tc.path(t)
			os.MkdirAll(filepath.Dir(file), 0o700)
			st := openTickStore(t, file)
			if _, ok := walPending(newWALIndexFD(st.Path())); !ok {
				t.Errorf("SQLite's -shm descriptor not found for %q: every tick checkpoints", file)
			}
			checkpointsBigAndSmall(t, st, file, execOn(st))
		})
	}
}

// A relative path, and the process changing directory after Open. Fails,
// and not because of the WAL index: the checkpointer's pool (and the
// readers') open their connections lazily with the relative DSN, so after
// the chdir the first checkpoint opens, creates and checkpoints a new empty
// l.db in the new directory; the ledger's WAL is never copied until Close.
// Before the deferral the checkpointer's connection was opened at the first
// tick (1 s); now at the first checkpoint, up to 30 s after Open.
func TestWALIndexRelativePathAfterChdir(t *testing.T) {
	d := t.TempDir()
	t.Chdir(d)
	st := openTickStore(t, "l.db")
	if _, ok := walPending(newWALIndexFD(st.Path())); !ok {
		t.Errorf("relative path: SQLite's -shm descriptor not found")
	}
	t.Chdir(t.TempDir())
	checkpointsBigAndSmall(t, st, filepath.Join(d, "l.db"), execOn(st))
}

// Two stores on one file in one process share SQLite's one descriptor of
// the -shm; closing one leaves the other's checkpoints working.
func TestWALIndexTwoStoresOneFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "l.db")
	a := openTickStore(t, file)
	b := openTickStore(t, file)
	checkpointsBigAndSmall(t, a, file, execOn(b))
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := walPending(newWALIndexFD(file)); !ok {
		t.Errorf("after the other store closed: -shm descriptor not found")
	}
	checkpointsBigAndSmall(t, b, file, execOn(b))
}

// The -shm deleted under a running store: SQLite keeps its descriptor of
// the deleted file (readlink says " (deleted)"); the lookup must not find
// anything else, and the fallback checkpoints.
func TestWALIndexDeletedSHM(t *testing.T) {
	file := filepath.Join(t.TempDir(), "l.db")
	st := openTickStore(t, file)
	if err := os.Remove(file + "-shm"); err != nil {
		t.Fatal(err)
	}
	checkpointsBigAndSmall(t, st, file, execOn(st))
}

// A snapshot held on the store's own reader pool keeps PASSIVE from copying
// past it; once it ends, the WAL it held back is copied within a few ticks.
func TestWALIndexReaderSnapshotThenRelease(t *testing.T) {
	ctx := t.Context()
	file := filepath.Join(t.TempDir(), "l.db")
	st := openTickStore(t, file)
	conn, err := st.reader.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM w`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	before := mainSize(t, file)
	for range 3 {
		if _, err := st.Exec(ctx, `INSERT INTO w VALUES (randomblob(3000000))`); err != nil {
			t.Fatal(err)
		}
	}
	from := st.ckpt.ticks.Load()
	eventually(t, "ticks", func() bool { return st.ckpt.ticks.Load() >= from+10 })
	if got := mainSize(t, file); got > before+1<<20 {
		t.Fatalf("database file grew %d bytes past a reader's snapshot", got-before)
	}
	if _, err := conn.ExecContext(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	from = st.ckpt.ticks.Load()
	eventually(t, "the held-back WAL copied", func() bool { return mainSize(t, file) >= before+9_000_000 })
	if got := st.ckpt.ticks.Load() - from; got > 5 {
		t.Fatalf("held-back 9 MB copied %d ticks after the reader ended, want within 5", got)
	}
	// The WAL is reused from its start and cut back.
	if _, err := st.Exec(ctx, `INSERT INTO w VALUES (x'00')`); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(file + "-wal"); err != nil || fi.Size() > walSizeLimit {
		t.Fatalf("WAL %v bytes (%v) after reuse, want at most %d", fi.Size(), err, walSizeLimit)
	}
}

// Another process writes the ledger while this one's store is idle: the
// shared WAL index shows its frames, and this store checkpoints them.
func TestWALIndexOtherProcessWrites(t *testing.T) {
	if os.Getenv("JETLEDGER_TEST_WALINDEX_CHILD") != "" {
		t.Skip("child")
	}
	file := filepath.Join(t.TempDir(), "l.db")
	st := openTickStore(t, file)
	for _, n := range []int{5 << 20, 100_000} {
		before := mainSize(t, file)
		cmd := exec.Command(os.Args[0], "-test.run=^TestWALIndexChild$", "-test.v")
		cmd.Env = append(os.Environ(), "JETLEDGER_TEST_WALINDEX_CHILD="+file, fmt.Sprintf("JETLEDGER_TEST_WALINDEX_BYTES=%d", n))
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		wrote := false
		for sc.Scan() {
			if strings.Contains(sc.Text(), "CHILD WROTE") {
				wrote = true
				break
			}
		}
		if !wrote {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the child did not write")
		}
		from := st.ckpt.ticks.Load()
		limit := int64(5)
		if n < checkpointBytes {
			limit = checkpointMaxTicks + 5
		}
		eventually(t, "the other process's frames checkpointed", func() bool {
			return mainSize(t, file) >= before+int64(n)*9/10 || st.ckpt.ticks.Load()-from > limit
		})
		got := st.ckpt.ticks.Load() - from
		stdin.Close()
		cmd.Wait()
		if mainSize(t, file) < before+int64(n)*9/10 {
			t.Fatalf("%d bytes another process wrote not checkpointed after %d ticks (want within %d)", n, got, limit)
		}
	}
}

// The child of TestWALIndexOtherProcessWrites: writes, says so, and
// holds its connection open until its stdin closes.
func TestWALIndexChild(t *testing.T) {
	file := os.Getenv("JETLEDGER_TEST_WALINDEX_CHILD")
	if file == "" {
		t.Skip("run by TestWALIndexOtherProcessWrites")
	}
	db, err := sql.Open("sqlite", file+"?_pragma=busy_timeout(10000)&_pragma=wal_autocheckpoint(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`INSERT INTO w VALUES (randomblob(` + os.Getenv("JETLEDGER_TEST_WALINDEX_BYTES") + `))`); err != nil {
		t.Fatal(err)
	}
	fmt.Println("CHILD WROTE")
	bufio.NewReader(os.Stdin).ReadString('\n') //nolint:errcheck // EOF ends it
}

// A soft heap limit far below what the work needs: every statement still
// succeeds (soft), a big sort in memory (temp_store=MEMORY) and a big
// transaction included, and a checkpoint still copies the WAL.
func TestSoftHeapLimitStatementsStillSucceed(t *testing.T) {
	t.Cleanup(func() { SetHeapLimit(0) }) //nolint:errcheck // the default again
	if err := SetHeapLimit(1 << 20); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	file := filepath.Join(t.TempDir(), "l.db")
	st := openTickStore(t, file)
	if _, err := st.Exec(ctx, `WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i < 5000)
		INSERT INTO w SELECT randomblob(4000) FROM c`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := st.reader.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT b FROM w ORDER BY b DESC)`).Scan(&n); err != nil || n != 5000 {
		t.Fatalf("a sort of 20 MB under a 1 MiB soft limit: %d rows, %v", n, err)
	}
	copiedWithin(t, st, file, 5<<20, 5, execOn(st))
}
