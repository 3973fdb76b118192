package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

// openBackupStore opens a ledger with the tables keep writes.
func openBackupStore(tb testing.TB, file string, cfg ledger.Config) *ledger.Store {
	tb.Helper()
	st, err := ledger.Open(file, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	if _, err := st.DB().Exec(`CREATE TABLE balances (account TEXT PRIMARY KEY, amount INTEGER NOT NULL);
		CREATE TABLE payloads (message_id TEXT PRIMARY KEY, data BLOB NOT NULL)`); err != nil {
		tb.Fatal(err)
	}
	return st
}

// keep credits the balance and keeps the payload, so the file grows.
func keep(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
	if err := credit(ctx, tx, d); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO payloads VALUES (?, ?)`, d.MessageID, d.Data)
	return err
}

// fill applies n messages of about 1 KiB each, from sequence first, one
// batch per 100.
func fill(tb testing.TB, st *ledger.Store, first, n int) {
	tb.Helper()
	pad := strings.Repeat("x", 1000)
	for i := 0; i < n; i += 100 {
		var batch []ledger.Delivery
		for j := i; j < min(i+100, n); j++ {
			batch = append(batch, delivery(fmt.Sprintf("m-%d", first+j), uint64(first+j), pad))
		}
		if _, err := st.ApplyBatch(context.Background(), batch, keep, ledger.Budget{}); err != nil {
			tb.Fatal(err)
		}
	}
}

// readCopy opens a backup as run would and returns its processed rows and
// balance, after checking its integrity, journal mode and file mode.
func readCopy(tb testing.TB, file string) (processed, bal int) {
	tb.Helper()
	fi, err := os.Stat(file)
	if err != nil {
		tb.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		tb.Fatalf("copy has mode %v, want 0600", fi.Mode().Perm())
	}
	st, err := ledger.Open(file, ledger.Config{})
	if err != nil {
		tb.Fatalf("the copy does not open as a ledger: %v", err)
	}
	defer st.Close()
	var verdict, mode string
	if err := st.DB().QueryRow(`PRAGMA integrity_check`).Scan(&verdict); err != nil || verdict != "ok" {
		tb.Fatalf("integrity_check of the copy: %q, %v", verdict, err)
	}
	if err := st.DB().QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		tb.Fatalf("journal_mode of the copy: %q, %v", mode, err)
	}
	s, err := st.Stats(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	var tables int
	if err := st.DB().QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name = 'balances'`).Scan(&tables); err != nil {
		tb.Fatal(err)
	}
	if tables == 0 {
		return int(s.Processed), 0
	}
	return int(s.Processed), balance(tb, st)
}

// The copy is the snapshot taken when the backup began, although the writer
// commits between every two of its steps: the writer is never blocked (its
// busy timeout is short, and each commit must finish inside the step), and
// the backup never starts over (the pages copied only grow).
func TestBackupWhileWritingIsOneSnapshot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := openBackupStore(t, filepath.Join(dir, "ledger.db"), ledger.Config{BusyTimeout: 50 * time.Millisecond})
	const before = 2000
	fill(t, st, 0, before)

	written, steps, last, restarts := 0, 0, 0, 0
	to := filepath.Join(dir, "copy.db")
	// A backup that started over at every commit would never end.
	bctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	res, err := st.Backup(bctx, to, ledger.BackupOptions{StepPages: 32, Progress: func(copied, total int) {
		steps++
		if steps > 1000 {
			stop()
		}
		if copied <= last {
			restarts++
		}
		last = copied
		if copied == total {
			return
		}
		// A commit while the backup's snapshot is open.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		d := delivery(fmt.Sprintf("during-%d", steps), uint64(before+steps), "during")
		if _, err := st.ApplyBatch(ctx, []ledger.Delivery{d}, keep, ledger.Budget{Work: 500 * time.Millisecond}); err != nil {
			t.Errorf("commit during the backup's step %d: %v", steps, err)
			return
		}
		written++
	}})
	if restarts > 0 {
		t.Fatalf("the backup started over %d times in %d steps", restarts, steps)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d pages in %d steps, %d commits during the backup, %s", res.Pages, steps, written, res.Elapsed)
	if written < 10 {
		t.Fatalf("only %d commits during the backup; the test needs the writer busy throughout", written)
	}
	if want := (res.Pages + 31) / 32; steps != want {
		t.Fatalf("%d steps for %d pages, want %d: the backup started over", steps, res.Pages, want)
	}
	processed, bal := readCopy(t, to)
	if processed != before || bal != before {
		t.Fatalf("copy: %d processed, balance %d; want the snapshot at the start: %d and %d", processed, bal, before, before)
	}
	if res.Tables["processed_messages"] != before || res.Tables["payloads"] != before || res.Tables["balances"] != 1 || res.Path != to {
		t.Fatalf("result %+v, want %d processed_messages rows and 1 balance", res, before)
	}
	if fi, err := os.Stat(to); err != nil || fi.Size() != res.SizeBytes {
		t.Fatalf("copy size %v (%v), result says %d", fi.Size(), err, res.SizeBytes)
	}
	if got := balance(t, st); got != before+written {
		t.Fatalf("the ledger's balance %d, want %d: a commit during the backup was lost", got, before+written)
	}
	assertOnly(t, dir, "ledger.db", "ledger.db-wal", "ledger.db-shm", "copy.db")
}

