package main

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// attackLedger makes a ledger file holding stmts.
func attackLedger(t *testing.T, stmts string) string {
	t.Helper()
	db := filepath.Join(t.TempDir(), "l.db")
	st, err := ledger.Open(db, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Exec(context.Background(), stmts); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return db
}

// Found by review (issue 19, point 11): a --schema that works on the real
// ledger (it seeds a row whose parent the ledger holds) must not be refused
// because the scratch copy has the schema but none of the rows.
func TestEarlySQLCheckDoesNotRefuseASchemaThatWorksOnTheLedger(t *testing.T) {
	t.Parallel()
	db := attackLedger(t, `CREATE TABLE accounts (id TEXT PRIMARY KEY);
		CREATE TABLE limits (account TEXT PRIMARY KEY REFERENCES accounts(id), max INTEGER NOT NULL);
		INSERT INTO accounts VALUES ('acme');`)
	schema := filepath.Join(t.TempDir(), "seed.sql")
	writeFile(t, schema, "INSERT OR IGNORE INTO limits VALUES ('acme', 100);")
	// The real ledger takes it.
	st, err := ledger.Open(db, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = newEventsHandler(context.Background(), st, schema, "")
	st.Close()
	if err != nil {
		t.Fatalf("the real ledger refuses the schema: %v", err)
	}
	if err := checkSQLFirst(context.Background(), db, schema, ""); err != nil {
		t.Fatalf("the early check refuses a --schema the real ledger takes: %v", err)
	}
}

// Found by review (issue 19, point 11): --schema runs on the scratch copy and
// then on the ledger. A schema that writes outside the ledger file (an
// ATTACHed database) must not write there twice.
func TestEarlySQLCheckRunsTheSchemaOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := attackLedger(t, `CREATE TABLE IF NOT EXISTS t (x INTEGER);`)
	audit := filepath.Join(dir, "audit.db")
	schema := filepath.Join(dir, "schema.sql")
	writeFile(t, schema, "ATTACH DATABASE '"+audit+"' AS audit; CREATE TABLE IF NOT EXISTS audit.starts (n INTEGER); INSERT INTO audit.starts VALUES (1); DETACH DATABASE audit;")
	if err := checkSQLFirst(context.Background(), db, schema, ""); err != nil {
		t.Skipf("the check refuses ATTACH: %v", err)
	}
	st, err := ledger.Open(db, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newEventsHandler(context.Background(), st, schema, ""); err != nil {
		t.Skipf("the ledger refuses ATTACH: %v", err)
	}
	st.Close()
	a, err := sql.Open("sqlite", audit)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var n int
	if err := a.QueryRow(`SELECT count(*) FROM starts`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("one start wrote %d rows into the attached database: --schema ran %d times", n, n)
	}
}

// Found by review (issue 19, point 11): the early check must hold for a
// ledger with an FTS5 table; a bad --apply is refused before anything
// starts. copySchema copies the FTS5 shadow tables after the virtual table
// made them, fails, and skips the check.
func TestEarlySQLCheckHoldsForALedgerWithFTS5(t *testing.T) {
	t.Parallel()
	db := attackLedger(t, `CREATE VIRTUAL TABLE docs USING fts5(body);`)
	if err := checkSQLFirst(context.Background(), db, "", "INSERT INTO nowhere VALUES (:data)"); !isUsage(err) {
		t.Fatalf("a bad --apply with an FTS5 table in the ledger: %v, want a usage error before anything starts", err)
	}
}

// Found by review (issue 19, point 11): a view created before the table it reads (the table was
// rebuilt since: dropped and created again) must not turn off the check.
func TestEarlySQLCheckHoldsForAViewOlderThanItsTable(t *testing.T) {
	t.Parallel()
	db := attackLedger(t, `CREATE TABLE b (x INTEGER); CREATE VIEW v AS SELECT x FROM b;
		DROP TABLE b; CREATE TABLE b (x INTEGER, y INTEGER);`)
	if err := checkSQLFirst(context.Background(), db, "", "INSERT INTO nowhere VALUES (:data)"); !isUsage(err) {
		t.Fatalf("a bad --apply with a view older than its table: %v, want a usage error before anything starts", err)
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Found by review (issue 19, point 11): a bad --apply with
// --partitions must be refused before any server, store or stream exists.
// runPartitions starts the embedded server and creates the partitioned
// stream first; each partition's run checks the SQL only after that.
func TestBadApplyWithPartitionsCreatesNothing(t *testing.T) {
	t.Parallel()
	bad := []string{"--subjects", "pay.*", "--partitions", "2", "--apply", "INSERT INTO nowhere VALUES (:data)"}
	t.Run("nats", func(t *testing.T) {
		t.Parallel()
		srv := consumertest.RunServer(t)
		args := append([]string{"run", "--nats", srv.ClientURL(), "--db", filepath.Join(t.TempDir(), "pay.db"), "--stream", "PAY"}, bad...)
		code, _, _ := runMain(args...)
		_, js := consumertest.Connect(t, srv)
		if _, err := js.Stream(context.Background(), "PAY"); code != exitUsage || !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Fatalf("exit %d (want %d); stream PAY after a refused --apply: lookup %v, want not found", code, exitUsage, err)
		}
	})
	t.Run("embedded, port busy", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		args := append([]string{"run", "--db", filepath.Join(dir, "pay.db"), "--listen", holdPort(t)}, bad...)
		usageMessage(t, args...)
		assertEmpty(t, dir, args)
	})
}
