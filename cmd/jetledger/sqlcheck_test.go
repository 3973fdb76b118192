package main

import (
	"context"
	"github.com/jetledger/jetledger/internal/demo"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/sqlhandler"
)

// holdPort listens on a free loopback port for the test's life and returns
// its address: whatever tries to listen there fails.
func holdPort(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	return l.Addr().String()
}

// A bad --apply or --schema is a usage error before any server, store or
// database exists: with the embedded server's port taken (which fails the
// start with exit 1), the SQL's error is the one said, and nothing is left
// behind. The issue found the embedded store created first and, with the
// port busy, exit 1 instead of 2.
func TestBadSQLIsRefusedBeforeAnythingStarts(t *testing.T) {
	t.Parallel()
	busy := holdPort(t)
	schema := filepath.Join(t.TempDir(), "bad.sql")
	if err := os.WriteFile(schema, []byte("CREATE TABLE t (x INTEGER;"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
	}{
		{"apply does not compile", []string{"--apply", "INSERT INTO nowhere VALUES (:data)"}},
		{"apply controls the transaction", []string{"--apply", "COMMIT"}},
		{"apply parameter typo", []string{"--apply", "SELECT :dta"}},
		{"schema does not compile", []string{"--schema", schema}},
	}
	for _, tt := range tests {
		for _, listen := range []string{busy, "127.0.0.1:0"} {
			dir := t.TempDir()
			args := append([]string{"run", "--db", filepath.Join(dir, "l.db"), "--listen", listen, "--subjects", "x.>"}, tt.args...)
			usageMessage(t, args...)
			assertEmpty(t, dir, args)
		}
	}
}

// The early check sees the tables the ledger already has: an --apply on a
// table an earlier --schema created passes it (and run goes on, here to the
// busy port: exit 1, not 2), while one on a table it lacks is refused.
func TestEarlySQLCheckSeesTheLedgersTables(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "l.db")
	st, err := ledger.Open(db, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Exec(context.Background(), `CREATE TABLE balances (account TEXT PRIMARY KEY, amount INTEGER NOT NULL);
		CREATE VIEW rich AS SELECT account FROM balances WHERE amount > 100;
		CREATE TRIGGER no_negative BEFORE UPDATE ON balances WHEN NEW.amount < 0 BEGIN SELECT RAISE(ABORT, 'negative'); END;`); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	apply := "INSERT INTO balances VALUES (json_extract(:data,'$.a'), 1) ON CONFLICT(account) DO UPDATE SET amount = amount + 1"
	if err := checkSQLFirst(context.Background(), db, "", apply); err != nil {
		t.Fatalf("--apply on a table the ledger has: %v", err)
	}
	if err := checkSQLFirst(context.Background(), db, "", "INSERT INTO nowhere VALUES (:data)"); !isUsage(err) {
		t.Fatalf("--apply on a table the ledger lacks: %v, want a usage error", err)
	}
	code, _, errOut := runMain("run", "--db", db, "--listen", holdPort(t), "--subjects", "x.>", "--apply", apply)
	if code != exitFailure {
		t.Fatalf("exit %d, want %d (the port in use):\n%s", code, exitFailure, errOut)
	}
}

func isUsage(err error) bool {
	_, ok := err.(usageError)
	return ok
}

// openTestStore opens a ledger on a new file with the demo's balances table
// and a table whose column names contain parameter look-alikes (as
// sqlhandler's tests do).
func openTestStore(tb testing.TB) *ledger.Store {
	tb.Helper()
	st, err := ledger.Open(filepath.Join(tb.TempDir(), "ledger.db"), ledger.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	if _, err := st.DB().ExecContext(context.Background(), demo.Schema+
		`; CREATE TABLE IF NOT EXISTS seen ("at:dta" TEXT, v TEXT)`); err != nil {
		tb.Fatal(err)
	}
	return st
}

// checkSQLFirst runs --schema and checks --apply on a scratch copy of the
// ledger db's schema before anything starts (sqlhandler.Check): a bad one
// exits 2 with nothing created: what run does first (service.Start, its
// refusal advised by sqlUsage).
func checkSQLFirst(ctx context.Context, db, schemaFile, apply string) error {
	cfg, err := handlerConfig(schemaFile, apply)
	if err != nil {
		return err
	}
	if err := sqlhandler.Check(ctx, db, cfg); err != nil {
		return sqlUsage(err)
	}
	return nil
}
