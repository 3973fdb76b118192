package outbox_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/ledger"
)

// cancellingLookingSink makes e's sink its destination with deletes and a
// lookup by key, each request given timeout, and returns it.
func cancellingLookingSink(t *testing.T, e *outboxEnv, timeout time.Duration) *webhook.Sink {
	t.Helper()
	s, err := webhook.New(webhook.Config{URL: e.dest.URL(), DeleteURL: e.dest.DeleteURL(), LookupURL: e.dest.LookupURL(), Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	e.sink = s
	return s
}

// A row cancelled while its send was in flight, whose outcome was unknown,
// goes to review with its cancel kept (issue 19). A proven lookup that then finds
// it "never seen" must finish the cancel, not queue the cancelled item to be
// sent again.
func TestCancelledWhileSendingIsNeverSentAgainByALookup(t *testing.T) {
	t.Parallel()
	e := newOutboxEnv(t, false, 200*time.Millisecond)
	proof := sentRows(t, e, "m0")[0] // a held item the lookup proves itself on
	cancellingLookingSink(t, e, 200*time.Millisecond)
	// m1's request, held, times out before anything is stored.
	_, id := cancelledInFlight(t, e, outbox.Config{LookupEvery: 10 * time.Millisecond})
	var it ledger.OutboxItem
	consumertest.Eventually(t, 10*time.Second, "the cancelled row settled, was re-sent, or the lookup ran a few rounds", func() bool {
		it, _ = e.st.Get(context.Background(), id)
		return e.dest.Requests(id) > 1 || it.Status == ledger.StatusCancelled && !it.PendingDelete || e.dest.LookupsOf(proof.ID) >= 5
	})
	if n := e.dest.Requests(id); n != 1 || it.Status == ledger.StatusQueued || it.Status == ledger.StatusSending || it.Status == ledger.StatusSent {
		t.Fatalf("a row cancelled in flight was sent %d times (want 1) and is %s (%q): the cancel was lost", n, it.Status, it.Error)
	}
}

// A row cancelled while its send was in flight is sent (issue 19, point 10
// meets lookups); its delete answers an unproved 404, so it
// goes to review with its external id (the item may be there). A lookup
// that then finds the item must not settle the row as plainly "sent": the
// cancel someone asked for would vanish from review without a trace.
func TestCancelledWhileSendingStaysCancelledInReviewAfterALookupFindsIt(t *testing.T) {
	t.Parallel()
	e := newOutboxEnv(t, false, 2*time.Second)
	proof := sentRows(t, e, "m0")[0]
	cancellingLookingSink(t, e, 2*time.Second)
	e.dest.FailDeletesWith(404) // a delete URL with no route
	_, id := cancelledInFlight(t, e, outbox.Config{LookupEvery: 10 * time.Millisecond})
	e.dest.Release()
	var it ledger.OutboxItem
	consumertest.Eventually(t, 10*time.Second, "the cancelled row settled or the lookup ran a few rounds", func() bool {
		it, _ = e.st.Get(context.Background(), id)
		return it.Status == ledger.StatusSent || e.dest.LookupsOf(proof.ID) >= 5
	})
	if it.Status == ledger.StatusSent {
		t.Fatalf("a row cancelled in flight whose delete was unconfirmed ended %s with error %q: the cancel vanished from review", it.Status, it.Error)
	}
}

// Issue 19, points 1-2 make "cannot say" permanent for rows whose stream
// instance is gone: a row the lookup cannot settle is looked
// up again every LookupEvery, and each round must not grow the row's error
// text: it is stored in the ledger and shown by outbox list.
func TestLookupLaterDoesNotGrowTheRowsError(t *testing.T) {
	t.Parallel()
	e := newOutboxEnv(t, false, 200*time.Millisecond)
	id := reviewRow(t, e, false)
	lookingSink(t, e, e.dest.LookupURL())
	e.dest.FailLookupsWith(503, id) // the destination cannot say for this row, for ever
	d := e.dispatcher(t, outbox.Config{LookupEvery: time.Millisecond})
	e.run(t, d)
	first, seen := "", 0
	consumertest.Eventually(t, 10*time.Second, "a first failed lookup", func() bool {
		it, _ := e.st.Get(context.Background(), id)
		first, seen = it.Error, e.dest.LookupsOf(id)
		return !it.NextAttemptAt.IsZero() // written back by a lookup
	})
	// A loaded host may see the first write-back a few rounds late: an
	// error that grew each round is still over twice as long 40 rounds on,
	// from any of the first 39.
	consumertest.Eventually(t, 30*time.Second, "40 more lookups", func() bool { return e.dest.LookupsOf(id) >= seen+40 })
	it, _ := e.st.Get(context.Background(), id)
	if len(it.Error) > 2*len(first) {
		t.Fatalf("after %d lookups the row's error is %d bytes (after the first: %d): it grows every round", e.dest.LookupsOf(id), len(it.Error), len(first))
	}
}

// slowDelete is the webhook sink whose delete reaches the destination only
// once the row's lease has run out and the dispatcher moved it on: a delete
// the destination carries out after the sender stopped waiting (a slow
// destination, or the lookups that now confirm a 404, outlasting the lease).
type slowDelete struct {
	*webhook.Sink
	st *ledger.Store
	id string
}

func (s slowDelete) Delete(ctx context.Context, ext string) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if it, err := s.st.Get(context.Background(), s.id); err == nil && it.Status != ledger.StatusCancelled {
			break
		}
		time.Sleep(5 * time.Millisecond) // polling the ledger, not synchronising by time
	}
	return s.Sink.Delete(context.Background(), ext) // carried out late, whatever the sender's deadline
}