// A ledger whose writer has not checkpointed holds its last commits only in
// the WAL (as one left by a killed process does): the copy has them.
func TestBackupIncludesTheWAL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "ledger.db")
	// No checkpoints: what the writer commits stays in the WAL.
	st := openBackupStore(t, file, ledger.Config{CheckpointInterval: time.Hour})
	const n = 500
	fill(t, st, 0, n)

	// The main file alone lacks them: the test is about the WAL.
	mainOnly := filepath.Join(t.TempDir(), "main-only.db")
	copyFile(t, file, mainOnly)
	if p, _ := readCopy(t, mainOnly); p != 0 {
		t.Fatalf("the main file alone holds %d rows; the test needs them in the WAL only", p)
	}

	// Another store on the file, as `jetledger ledger backup` opens it.
	other, err := ledger.Open(file, ledger.Config{CheckpointInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	to := filepath.Join(dir, "copy.db")
	if _, err := other.Backup(context.Background(), to, ledger.BackupOptions{}); err != nil {
		t.Fatal(err)
	}
	if processed, bal := readCopy(t, to); processed != n || bal != n {
		t.Fatalf("copy: %d processed, balance %d; want %d and %d", processed, bal, n, n)
	}
}

func TestBackupRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		prepare func(t *testing.T, dir, to string) // makes the world of the test
		to      string                             // relative to the test's directory; default copy.db
		force   bool
		wantErr error
		kept    string // content of to that must survive, if any
	}{
		{name: "existing file", wantErr: ledger.ErrBackupExists, kept: "precious",
			prepare: func(t *testing.T, _, to string) { writeFile(t, to, "precious") }},
		{name: "existing file, forced", force: true,
			prepare: func(t *testing.T, _, to string) { writeFile(t, to, "old") }},
		{name: "a WAL beside it", force: true, wantErr: ledger.ErrBackupExists,
			prepare: func(t *testing.T, _, to string) { writeFile(t, to+"-wal", "stale") }},
		{name: "a journal beside it", force: true, wantErr: ledger.ErrBackupExists,
			prepare: func(t *testing.T, _, to string) { writeFile(t, to+"-journal", "stale") }},
		{name: "the ledger itself", to: "ledger.db", force: true, wantErr: ledger.ErrInvalidConfig},
		{name: "the ledger's WAL", to: "ledger.db-wal", force: true, wantErr: ledger.ErrInvalidConfig},
		{name: "the ledger by another name", force: true, wantErr: ledger.ErrInvalidConfig,
			prepare: func(t *testing.T, dir, to string) {
				if err := os.Link(filepath.Join(dir, "ledger.db"), to); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "the ledger's WAL by another name", force: true, wantErr: ledger.ErrInvalidConfig,
			prepare: func(t *testing.T, dir, to string) {
				if err := os.Link(filepath.Join(dir, "ledger.db-wal"), to); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "a directory", force: true, wantErr: ledger.ErrInvalidConfig,
			prepare: func(t *testing.T, _, to string) {
				if err := os.Mkdir(to, 0o700); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "not a plain path", to: "copy.db?mode=memory", wantErr: ledger.ErrInvalidConfig},
		{name: "no such directory", to: "missing/copy.db", wantErr: os.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			st := openBackupStore(t, filepath.Join(dir, "ledger.db"), ledger.Config{})
			fill(t, st, 0, 10)
			to := filepath.Join(dir, cmpOr(tt.to, "copy.db"))
			if tt.prepare != nil {
				tt.prepare(t, dir, to)
			}
			before := entries(t, dir)
			_, err := st.Backup(context.Background(), to, ledger.BackupOptions{Force: tt.force})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr == nil {
				if p, _ := readCopy(t, to); p != 10 {
					t.Fatalf("copy has %d rows, want 10", p)
				}
				return
			}
			// A refused backup leaves the directory as it was: no temporary
			// file, the existing file whole.
			if after := entries(t, dir); after != before {
				t.Fatalf("files after the refusal %s, before %s", after, before)
			}
			if tt.kept != "" {
				if b, err := os.ReadFile(to); err != nil || string(b) != tt.kept {
					t.Fatalf("%s now holds %q (%v), want %q", to, b, err, tt.kept)
				}
			}
		})
	}
}

// A file at the destination is replaced with Force; a -wal beside it is
// not, whatever Force says: the caller tells them apart by ErrBackupSideFile.
func TestBackupSideFileIsNotAnExistingFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := openBackupStore(t, filepath.Join(dir, "ledger.db"), ledger.Config{})
	to := filepath.Join(dir, "copy.db")
	writeFile(t, to, "old")
	_, err := st.Backup(context.Background(), to, ledger.BackupOptions{})
	if !errors.Is(err, ledger.ErrBackupExists) || errors.Is(err, ledger.ErrBackupSideFile) {
		t.Fatalf("existing file: err = %v, want ErrBackupExists and not ErrBackupSideFile", err)
	}
	writeFile(t, to+"-wal", "stale")
	for _, force := range []bool{true, false} {
		if !force { // no file at the destination, only the -wal
			if err := os.Remove(to); err != nil {
				t.Fatal(err)
			}
		}
		_, err := st.Backup(context.Background(), to, ledger.BackupOptions{Force: force})
		if !errors.Is(err, ledger.ErrBackupSideFile) || !errors.Is(err, ledger.ErrBackupExists) {
			t.Fatalf("-wal beside it, force %t: err = %v, want ErrBackupSideFile (an ErrBackupExists)", force, err)
		}
	}
}

