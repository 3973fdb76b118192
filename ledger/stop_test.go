package ledger_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/jetledger/jetledger/ledger"
)

// A write cut by a stop says so (context.Canceled), not the "already
// committed or rolled back" database/sql answers once it rolled the
// transaction back: a run stopped as it started exited 1 for it.
func TestAWriteCutByAStopSaysSo(t *testing.T) {
	t.Parallel()
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	err = ledger.ExecStoppedMidWrite(st, `INSERT INTO jetledger_consumers (stream, durable, first_seen, last_seen) VALUES ('S', 'd', 1, 1)`)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if cs, err := st.Consumers(context.Background()); err != nil || len(cs) != 0 {
		t.Fatalf("consumers %v (%v), want none: the write was rolled back", cs, err)
	}
}
