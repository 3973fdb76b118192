//go:build linux

package ledger_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

// A ledger whose path is a symbolic link to the file: SQLite resolves the
// link and keeps its WAL beside the target (real.db-wal), but the WAL sync
// of a pipelined batch (walSyncer) looks for link-wal. Durable must not
// fail: a consumer acks nothing of a batch whose Durable failed.
func TestPipelinedDurableThroughASymlinkedFile(t *testing.T) {
	real := filepath.Join(t.TempDir(), "real.db")
	link := filepath.Join(t.TempDir(), "ledger.db")
	if err := os.WriteFile(real, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	st, err := ledger.Open(link, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.DB().Exec(`CREATE TABLE balances (account TEXT PRIMARY KEY, amount INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	_, p, err := st.ApplyBatchPipelined(context.Background(), []ledger.Delivery{delivery("a", 1, "x")}, credit, ledger.Budget{Work: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(real + "-wal"); err != nil {
		t.Logf("no WAL beside the target: %v", err)
	}
	if err := p.Durable(context.Background()); err != nil {
		t.Fatalf("Durable through a symlinked ledger file: %v", err)
	}
}