// Issue 19, point 10 meets lease expiry: a row cancelled in flight is sent; the write-back's delete outlasts the lease, so the row is
// expired to review while the delete goes on and deletes the item. The
// lookup then finds it "never seen" and must not send the cancelled item
// again.
func TestCancelledRowDeletedAfterItsLeaseIsNotSentAgain(t *testing.T) {
	t.Parallel()
	e := newOutboxEnv(t, false, time.Second)
	sentRows(t, e, "m0") // the lookup's proof
	s := cancellingLookingSink(t, e, time.Second)
	e.dest.Hold()
	id := e.enqueue(t, "m1")
	d, err := outbox.New(e.st, outbox.Config{Sink: slowDelete{s, e.st, id}, PollInterval: 10 * time.Millisecond,
		LookupEvery: 10 * time.Millisecond, Lease: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e.run(t, d)
	cancelOnArrival(t, e, d, id)
	e.dest.Release()
	var it ledger.OutboxItem
	consumertest.Eventually(t, 15*time.Second, "the row settled, or was sent again", func() bool {
		it, _ = e.st.Get(context.Background(), id)
		return e.dest.Requests(id) > 1 || it.Status == ledger.StatusSent || it.Status == ledger.StatusCancelled && !it.PendingDelete
	})
	consumertest.Eventually(t, 15*time.Second, "the late delete done", func() bool { return len(e.dest.Items()) == 1 || e.dest.Requests(id) > 1 })
	it, _ = e.st.Get(context.Background(), id)
	if n := e.dest.Requests(id); n != 1 || it.Status == ledger.StatusSent {
		t.Fatalf("a cancelled row whose item was deleted after its lease ran out: sent %d times, row %s (%q), %d items at the destination", n, it.Status, it.Error, len(e.dest.Items()))
	}
}

// deadlineDelete is the webhook sink that records the deadline of each
// delete it is asked for.
type deadlineDelete struct {
	*webhook.Sink
	mu        sync.Mutex
	deadlines []time.Time
}

func (s *deadlineDelete) Delete(ctx context.Context, ext string) error {
	dl, _ := ctx.Deadline()
	s.mu.Lock()
	s.deadlines = append(s.deadlines, dl)
	s.mu.Unlock()
	return s.Sink.Delete(ctx, ext)
}

// The write-back of a row cancelled in flight (its delete, and the lookups
// that would confirm a "no such item") stays inside the row's claim lease
// (DESIGN.md rule 4): a slow send leaves less time for it, never time past
// the lease, when the row may be expired and settled by someone else.
func TestCancelWriteBackStaysInsideTheLease(t *testing.T) {
	t.Parallel()
	e := newOutboxEnv(t, false, 2*time.Second)
	s, err := webhook.New(webhook.Config{URL: e.dest.URL(), DeleteURL: e.dest.DeleteURL(), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	dd := &deadlineDelete{Sink: s}
	e.dest.SetDelay(1500 * time.Millisecond) // a slow destination: most of the sink timeout
	id := e.enqueue(t, "m1")
	d, err := outbox.New(e.st, outbox.Config{Sink: dd, PollInterval: 10 * time.Millisecond, Lease: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e.run(t, d)
	cancelOnArrival(t, e, d, id)
	var it ledger.OutboxItem
	consumertest.Eventually(t, 10*time.Second, "the cancelled row settled", func() bool {
		it, _ = e.st.Get(context.Background(), id)
		return it.Status == ledger.StatusReview || it.Status == ledger.StatusCancelled && !it.PendingDelete
	})
	dd.mu.Lock()
	defer dd.mu.Unlock()
	if len(dd.deadlines) == 0 {
		// On a loaded machine the send may return too late to leave the
		// write-back any time inside the bound: then no delete is tried,
		// and the row must wait in review with its cancel kept.
		if it.Status != ledger.StatusReview || !it.PendingDelete {
			t.Fatalf("row %s (pending delete %v, %q): no delete was asked for, and the cancel is not kept in review", it.Status, it.PendingDelete, it.Error)
		}
		t.Logf("the send left no time for a delete inside the bound (a loaded machine): the row waits in review with its cancel")
		return
	}
	for _, dl := range dd.deadlines { // the ledger keeps milliseconds
		if dl.IsZero() || dl.After(it.LeaseUntil.Add(time.Millisecond)) {
			t.Fatalf("a delete of the write-back had deadline %v, past the lease's end %v", dl, it.LeaseUntil)
		}
	}
}
