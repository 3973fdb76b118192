package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/jetledger/jetledger/ledger"
)

// A --schema file cannot weaken the ledger's durability: the writer runs
// every batch commit, so a schema's "fast SQLite" pragmas would turn
// synchronous=FULL off for the whole process. Setting one to the value the
// ledger already has changes nothing and passes.
func TestSchemaCannotWeakenDurability(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := ledger.Open(filepath.Join(dir, "ledger.db"), ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	write := func(name, sql string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(sql), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	harmless := write("ok.sql", "PRAGMA journal_mode = WAL;\nPRAGMA synchronous = FULL;\nCREATE TABLE IF NOT EXISTS balances (account TEXT PRIMARY KEY, amount INTEGER NOT NULL);")
	if _, err := newEventsHandler(ctx, st, harmless, ""); err != nil {
		t.Fatalf("a schema restating the ledger's settings was refused: %v", err)
	}
	weak := write("weak.sql", "PRAGMA synchronous = NORMAL;\nCREATE TABLE IF NOT EXISTS b (x);")
	_, err = newEventsHandler(ctx, st, weak, "")
	if !errors.As(err, new(usageError)) || !errors.Is(err, ledger.ErrFixedSetting) {
		t.Fatalf("schema with synchronous = NORMAL: err = %v, want a usage error wrapping ErrFixedSetting", err)
	}
	var sync int
	if err := st.DB().QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync); err != nil || sync != 2 {
		t.Fatalf("the writer runs with synchronous=%d (%v), want 2 (FULL)", sync, err)
	}
}

// Every statement of --apply is compiled at start as a handler runs it: a
// typo in a later statement, or transaction control a handler may not run,
// exits 2 before anything is consumed instead of failing every message.
func TestApplyIsCheckedStatementByStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openTestStore(t)
	tests := []struct {
		name, apply string
		wantErr     error // wrapped besides the usage error, if any
	}{
		{name: "typo in the second statement", apply: `INSERT INTO seen (v) VALUES (:data); INSERT INTO seeen (v) VALUES (:data)`},
		{name: "a transaction of its own", apply: `BEGIN; INSERT INTO seen (v) VALUES (:data); COMMIT;`, wantErr: ledger.ErrTransactionControl},
		{name: "a write to the ledger", apply: `INSERT INTO seen (v) VALUES (:data); DELETE FROM processed_messages`, wantErr: ledger.ErrTransactionControl},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newEventsHandler(ctx, st, "", tt.apply)
			if !errors.As(err, new(usageError)) || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
				t.Fatalf("err = %v, want a usage error (wrapping %v)", err, tt.wantErr)
			}
		})
	}
	if _, err := newEventsHandler(ctx, st, "", `INSERT INTO seen (v) VALUES (:data); UPDATE seen SET v = v WHERE 0`); err != nil {
		t.Fatalf("two good statements refused: %v", err)
	}
}