// A backup cancelled half-way leaves nothing behind.
func TestBackupCancelledLeavesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := openBackupStore(t, filepath.Join(dir, "ledger.db"), ledger.Config{})
	fill(t, st, 0, 300)
	before := entries(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stepsAfter := 0
	_, err := st.Backup(ctx, filepath.Join(dir, "copy.db"), ledger.BackupOptions{StepPages: 8, Progress: func(copied, total int) {
		if ctx.Err() != nil {
			stepsAfter++
		}
		if copied >= total/2 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) || stepsAfter != 0 {
		t.Fatalf("err = %v after %d more steps, want context.Canceled at once", err, stepsAfter)
	}
	if after := entries(t, dir); after != before {
		t.Fatalf("files after the cancelled backup %s, before %s", after, before)
	}
}

// A source with a damaged page gives a copy that fails its integrity
// check: the backup fails and leaves no file, rather than hand a new host a
// ledger that is not whole.
func TestBackupRefusesACopyThatIsNotWhole(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "ledger.db")
	st := openBackupStore(t, file, ledger.Config{})
	fill(t, st, 0, 300)
	if err := st.Close(); err != nil { // checkpoints: every page in the main file
		t.Fatal(err)
	}
	// Overwrite the header of a page in the middle of the payloads.
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(file, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(strings.Repeat("\xff", 64)), fi.Size()/4096/2*4096); err != nil {
		t.Fatal(err)
	}
	f.Close()

	st, err = ledger.Open(file, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	before := entries(t, dir)
	if _, err := st.Backup(context.Background(), filepath.Join(dir, "copy.db"), ledger.BackupOptions{}); err == nil {
		t.Fatal("backup of a damaged ledger succeeded")
	}
	if after := entries(t, dir); after != before {
		t.Fatalf("files after the failed backup %s, before %s", after, before)
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func writeFile(tb testing.TB, name, content string) {
	tb.Helper()
	if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
		tb.Fatal(err)
	}
}

func copyFile(tb testing.TB, from, to string) {
	tb.Helper()
	in, err := os.Open(from)
	if err != nil {
		tb.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		tb.Fatal(err)
	}
	if err := out.Close(); err != nil {
		tb.Fatal(err)
	}
}

// entries lists the names in dir, the store's -wal and -shm left out (they
// come and go with checkpoints).
func entries(tb testing.TB, dir string) string {
	tb.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var names []string
	for _, de := range des {
		if n := de.Name(); n != "ledger.db-wal" && n != "ledger.db-shm" {
			names = append(names, n)
		}
	}
	return strings.Join(names, " ")
}

func assertOnly(tb testing.TB, dir string, names ...string) {
	tb.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	allowed := map[string]bool{}
	for _, n := range names {
		allowed[n] = true
	}
	for _, de := range des {
		if !allowed[de.Name()] {
			tb.Fatalf("unexpected file %s left in %s", de.Name(), dir)
		}
	}
}

// A file at the destination names what replaces it in the caller's words.
func TestBackupExistsNamesForce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := openBackupStore(t, filepath.Join(dir, "ledger.db"), ledger.Config{})
	to := filepath.Join(dir, "copy.db")
	writeFile(t, to, "old")
	for _, tt := range []struct {
		names map[string]string
		want  string
	}{
		{nil, "(give Force to replace it)"},
		{map[string]string{"Force": "--force"}, "(give --force to replace it)"},
	} {
		_, err := st.Backup(context.Background(), to, ledger.BackupOptions{Names: tt.names})
		if !errors.Is(err, ledger.ErrBackupExists) || !strings.HasSuffix(err.Error(), tt.want) {
			t.Errorf("names %v: err = %v, want ErrBackupExists ending %q", tt.names, err, tt.want)
		}
	}
}

// A destination Backup cannot use is a *ConfigError: its Reason names it
// in the caller's words, its Error is the ledger's own.
func TestBackupRefusalSaysTo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := openBackupStore(t, filepath.Join(dir, "ledger.db"), ledger.Config{})
	_, err := st.Backup(context.Background(), dir, ledger.BackupOptions{Names: map[string]string{"To": "--to"}})
	var ce *ledger.ConfigError
	if !errors.Is(err, ledger.ErrInvalidConfig) || !errors.As(err, &ce) ||
		ce.Refusal() != "--to "+dir+": "+err.Error() || err.Error() != "ledger: invalid configuration: backup path "+dir+" is a directory" {
		t.Fatalf("err = %v (%#v), want a *ConfigError naming --to", err, ce)
	}
}
