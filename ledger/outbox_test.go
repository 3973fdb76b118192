package ledger_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

func enqueueWith(t testing.TB, st *ledger.Store, msgID string, fail error) (string, ledger.Result) {
	t.Helper()
	var id string
	rs, err := st.ApplyBatch(context.Background(), []ledger.Delivery{delivery(msgID, 1, "x")},
		func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
			var err error
			if id, err = tx.Enqueue(ctx, "webhook", d.Data); err != nil {
				return err
			}
			return fail
		}, ledger.Budget{})
	if err != nil {
		t.Fatal(err)
	}
	return id, rs[0]
}

// The outbox row exists if and only if its message was applied.
func TestEnqueueCommitsWithTheMessage(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	id, _ := enqueueWith(t, st, "m1", nil)
	tests := []struct {
		name    string
		do      func() error
		wantErr error
	}{
		{"sent by a non-claimer", func() error {
			return tr(st.Transition(ctx, id, ledger.Sent, ledger.Params{Worker: "w", ExternalID: "x"}))
		}, ledger.ErrNotOwner},
		{"resolve a queued row", func() error { return tr(st.Resolve(ctx, id, ledger.StatusSent, "x")) }, ledger.ErrIllegalTransition},
		{"retry a queued row", func() error { return st.Retry(ctx, id) }, ledger.ErrIllegalTransition},
		{"resolve as queued", func() error { return tr(st.Resolve(ctx, id, ledger.StatusQueued, "")) }, ledger.ErrIllegalTransition},
		{"unknown id", func() error {
			_, err := st.Transition(ctx, "nope", ledger.Claim, ledger.Params{Worker: "w", Lease: time.Second})
			return err
		}, ledger.ErrNotClaimed},
		{"get unknown", func() error { _, err := st.Get(ctx, "nope"); return err }, ledger.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.do(); !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
	if _, err := st.Transition(ctx, id, ledger.Claim, ledger.Params{Worker: "w1", Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := tr(st.Transition(ctx, id, ledger.Cancel, ledger.Params{})); !errors.Is(err, ledger.ErrTooLate) {
		t.Fatalf("cancel of a sending row: err = %v, want ErrTooLate", err)
	}
	if _, err := st.Transition(ctx, id, ledger.Claim, ledger.Params{Worker: "w2", Lease: time.Minute}); !errors.Is(err, ledger.ErrNotClaimed) {
		t.Fatalf("second claim: err = %v", err)
	}
	if err := tr(st.Transition(ctx, id, ledger.Fail, ledger.Params{Worker: "w1", Reason: "400"})); err != nil {
		t.Fatal(err)
	}
	if err := st.Retry(ctx, id); err != nil {
		t.Fatal(err)
	}
	if it, _ := st.Get(ctx, id); it.Status != ledger.StatusQueued || it.ClaimedBy != "" {
		t.Fatalf("after retry: %+v", it)
	}
}

// A lease that expires mid-send on an idempotent sink requeues the row, and
// the requeued row must remember that its send may have landed: it can be
// neither cancelled as unsent nor failed by a later rejection (a 409 "same
// key in progress" is exactly that), only sent or reviewed.
func TestExpiredLeaseRequeueKeepsMaybeSent(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	id, _ := enqueueWith(t, st, "m", nil)
	if _, err := st.Transition(ctx, id, ledger.Claim, ledger.Params{Worker: "w1", Lease: time.Second}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Second) // w1 vanished mid-send
	ex, err := st.ExpireLeases(ctx, "webhook", true)
	if err != nil || len(ex.Requeued) != 1 {
		t.Fatalf("expire: %+v, %v", ex, err)
	}
	it, err := st.Get(ctx, id)
	if err != nil || it.Status != ledger.StatusQueued || !it.MaybeSent {
		t.Fatalf("requeued row %+v, %v: want queued with maybe_sent", it, err)
	}
	if err := tr(st.Transition(ctx, id, ledger.Cancel, ledger.Params{})); !errors.Is(err, ledger.ErrMaybeSent) {
		t.Fatalf("cancel of a row that may be at the destination: err = %v, want ErrMaybeSent", err)
	}
	if _, err := st.Transition(ctx, id, ledger.Claim, ledger.Params{Worker: "w2", Lease: time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := tr(st.Transition(ctx, id, ledger.Fail, ledger.Params{Worker: "w2", Reason: "status 409: same key in progress"})); err == nil {
		t.Fatal("a rejection after a maybe-sent attempt marked the row failed")
	}
	if it, _ := st.Get(ctx, id); it.Status == ledger.StatusFailed || it.Status == ledger.StatusCancelled {
		t.Fatalf("row is %s: the item may be at the destination", it.Status)
	}
}

// A lease is wall-clock time on the ledger's clock. When that clock steps
// back (NTP correcting a clock that ran ahead), a lease taken before the
// step ends, by the clock, far later than any lease can last: a row its
// worker abandoned would stay sending for as long as the step. A claim made
// "in the future" by more than clockStepSlack is expired at once: to review
// (requeue, for an idempotent sink), never re-sent blindly. Found by the
// nemesis (a -2h/+2h clock jump with a run killed mid-send).
func TestLeaseTakenBeforeTheClockSteppedBackExpires(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	ahead, _ := enqueueWith(t, st, "m1", nil)
	small, _ := enqueueWith(t, st, "m2", nil)
	now = now.Add(2 * time.Hour) // the clock ran ahead when these were claimed
	if _, err := st.Transition(ctx, ahead, ledger.Claim, ledger.Params{Worker: "w1", Lease: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(-2*time.Hour + 30*time.Second)
	if _, err := st.Transition(ctx, small, ledger.Claim, ledger.Params{Worker: "w1", Lease: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(-30 * time.Second) // corrected: 2h back for the first, 30s for the second
	ex, err := st.ExpireLeases(ctx, "webhook", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(ex.Review) != 1 || ex.Review[0] != ahead {
		t.Fatalf("expired %+v: want only %s (claimed 2h ahead of the clock) in review", ex, ahead)
	}
	if it, _ := st.Get(ctx, ahead); it.Status != ledger.StatusReview {
		t.Fatalf("row claimed before the clock stepped back 2h is %s, want review", it.Status)
	}
	// A small step back only lengthens a lease by the step: it waits.
	if it, _ := st.Get(ctx, small); it.Status != ledger.StatusSending {
		t.Fatalf("row claimed 30s ahead is %s, want still sending", it.Status)
	}
	now = now.Add(41 * time.Second)
	if ex, err := st.ExpireLeases(ctx, "webhook", false); err != nil || len(ex.Review) != 1 {
		t.Fatalf("after its lease by the clock: %+v, %v", ex, err)
	}
}

// A retry is scheduled on the ledger's clock too: one scheduled while the
// clock ran ahead, the clock then stepped back, would wait for as long as
// the step. A row whose last change is more than a minute ahead of the
// clock now is due at once. (Found by a review of the lease fix.)
func TestRetryScheduledBeforeTheClockSteppedBackIsDue(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	id, _ := enqueueWith(t, st, "m1", nil)
	later, _ := enqueueWith(t, st, "m2", nil)
	now = now.Add(2 * time.Hour)
	for _, r := range []string{id, later} {
		if _, err := st.Transition(ctx, r, ledger.Claim, ledger.Params{Worker: "w", Lease: 10 * time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Transition(ctx, id, ledger.Retry, ledger.Params{Worker: "w", Reason: "503", Delay: time.Second}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(-2*time.Hour + 30*time.Second)
	// A small step: the second's retry waits its delay plus the step.
	if _, err := st.Transition(ctx, later, ledger.Retry, ledger.Params{Worker: "w", Reason: "503", Delay: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(-30 * time.Second)
	due, err := st.Due(ctx, "webhook", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 1 || due[0] != id {
		t.Fatalf("due %v after the clock stepped back 2h: want %s (scheduled 2h ahead) now, %s later", due, id, later)
	}
}

// A claim's lease starts once the claim holds the writer: time spent waiting
// behind another writer (a batch, a prune, another process) must not eat
// into the lease, or a send still in flight would be declared abandoned.
func TestClaimLeaseStartsAfterTheWriterWait(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	st, err := ledger.Open(path, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	id, _ := enqueueWith(t, st, "m", nil)
	// Another process holds the write lock for a while.
	other, err := sql.Open("sqlite", path+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.Begin()
	if err != nil {
		t.Fatal(err)
	}
	const hold, lease = 400 * time.Millisecond, 300 * time.Millisecond
	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(hold) // the fault: a slow writer elsewhere
		tx.Rollback()
	}()
	it, err := st.Transition(context.Background(), id, ledger.Claim, ledger.Params{Worker: "w", Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	<-released
	if left := time.Until(it.LeaseUntil); left < lease/2 {
		t.Fatalf("lease has %s left right after the claim, want about %s: it started before the wait for the writer", left, lease)
	}
}

// tr drops the row a transition returns, for tests that check only its error.
func tr(_ ledger.OutboxItem, err error) error { return err }

// Each claim records where its send goes; the record keeps the lowest
// position on one instance, and is dropped when the row's copies may be in
// more than one (or the sink names none), so no lookup can then prove the
// item never arrived.
func TestClaimRecordsWhereTheSendGoes(t *testing.T) {
	t.Parallel()
	x5, x9, y2 := ledger.Destination{Instance: "X@1", Position: 5}, ledger.Destination{Instance: "X@1", Position: 9}, ledger.Destination{Instance: "Y@2", Position: 2}
	for _, tc := range []struct {
		name    string
		claims  []ledger.Destination
		between ledger.Change // how each claim but the last ends
		want    ledger.Destination
	}{
		{name: "first claim", claims: []ledger.Destination{x5}, want: x5},
		{name: "a later send on the same instance keeps the earlier position", claims: []ledger.Destination{x5, x9}, between: ledger.RetryMaybeSent, want: x5},
		{name: "a lower position on the same instance is kept", claims: []ledger.Destination{x9, x5}, between: ledger.Retry, want: x5},
		{name: "maybe landed on one instance, sent to another", claims: []ledger.Destination{x5, y2}, between: ledger.RetryMaybeSent, want: ledger.Destination{}},
		{name: "provably not landed on one instance, sent to another", claims: []ledger.Destination{x5, y2}, between: ledger.Retry, want: y2},
		{name: "maybe landed where nothing was recorded", claims: []ledger.Destination{{}, x5}, between: ledger.RetryMaybeSent, want: ledger.Destination{}},
		{name: "a sink that names no instance", claims: []ledger.Destination{x5, {}}, between: ledger.Retry, want: ledger.Destination{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := openStore(t)
			ctx := context.Background()
			id, _ := enqueueWith(t, st, "m", nil)
			var it ledger.OutboxItem
			for i, to := range tc.claims {
				var err error
				if i > 0 {
					if _, err = st.Transition(ctx, id, tc.between, ledger.Params{Worker: "w"}); err != nil {
						t.Fatal(err)
					}
				}
				if it, err = st.Transition(ctx, id, ledger.Claim, ledger.Params{Worker: "w", Lease: time.Minute, SentTo: to}); err != nil {
					t.Fatal(err)
				}
			}
			if got, err := st.Get(ctx, id); err != nil || got.SentTo != tc.want || it.SentTo != tc.want {
				t.Fatalf("sent to %+v (claim returned %+v), %v; want %+v", got.SentTo, it.SentTo, err, tc.want)
			}
		})
	}
}
