package changelog_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
)

// A host lost (SIGKILL) while SQLite made its ledger file, before the file
// was in WAL mode, leaves it with a hot rollback journal, which a
// read-only open may not roll back (SQLITE_READONLY_ROLLBACK): every look
// of the lifecycle failed, and the host never ran the partition again
// (helper-31's 1c; a kill at a random instant of a ledger's making left
// this in 38 of 300). The look rolls the journal back, as any read-write
// open would, and the file is what it was before: here, nothing. The
// file and its journal are kept aside first.
func TestALedgerFileCutWhileItWasMadeIsRolledBackNotWaitedOn(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, s)
	log := ensure(t, js, changelog.Config{Stream: "PAY", Durable: "pay-p0"})
	file := filepath.Join(t.TempDir(), "ledger-p0.db")
	plantHotJournal(t, file)
	begin, err := log.Prepare(ctx, file)
	if err != nil || !begin {
		t.Fatalf("the lifecycle on a file cut while it was made: begin %v, %v; want it to begin the empty log", begin, err)
	}
	if _, err := os.Stat(file + "-journal"); !os.IsNotExist(err) {
		t.Fatalf("the hot journal is still there: %v", err)
	}
	kept, _ := filepath.Glob(file + ".rolled-back-*")
	if len(kept) != 2 {
		t.Fatalf("kept before the rollback: %v; want the file and its journal", kept)
	}
}

// plantHotJournal puts at file what a SIGKILL leaves in the middle of a
// write transaction in rollback-journal mode: the database and its hot
// journal, copied from under an open transaction; a read-only open of it
// then fails.
func plantHotJournal(t *testing.T, file string) {
	t.Helper()
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "cut.db")
	db, err := sql.Open("sqlite", src+"?_pragma=cache_size(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{"BEGIN IMMEDIATE", "CREATE TABLE seed(x)",
		"INSERT INTO seed SELECT randomblob(600) FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 400) SELECT i FROM n)"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, suffix := range []string{"", "-journal"} {
		data, err := os.ReadFile(src + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file+suffix, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	ro, err := sql.Open("sqlite", "file:"+file+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	var n int
	if err := ro.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&n); err == nil {
		t.Fatalf("the planted file %s opens read-only: no hot journal", file)
	}
}
