package ledger_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/jetledger/jetledger/ledger"
)

// A batch whose fence refuses at the commit is rolled back whole, as
// ErrFenced wrapping the fence's error, pipelined or not; the fence let
// through, the same batch commits.
func TestFenceRefusesTheCommitAndRollsTheBatchBack(t *testing.T) {
	ctx := context.Background()
	lost := errors.New("lease not held")
	var refuse bool
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{Fence: func() error {
		if refuse {
			return lost
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rows := func() (n int) {
		if err := st.DB().QueryRowContext(ctx, `SELECT count(*) FROM processed_messages`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	batch := []ledger.Delivery{delivery("a", 1, "x"), delivery("b", 2, "y")}
	refuse = true
	if _, err := st.ApplyBatch(ctx, batch, noop, ledger.Budget{}); !errors.Is(err, ledger.ErrFenced) || !errors.Is(err, lost) {
		t.Fatalf("ApplyBatch behind a refusing fence: %v, want ErrFenced wrapping the fence's error", err)
	}
	if _, _, err := st.ApplyBatchPipelined(ctx, batch, noop, ledger.Budget{}); !errors.Is(err, ledger.ErrFenced) {
		t.Fatalf("ApplyBatchPipelined behind a refusing fence: %v, want ErrFenced", err)
	}
	if n := rows(); n != 0 {
		t.Fatalf("%d ledger rows after refused commits, want 0", n)
	}
	refuse = false
	if _, err := st.ApplyBatch(ctx, batch, noop, ledger.Budget{}); err != nil {
		t.Fatal(err)
	}
	if n := rows(); n != 2 {
		t.Fatalf("%d ledger rows once the fence lets the batch through, want 2", n)
	}
}
