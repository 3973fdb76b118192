package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jetledger/jetledger/ledger"
)

// backupLedger makes a ledger of n processed messages and returns its path.
func backupLedger(tb testing.TB, dir string, n int) string {
	tb.Helper()
	db := filepath.Join(dir, "ledger.db")
	st, err := ledger.Open(db, ledger.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	defer st.Close()
	addRows(tb, st, 0, n)
	return db
}

func addRows(tb testing.TB, st *ledger.Store, first, n int) {
	tb.Helper()
	noop := func(context.Context, *ledger.Tx, ledger.Delivery) error { return nil }
	var batch []ledger.Delivery
	for i := first; i < first+n; i++ {
		batch = append(batch, ledger.Delivery{MessageID: fmt.Sprint("id-", i), Stream: "EV", Sequence: uint64(i + 1), Subject: "ev.x", Data: []byte("{}")})
	}
	if _, err := st.ApplyBatch(context.Background(), batch, noop, ledger.Budget{}); err != nil {
		tb.Fatal(err)
	}
}

// processedIn opens a copy as run would and counts its ledger rows.
func processedIn(tb testing.TB, file string) int64 {
	tb.Helper()
	st, err := ledger.Open(file, ledger.Config{})
	if err != nil {
		tb.Fatalf("the copy %s does not open as a ledger: %v", file, err)
	}
	defer st.Close()
	s, err := st.Stats(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return s.Processed
}

func TestLedgerBackup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := backupLedger(t, dir, 25)
	to := filepath.Join(dir, "host-b", "ledger.db")
	if err := os.Mkdir(filepath.Dir(to), 0o700); err != nil {
		t.Fatal(err)
	}

	code, stdout, stderr := runMain("ledger", "backup", "--db", db, "--to", to, "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got backupResult
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	fi, err := os.Stat(to)
	if err != nil {
		t.Fatal(err)
	}
	if got.From != db || got.Path != to || got.Tables["processed_messages"] != 25 || got.Rows < 25 || got.SizeBytes != fi.Size() {
		t.Fatalf("printed %+v; want from %s, path %s, 25 processed_messages rows, size %d", got, db, to, fi.Size())
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("copy has mode %v, want 0600", fi.Mode().Perm())
	}
	if n := processedIn(t, to); n != 25 {
		t.Fatalf("copy holds %d processed messages, want 25", n)
	}

	// The copy is there now: kept without --force, replaced with it.
	st, err := ledger.Open(db, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	addRows(t, st, 25, 5)
	st.Close()
	code, _, stderr = runMain("ledger", "backup", "--db", db, "--to", to)
	if code != exitFailure || !strings.Contains(stderr, "--force") {
		t.Fatalf("exit %d, want %d and --force named: %s", code, exitFailure, stderr)
	}
	if n := processedIn(t, to); n != 25 {
		t.Fatalf("a refused backup changed the copy: %d rows, want 25", n)
	}
	code, stdout, stderr = runMain("ledger", "backup", "--db", db, "--to", to, "--force")
	if code != exitOK || !strings.Contains(stdout, "processed_messages") {
		t.Fatalf("exit %d, stdout %q: %s", code, stdout, stderr)
	}
	if n := processedIn(t, to); n != 30 {
		t.Fatalf("replaced copy holds %d rows, want 30", n)
	}
	entries, err := os.ReadDir(filepath.Dir(to))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Fatalf("beside the copy: %v, want the copy alone", entries)
	}
}

// The copy may go to another file system: the temporary file is written
// beside the destination, so the rename never crosses one.
func TestLedgerBackupToAnotherFileSystem(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := backupLedger(t, dir, 10)
	const other = "/dev/shm" // tmpfs on Linux
	otherDir, err := os.MkdirTemp(other, "jetledger-backup-*")
	if err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { os.RemoveAll(otherDir) })
	// The rename a backup written elsewhere would need fails here.
	probe := filepath.Join(dir, "probe")
	if err := os.WriteFile(probe, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Rename(probe, filepath.Join(otherDir, "probe")) == nil {
		t.Skipf("%s is on the same file system as %s here", other, dir)
	}
	to := filepath.Join(otherDir, "ledger.db")
	if code, _, stderr := runMain("ledger", "backup", "--db", db, "--to", to); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if n := processedIn(t, to); n != 10 {
		t.Fatalf("copy holds %d rows, want 10", n)
	}
}

func TestLedgerBackupUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := backupLedger(t, dir, 3)
	missing := filepath.Join(dir, "missing.db")
	tests := []struct {
		name string
		args []string
		want int
	}{
		{name: "no --to", args: []string{"--db", db}, want: exitUsage},
		{name: "--to the ledger", args: []string{"--db", db, "--to", db, "--force"}, want: exitUsage},
		{name: "--to the ledger's WAL", args: []string{"--db", db, "--to", db + "-wal", "--force"}, want: exitUsage},
		{name: "--to a directory", args: []string{"--db", db, "--to", dir, "--force"}, want: exitUsage},
		{name: "--to not a plain path", args: []string{"--db", db, "--to", filepath.Join(dir, "c.db?mode=memory")}, want: exitUsage},
		{name: "no such ledger", args: []string{"--db", missing, "--to", filepath.Join(dir, "c.db")}, want: exitFailure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runMain(append([]string{"ledger", "backup"}, tt.args...)...)
			if code != tt.want {
				t.Fatalf("exit %d, want %d: %s", code, tt.want, stderr)
			}
		})
	}
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("backup of a missing ledger created it")
	}
	if n := processedIn(t, db); n != 3 {
		t.Fatalf("the ledger holds %d rows after the refusals, want 3", n)
	}
}
