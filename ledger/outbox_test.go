package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

func enqueueWith(t *testing.T, st *ledger.Store, msgID string, fail error) (string, ledger.Result) {
	t.Helper()
	var id string
	rs, err := st.ApplyBatch(context.Background(), []ledger.Delivery{delivery(msgID, 1, "x")},
		func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
			var err error
			if id, err = tx.Enqueue(ctx, "webhook", d.Data); err != nil {
				return err
			}
			return fail
		})
	if err != nil {
		t.Fatal(err)
	}
	return id, rs[0]
}

// The outbox row exists if and only if its message was applied.
func TestEnqueueCommitsWithTheMessage(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	failedID, res := enqueueWith(t, st, "m-fail", errors.New("handler failed after enqueue"))
	if res.Outcome != ledger.Failed {
		t.Fatalf("outcome %v", res.Outcome)
	}
	if _, err := st.Get(ctx, failedID); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("row of a failed message: err = %v, want ErrNotFound", err)
	}
	id, res := enqueueWith(t, st, "m-ok", nil)
	if res.Outcome != ledger.Applied {
		t.Fatalf("outcome %v", res.Outcome)
	}
	it, err := st.Get(ctx, id)
	if err != nil || it.Status != ledger.StatusQueued || it.MessageID != "m-ok" || len(id) != 26 {
		t.Fatalf("row %+v, %v", it, err)
	}
	// A redelivery is a duplicate: no second row.
	if _, res := enqueueWith(t, st, "m-ok", nil); res.Outcome != ledger.Duplicate {
		t.Fatalf("outcome %v", res.Outcome)
	}
	counts, err := st.OutboxCounts(ctx)
	if err != nil || counts[ledger.StatusQueued] != 1 {
		t.Fatalf("counts %v, %v", counts, err)
	}
}

func TestOutboxIllegalTransitions(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	id, _ := enqueueWith(t, st, "m1", nil)
	tests := []struct {
		name    string
		do      func() error
		wantErr error
	}{
		{"sent by a non-claimer", func() error { return st.MarkSent(ctx, id, "w", "x") }, ledger.ErrNotOwner},
		{"resolve a queued row", func() error { return st.Resolve(ctx, id, ledger.StatusSent, "x") }, ledger.ErrIllegalTransition},
		{"retry a queued row", func() error { return st.Retry(ctx, id) }, ledger.ErrIllegalTransition},
		{"resolve as queued", func() error { return st.Resolve(ctx, id, ledger.StatusQueued, "") }, ledger.ErrIllegalTransition},
		{"unknown id", func() error { _, err := st.Claim(ctx, "nope", "w", time.Second); return err }, ledger.ErrNotClaimed},
		{"get unknown", func() error { _, err := st.Get(ctx, "nope"); return err }, ledger.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.do(); !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
	if _, err := st.Claim(ctx, id, "w1", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := st.CancelQueued(ctx, id); !errors.Is(err, ledger.ErrTooLate) {
		t.Fatalf("cancel of a sending row: err = %v, want ErrTooLate", err)
	}
	if _, err := st.Claim(ctx, id, "w2", time.Minute); !errors.Is(err, ledger.ErrNotClaimed) {
		t.Fatalf("second claim: err = %v", err)
	}
	if err := st.MarkFailed(ctx, id, "w1", "400", time.Time{}, false); err != nil {
		t.Fatal(err)
	}
	if err := st.Retry(ctx, id); err != nil {
		t.Fatal(err)
	}
	if it, _ := st.Get(ctx, id); it.Status != ledger.StatusQueued || it.ClaimedBy != "" {
		t.Fatalf("after retry: %+v", it)
	}
}
