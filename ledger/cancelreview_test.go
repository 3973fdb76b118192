package ledger_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

// A row cancelled while its send was in flight keeps its cancel in review,
// whether its worker wrote it there or its lease expired: no change may
// queue it to be sent again or settle it as sent; only a finished cancel
// (or a delete at the destination) leaves review, as cancelled.
func TestCancelledInFlightKeepsItsCancelInReview(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	toReview := map[string]func(id string) error{
		"written back": func(id string) error {
			return tr(st.Transition(ctx, id, ledger.Review, ledger.Params{Worker: "w", Reason: "delete failed", ExternalID: "ext"}))
		},
		"lease expired": func(string) error {
			now = now.Add(2 * time.Second)
			ex, err := st.ExpireLeases(ctx, "webhook", true)
			if err == nil && len(ex.Review) != 1 {
				err = errors.New("nothing expired to review")
			}
			return err
		},
	}
	for how, move := range toReview {
		id, _ := enqueueWith(t, st, "m-"+how, nil)
		if _, err := st.Transition(ctx, id, ledger.Claim, ledger.Params{Worker: "w", Lease: time.Second}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Transition(ctx, id, ledger.CancelInFlight, ledger.Params{}); err != nil {
			t.Fatal(err)
		}
		if err := move(id); err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		if it, _ := st.Get(ctx, id); it.Status != ledger.StatusReview || !it.PendingDelete {
			t.Fatalf("%s: row %s, pending delete %v; want review with its cancel kept", how, it.Status, it.PendingDelete)
		}
		for _, c := range []ledger.Change{ledger.Unseen, ledger.Found} {
			if err := tr(st.Transition(ctx, id, c, ledger.Params{ExternalID: "ext"})); !errors.Is(err, ledger.ErrCancelPending) {
				t.Errorf("%s: %s = %v, want ErrCancelPending", how, c, err)
			}
		}
		if err := tr(st.Resolve(ctx, id, ledger.StatusSent, "ext")); !errors.Is(err, ledger.ErrCancelPending) {
			t.Errorf("%s: resolve as sent = %v, want ErrCancelPending", how, err)
		}
		// A person who finds it absent finishes the cancel: never failed,
		// where retry would send it again.
		if err := tr(st.Resolve(ctx, id, ledger.StatusFailed, "")); err != nil {
			t.Fatalf("%s: resolve as failed: %v", how, err)
		}
		if it, _ := st.Get(ctx, id); it.Status != ledger.StatusCancelled || it.PendingDelete {
			t.Fatalf("%s: resolved row %s, pending delete %v; want cancelled", how, it.Status, it.PendingDelete)
		}
		if err := st.Retry(ctx, id); !errors.Is(err, ledger.ErrIllegalTransition) {
			t.Fatalf("%s: retry of a cancelled row = %v", how, err)
		}
	}
}

// A row settled by a person no longer shows its send's error as if it
// stood: resolved as sent, none; as failed, saying so, with what the send
// said.
func TestAResolvedRowSaysHowItWasSettled(t *testing.T) {
	t.Parallel()
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	for _, as := range []ledger.Status{ledger.StatusSent, ledger.StatusFailed} {
		id, _ := enqueueWith(t, st, "m-"+string(as), nil)
		if _, err := st.Transition(ctx, id, ledger.Claim, ledger.Params{Worker: "w", Lease: time.Minute}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Transition(ctx, id, ledger.Review, ledger.Params{Worker: "w", Reason: "timed out"}); err != nil {
			t.Fatal(err)
		}
		it, err := st.Resolve(ctx, id, as, "ext-1")
		if err != nil {
			t.Fatal(err)
		}
		want := ""
		if as == ledger.StatusFailed {
			want = "resolved as not sent by a person (the send said: timed out)"
		}
		if it.Error != want {
			t.Errorf("resolved as %s: error %q, want %q", as, it.Error, want)
		}
	}
}
