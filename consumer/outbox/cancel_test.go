package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/ledger"
)

// sentRows enqueues one row per message id and runs a dispatcher until all
// are sent; it returns the rows, in order.
func sentRows(t *testing.T, e *outboxEnv, msgIDs ...string) []ledger.OutboxItem {
	t.Helper()
	ids := make([]string, len(msgIDs))
	for i, m := range msgIDs {
		ids[i] = e.enqueue(t, m)
	}
	d := e.dispatcher(t, outbox.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	rows := make([]ledger.OutboxItem, len(ids))
	for i, id := range ids {
		rows[i] = e.waitStatus(t, id, ledger.StatusSent)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return rows
}

// cancelOnArrival waits for row id's send to reach the destination, which
// holds or delays it, and cancels the row while the send is in flight.
func cancelOnArrival(t *testing.T, e *outboxEnv, d *outbox.Dispatcher, id string) {
	t.Helper()
	for key := range e.dest.Arrived() {
		if key == id {
			break
		}
	}
	if out, err := d.Cancel(context.Background(), id); err != nil || out != outbox.CancelledInFlight {
		t.Fatalf("cancel = %q, %v; want %q", out, err, outbox.CancelledInFlight)
	}
}

// cancelledInFlight holds e's destination, enqueues row m1, runs a
// dispatcher with cfg and cancels the row once its send arrives. The send
// stays held until the test releases it.
func cancelledInFlight(t *testing.T, e *outboxEnv, cfg outbox.Config) (d *outbox.Dispatcher, id string) {
	t.Helper()
	e.dest.Hold()
	id = e.enqueue(t, "m1")
	d = e.dispatcher(t, cfg)
	e.run(t, d)
	cancelOnArrival(t, e, d, id)
	return d, id
}

// assertNotCancelled checks that a cancel said the item may still be at the
// destination and left the row as it was, still cancellable.
func assertNotCancelled(t *testing.T, e *outboxEnv, out outbox.CancelOutcome, err error, want ledger.OutboxItem) {
	t.Helper()
	if !errors.Is(err, outbox.ErrStillAtDestination) || !errors.Is(err, outbox.ErrDeleteUnconfirmed) || out != "" {
		t.Fatalf("cancel = %q, %v; want ErrStillAtDestination and ErrDeleteUnconfirmed", out, err)
	}
	it, err := e.st.Get(context.Background(), want.ID)
	if err != nil || it.Status != want.Status || it.PendingDelete || it.ExternalID != want.ExternalID {
		t.Fatalf("row %+v, %v; want it unchanged (%s, external id %s)", it, err, want.Status, want.ExternalID)
	}
}

// A receiver that serves only POST (the README's old DeleteURL template
// against a server with one route, POST /hook) answers 404 to every DELETE.
// That 404 proves nothing: the row is not cancelled, the error says the item
// may still be there, and the row can be cancelled later, once a delete
// works.
func TestCancelOfSentRowIsNotBelievedOnAnUnprovedNotFound(t *testing.T) {
	t.Parallel()
	e := newOutboxEnv(t, false, time.Second)
	row := sentRows(t, e, "m1")[0]
	e.dest.FailDeletesWith(http.StatusNotFound) // DELETE has no route

	d := e.dispatcher(t, outbox.Config{})
	out, err := d.Cancel(context.Background(), row.ID)
	assertNotCancelled(t, e, out, err, row)
	out, err = outbox.Cancel(context.Background(), e.st, e.sink, row.ID)
	assertNotCancelled(t, e, out, err, row)
	if n := len(e.dest.Items()); n != 1 || d.Counts().Deleted != 0 {
		t.Fatalf("destination holds %d items (want 1), %d counted deleted (want 0)", n, d.Counts().Deleted)
	}

	e.dest.FailDeletesWith(0) // a route that deletes
	out, err = d.Cancel(context.Background(), row.ID)
	if err != nil || out != outbox.CancelledDeleted || len(e.dest.Items()) != 0 || d.Counts().Deleted != 1 {
		t.Fatalf("cancel through a working delete = %q, %v; %d items left", out, err, len(e.dest.Items()))
	}
	if it, _ := e.st.Get(context.Background(), row.ID); it.Status != ledger.StatusCancelled {
		t.Fatalf("row is %s, want cancelled", it.Status)
	}
}

// A delete URL that has deleted an item (answered 2xx) is proved: its 404
// for an item it no longer holds (deleted earlier, by a cancel whose
// write-back was lost) is believed. The same 404 before the proof is not.
func TestNotFoundIsBelievedOnceTheDeleteURLDeleted(t *testing.T) {
	t.Parallel()
	e := newOutboxEnv(t, false, time.Second)
	rows := sentRows(t, e, "m1", "m2")
	gone, held := rows[0], rows[1]
	if err := e.sink.Delete(context.Background(), gone.ExternalID); err != nil { // deleted; the row never heard
		t.Fatal(err)
	}

	d := e.dispatcher(t, outbox.Config{})
	out, err := d.Cancel(context.Background(), gone.ID)
	assertNotCancelled(t, e, out, err, gone)

	if out, err := d.Cancel(context.Background(), held.ID); err != nil || out != outbox.CancelledDeleted {
		t.Fatalf("cancel of a held item = %q, %v", out, err)
	}
	out, err = d.Cancel(context.Background(), gone.ID)
	if err != nil || out != outbox.CancelledDeleted {
		t.Fatalf("cancel after the delete URL deleted an item = %q, %v; want %q", out, err, outbox.CancelledDeleted)
	}
	if it, _ := e.st.Get(context.Background(), gone.ID); it.Status != ledger.StatusCancelled || d.Counts().Deleted != 2 {
		t.Fatalf("row is %s with %d deleted, want cancelled and 2", it.Status, d.Counts().Deleted)
	}
}

// Without a proof from the delete URL, a 404 is confirmed by the sink's
// lookup by key, itself proved on another row the destination holds: it
// settles the cancel only when it says the item is not there.
func TestNotFoundIsConfirmedByAProvenLookup(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		goneFirst     bool // the item was deleted earlier, its row never heard
		wrongLookup   bool // the lookup URL answers 404 for every key
		wantCancelled bool
		wantErr       error
	}{
		{name: "gone, and the lookup agrees", goneFirst: true, wantCancelled: true},
		{name: "still there: the lookup finds it", wantErr: outbox.ErrStillAtDestination},
		{name: "gone, but the lookup finds nothing at all", goneFirst: true, wrongLookup: true, wantErr: outbox.ErrDeleteUnconfirmed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newOutboxEnv(t, false, time.Second)
			rows := sentRows(t, e, "m1", "m2")
			row := rows[1] // the newest sent row: the lookup is proved on the other
			if tt.goneFirst {
				if err := e.sink.Delete(context.Background(), row.ExternalID); err != nil {
					t.Fatal(err)
				}
			}
			e.dest.FailDeletesWith(http.StatusNotFound)
			lookup := e.dest.LookupURL()
			if tt.wrongLookup {
				lookup = e.dest.URL() + "/wrong/{key}"
			}
			s, err := webhook.New(webhook.Config{URL: e.dest.URL(), DeleteURL: e.dest.DeleteURL(), LookupURL: lookup, Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			out, err := outbox.Cancel(context.Background(), e.st, s, row.ID)
			it, _ := e.st.Get(context.Background(), row.ID)
			if tt.wantCancelled {
				if err != nil || out != outbox.CancelledDeleted || it.Status != ledger.StatusCancelled {
					t.Fatalf("cancel = %q, %v; row %s; want cancelled", out, err, it.Status)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) || !errors.Is(err, outbox.ErrStillAtDestination) || it.Status != ledger.StatusSent {
				t.Fatalf("cancel = %q, %v; row %s; want %v, row sent", out, err, it.Status, tt.wantErr)
			}
		})
	}
}

// The dispatcher's write-back finds its row cancelled meanwhile and deletes
// the sent item; a receiver without a DELETE route answers 404. That is not
// a delete: the row goes to review with its external id, not to cancelled,
// and nothing is counted deleted.
func TestCancelWhileSendingNotFoundIsNotDeleted(t *testing.T) {
	t.Parallel()
	e := newOutboxEnv(t, false, 5*time.Second)
	e.dest.FailDeletesWith(http.StatusNotFound)
	d, id := cancelledInFlight(t, e, outbox.Config{})
	e.dest.Release()
	var it ledger.OutboxItem
	consumertest.Eventually(t, 10*time.Second, "the cancelled send settled", func() bool {
		it, _ = e.st.Get(context.Background(), id)
		return it.Status == ledger.StatusReview || it.Status == ledger.StatusCancelled && !it.PendingDelete
	})
	if it.Status != ledger.StatusReview || it.ExternalID == "" || len(e.dest.Items()) != 1 || d.Counts().Deleted != 0 {
		t.Fatalf("row %+v, destination %d items, %d counted deleted; want review with its id, 1 item, 0 deleted",
			it, len(e.dest.Items()), d.Counts().Deleted)
	}
}

// failingSettle is a ledger whose SettleCancel fails, as the write after a
// delete fails for a run fenced by its partition's new owner.
type failingSettle struct{ *ledger.Store }

func (f failingSettle) Transition(ctx context.Context, id string, c ledger.Change, p ledger.Params) (ledger.OutboxItem, error) {
	if c == ledger.SettleCancel || c == ledger.CancelDeleted { // the write after the delete
		return ledger.OutboxItem{}, errors.New("not the changelog's owner")
	}
	return f.Store.Transition(ctx, id, c, p)
}

// A cancel that deleted a sent item and then could not write so (a
// nemesis schedule: the owner's changelog publish timed out) leaves the
// row in review with its cancel pending, recorded once, never sent with no
// item at the destination; a person's "failed" then finishes it.
func TestACancelThatDeletedAndCouldNotWriteLeavesTheRowPending(t *testing.T) {
	t.Parallel()
	e := newOutboxEnv(t, false, time.Second)
	row := sentRows(t, e, "m1")[0]
	ctx := context.Background()
	_, err := outbox.CancelAs(ctx, failingSettle{e.st}, e.sink, row.ID, ledger.Params{Audit: &ledger.Audit{Who: "ops"}})
	if err == nil {
		t.Fatal("cancel: no error, want the write's")
	}
	if n := len(e.dest.Items()); n != 0 {
		t.Fatalf("the destination holds %d items, want the one deleted", n)
	}
	it, _ := e.st.Get(ctx, row.ID)
	if it.Status != ledger.StatusReview || !it.PendingDelete {
		t.Fatalf("row %s (cancel pending %v), want review with its cancel pending", it.Status, it.PendingDelete)
	}
	if n := auditCount(t, e, row.ID); n != 1 {
		t.Fatalf("%d records of the cancel, want 1", n)
	}
	if it, err := e.st.Resolve(ctx, row.ID, ledger.StatusFailed, ""); err != nil || it.Status != ledger.StatusCancelled {
		t.Fatalf("resolve as failed: %s, %v; want cancelled", it.Status, err)
	}
}

// A cancel whose delete provably did not delete leaves the row as it was
// and no record of an action.
func TestACancelWhoseDeleteFailedLeavesNoRecord(t *testing.T) {
	t.Parallel()
	e := newOutboxEnv(t, false, time.Second)
	row := sentRows(t, e, "m1")[0]
	e.dest.FailDeletesWith(http.StatusForbidden)
	ctx := context.Background()
	if _, err := outbox.CancelAs(ctx, e.st, e.sink, row.ID, ledger.Params{Audit: &ledger.Audit{Who: "ops"}}); !errors.Is(err, outbox.ErrStillAtDestination) {
		t.Fatalf("cancel: %v, want ErrStillAtDestination", err)
	}
	it, _ := e.st.Get(ctx, row.ID)
	if it.Status != ledger.StatusSent || it.PendingDelete || it.Error != "" {
		t.Fatalf("row %s (cancel pending %v, error %q), want it sent as it was", it.Status, it.PendingDelete, it.Error)
	}
	if n := auditCount(t, e, row.ID); n != 0 {
		t.Fatalf("%d records of a cancel that did nothing, want 0", n)
	}
}

// A cancel whose delete may have deleted all the same (a 5xx, a timeout)
// leaves the row in review with its cancel pending and its record, not
// sent: the item may be gone. Before: put back as sent.
func TestACancelWhoseDeleteMayHaveDeletedStaysPending(t *testing.T) {
	t.Parallel()
	e := newOutboxEnv(t, false, time.Second)
	row := sentRows(t, e, "m1")[0]
	e.dest.FailDeletesWith(http.StatusInternalServerError)
	ctx := context.Background()
	_, err := outbox.CancelAs(ctx, e.st, e.sink, row.ID, ledger.Params{Audit: &ledger.Audit{Who: "ops"}})
	if !errors.Is(err, outbox.ErrDeleteOutcomeUnknown) || !errors.Is(err, outbox.ErrStillAtDestination) {
		t.Fatalf("cancel: %v, want ErrDeleteOutcomeUnknown and ErrStillAtDestination", err)
	}
	it, _ := e.st.Get(ctx, row.ID)
	if it.Status != ledger.StatusReview || !it.PendingDelete {
		t.Fatalf("row %s (cancel pending %v), want review with its cancel pending", it.Status, it.PendingDelete)
	}
	if n := auditCount(t, e, row.ID); n != 1 {
		t.Fatalf("%d records of the cancel, want 1", n)
	}
}

func auditCount(t *testing.T, e *outboxEnv, id string) int {
	t.Helper()
	db, err := sql.Open("sqlite", e.path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM jetledger_audit WHERE target = ?`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
