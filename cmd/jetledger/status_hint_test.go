package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/jetledger/jetledger/ledger"
)

// A missing --nats-creds (or --nats-nkey) file is not the ledger: status
// must not tell the user to give the database with --db for it.
func TestStatusHintsDBOnlyForTheLedger(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "l.db")
	st, err := ledger.Open(db, ledger.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	for _, flag := range []string{"--nats-creds", "--nats-nkey"} {
		code, _, stderr := runMain("status", "--db", db, "--nats", "nats://127.0.0.1:1", flag, filepath.Join(dir, "missing"))
		if code != exitFailure {
			t.Errorf("%s: exit %d, want %d", flag, code, exitFailure)
		}
		if strings.Contains(stderr, "give the database with --db") {
			t.Errorf("%s missing: the hint names --db, though the ledger is there:\n%s", flag, stderr)
		}
	}
}
