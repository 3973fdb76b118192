package admin_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/admin/admintest"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Cancel through the API, against a real HTTP destination: a row sent is
// deleted there first, then cancelled; a queued row is cancelled with
// nothing sent; a row whose delete the destination refuses stays as it was
// and is reported skipped, saying it is still there; each cancel is
// recorded with who did it. A sent row changed since it was seen is
// skipped before anything is deleted.
func TestCancelThroughTheAPIDeletesAtTheDestinationFirst(t *testing.T) {
	t.Parallel()
	nc, st := serverAndLedger(t, ledger.Config{})
	ctx := context.Background()
	dest := webhooktest.NewDestination(t, false)
	sink, err := webhook.New(webhook.Config{URL: dest.URL(), DeleteURL: dest.DeleteURL()})
	if err != nil {
		t.Fatal(err)
	}
	ids := admintest.Enqueue(t, st, "sent-1", "sent-2", "queued")
	for _, id := range ids[:2] {
		it, err := st.Transition(ctx, id, ledger.Claim, ledger.Params{Worker: "w", Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		ext, err := sink.Send(ctx, it)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Transition(ctx, id, ledger.Sent, ledger.Params{Worker: "w", ExternalID: ext}); err != nil {
			t.Fatal(err)
		}
	}
	addr := admin.Address{Stream: "S", Durable: "d"}
	s, err := admin.Serve(admin.Config{Conn: nc, Store: st, Address: addr, Canceller: admintest.SinkCanceller{Store: st, Sink: sink}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	act := func(q admin.Act) admin.Acted {
		t.Helper()
		var out admin.Acted
		if err := callAt(nc, addr, "outbox.cancel", q, &out); err != nil {
			t.Fatalf("outbox.cancel %+v: %v", q, err)
		}
		return out
	}
	dry := act(admin.Act{Who: "ops", IDs: ids, DryRun: true})
	dest.FailDeletesWith(http.StatusForbidden)
	refused := act(admin.Act{Who: "ops", IDs: ids[1:2], Seen: dry.Seen})
	if len(refused.Done) != 0 || len(refused.Skipped) != 1 || refused.Skipped[0].Changed {
		t.Fatalf("a cancel whose delete the destination refused: %+v", refused)
	}
	if it, _ := st.Get(ctx, ids[1]); it.Status != ledger.StatusSent {
		t.Fatalf("the row whose delete failed is %s, want sent", it.Status)
	}
	dest.FailDeletesWith(0)
	done := act(admin.Act{Who: "ops@example", Note: "customer withdrew", IDs: ids, Seen: dry.Seen})
	if len(done.Done) != 3 || len(done.Skipped) != 0 {
		t.Fatalf("the cancel: %+v", done)
	}
	if n := len(dest.Items()); n != 0 {
		t.Fatalf("the destination still holds %d items after their rows were cancelled", n)
	}
	for _, id := range ids {
		it, err := st.Get(ctx, id)
		if err != nil || it.Status != ledger.StatusCancelled {
			t.Fatalf("%s: %v %s, want cancelled", id, err, it.Status)
		}
		if rec, err := st.AuditOf(ctx, id); err != nil || len(rec) != 1 || rec[0].Who != "ops@example" || rec[0].Note != "customer withdrew" {
			t.Fatalf("the record of %s: %v %+v", id, err, rec)
		}
	}
}

// A sent row changed after the caller saw it is skipped, and the
// destination keeps its item: nothing is deleted for a row the person did
// not see as it is.
func TestCancelOfARowChangedSinceSeenDeletesNothing(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_800_000_000_000)
	nc, st := serverAndLedger(t, ledger.Config{Now: func() time.Time { return now }})
	ctx := context.Background()
	dest := webhooktest.NewDestination(t, false)
	sink, err := webhook.New(webhook.Config{URL: dest.URL(), DeleteURL: dest.DeleteURL()})
	if err != nil {
		t.Fatal(err)
	}
	ids := admintest.Enqueue(t, st, "x")
	// Sent, but its answer lost: in review; seen so; then resolved as sent
	// by someone else, with the destination's id.
	it, err := st.Transition(ctx, ids[0], ledger.Claim, ledger.Params{Worker: "w", Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ext, err := sink.Send(ctx, it)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Transition(ctx, ids[0], ledger.Review, ledger.Params{Worker: "w", Reason: "timed out"}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Second)
	seen := now
	now = now.Add(time.Second)
	if _, err := st.Transition(ctx, ids[0], ledger.ResolveSent, ledger.Params{ExternalID: ext}); err != nil {
		t.Fatal(err)
	}
	addr := admin.Address{Stream: "S", Durable: "d"}
	s, err := admin.Serve(admin.Config{Conn: nc, Store: st, Address: addr, Canceller: admintest.SinkCanceller{Store: st, Sink: sink}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	var out admin.Acted
	if err := callAt(nc, addr, "outbox.cancel", admin.Act{Who: "ops", IDs: ids, Seen: seen}, &out); err != nil ||
		len(out.Skipped) != 1 || !out.Skipped[0].Changed {
		t.Fatalf("a cancel of a row changed since seen: %v %+v", err, out)
	}
	if n := len(dest.Items()); n != 1 {
		t.Fatalf("the destination holds %d items after a skipped cancel, want 1 (nothing deleted)", n)
	}
}

// A dead letter requeued through the API: refused (409, kept) while the
// stream's duplicate window still holds its id; once the window has passed
// the copy is in the stream with its original id and the dead letter is
// gone, recorded as a requeue by who asked.
func TestADeadLetterIsRequeuedThroughTheAPI(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	nc, js := consumertest.Connect(t, srv)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"ev.>"}, Duplicates: time.Second}); err != nil {
		t.Fatal(err)
	}
	ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: "ev.a", Data: []byte(`{"n":1}`), Header: nats.Header{jetstream.MsgIDHeader: []string{"m-1"}}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.RecordDeadLetters(ctx, []ledger.DeadLetter{{MessageID: "m-1", Stream: "S", Sequence: ack.Sequence, Subject: "ev.a",
		Headers: map[string][]string{jetstream.MsgIDHeader: {"m-1"}}, Payload: []byte(`{"n":1}`), Reason: "handler failed", Deliveries: 5}}); err != nil {
		t.Fatal(err)
	}
	dls, err := st.DeadLetters(ctx, 0)
	if err != nil || len(dls) != 1 {
		t.Fatal(err, dls)
	}
	addr := admin.Address{Stream: "S", Durable: "d"}
	s, err := admin.Serve(admin.Config{Conn: nc, Store: st, JetStream: js, Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	q := admin.ByID{ID: dls[0].ID, Who: "ops", Note: "fixed the handler"}
	var e *admin.Error
	var out admin.Requeued
	err = callAt(nc, addr, "dlq.requeue", q, &out)
	if err == nil {
		t.Fatal("a requeue inside the duplicate window was taken")
	}
	if !errors.As(err, &e) || e.Code != admin.CodeConflict {
		t.Fatalf("a requeue inside the duplicate window: %v, want %s", err, admin.CodeConflict)
	}
	if _, err := st.DeadLetter(ctx, q.ID); err != nil {
		t.Fatalf("the dead letter refused is gone: %v", err)
	}
	consumertest.Eventually(t, time.Minute, "the requeue taken once the window has passed", func() bool {
		return callAt(nc, addr, "dlq.requeue", q, &out) == nil
	})
	if out.Seq <= ack.Sequence || out.MessageID != "m-1" {
		t.Fatalf("the requeue's answer: %+v", out)
	}
	str, err := js.Stream(ctx, "S")
	if err != nil {
		t.Fatal(err)
	}
	m, err := str.GetMsg(ctx, out.Seq)
	if err != nil || m.Header.Get(jetstream.MsgIDHeader) != "m-1" {
		t.Fatalf("the copy at seq %d: %v", out.Seq, err)
	}
	if _, err := st.DeadLetter(ctx, q.ID); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("the dead letter after its requeue: %v, want gone", err)
	}
	if rec, err := st.AuditOf(ctx, fmt.Sprintf("dead letter %d", q.ID)); err != nil || len(rec) != 1 || rec[0].Action != "requeue" || rec[0].Who != "ops" {
		t.Fatalf("the record of the requeue: %v %+v", err, rec)
	}
}

// callAt asks endpoint at addr, within 10s.
func callAt(nc *nats.Conn, addr admin.Address, endpoint string, req, resp any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return admin.Call(ctx, nc, addr, endpoint, req, resp)
}

// conflicts.show gives both messages that share an id, decoded, read from
// their streams; once a stream no longer holds one, it says so. The
// consumers the ledger served are listed, and one no longer served is
// forgotten (recorded); the one the run serves is refused.
func TestAConflictIsShownWithBothMessages(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	nc, js := consumertest.Connect(t, srv)
	ctx := context.Background()
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	noop := func(context.Context, *ledger.Tx, ledger.Delivery) error { return nil }
	for _, m := range []struct{ stream, subject, data string }{{"A", "a.x", `{"amount":5}`}, {"B", "b.x", "amount 6"}} {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: m.stream, Subjects: []string{m.subject}}); err != nil {
			t.Fatal(err)
		}
		ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: m.subject, Data: []byte(m.data), Header: nats.Header{jetstream.MsgIDHeader: []string{"same"}}})
		if err != nil {
			t.Fatal(err)
		}
		d := ledger.Delivery{MessageID: "same", Stream: m.stream, Sequence: ack.Sequence, Subject: m.subject, Data: []byte(m.data)}
		if _, err := st.ApplyBatch(ctx, []ledger.Delivery{d}, noop, ledger.Budget{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, durable := range []string{"d", "old"} {
		if err := st.RememberConsumer(ctx, "A", durable, ""); err != nil {
			t.Fatal(err)
		}
	}
	addr := admin.Address{Stream: "A", Durable: "d"}
	s, err := admin.Serve(admin.Config{Conn: nc, Store: st, JetStream: js, Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	var cs admin.Conflicts
	if err := callAt(nc, addr, "conflicts.list", nil, &cs); err != nil || len(cs.Conflicts) != 1 {
		t.Fatalf("conflicts.list: %v %+v", err, cs)
	}
	var shown admin.ConflictShown
	if err := callAt(nc, addr, "conflicts.show", admin.ByID{ID: cs.Conflicts[0].ID}, &shown); err != nil ||
		string(shown.Applied.Payload) != `{"amount":5}` || shown.Applied.Stream != "A" || shown.Refused.PayloadText != "amount 6" || shown.Refused.Stream != "B" {
		t.Fatalf("conflicts.show: %v %+v", err, shown)
	}
	if err := js.DeleteStream(ctx, "B"); err != nil {
		t.Fatal(err)
	}
	shown = admin.ConflictShown{}
	if err := callAt(nc, addr, "conflicts.show", admin.ByID{ID: cs.Conflicts[0].ID}, &shown); err != nil ||
		shown.Refused.Missing == "" || shown.Refused.PayloadText != "" || string(shown.Applied.Payload) != `{"amount":5}` {
		t.Fatalf("conflicts.show with one stream gone: %v %+v", err, shown)
	}
	var e *admin.Error
	if err := callAt(nc, addr, "conflicts.show", admin.ByID{ID: 99}, &shown); !errors.As(err, &e) || e.Code != admin.CodeNotFound {
		t.Fatalf("an unknown conflict: %v, want %s", err, admin.CodeNotFound)
	}
	var consumers admin.Consumers
	if err := callAt(nc, addr, "consumers.list", nil, &consumers); err != nil || len(consumers.Consumers) != 2 {
		t.Fatalf("consumers.list: %v %+v", err, consumers)
	}
	if err := callAt(nc, addr, "consumers.forget", admin.Forget{Stream: "A", Durable: "d", Who: "ops"}, nil); !errors.As(err, &e) || e.Code != admin.CodeConflict {
		t.Fatalf("forgetting the run's own consumer: %v, want %s", err, admin.CodeConflict)
	}
	if err := callAt(nc, addr, "consumers.forget", admin.Forget{Stream: "A", Durable: "old", Who: "ops", Note: "moved to B"}, nil); err != nil {
		t.Fatalf("consumers.forget: %v", err)
	}
	if err := callAt(nc, addr, "consumers.forget", admin.Forget{Stream: "A", Durable: "old", Who: "ops"}, nil); !errors.As(err, &e) || e.Code != admin.CodeNotFound {
		t.Fatalf("forgetting it again: %v, want %s", err, admin.CodeNotFound)
	}
	if got, err := st.Consumers(ctx); err != nil || len(got) != 1 || got[0].Durable != "d" {
		t.Fatalf("the consumers after the forget: %v %+v", err, got)
	}
	if rec, err := st.AuditOf(ctx, "consumer A/old"); err != nil || len(rec) != 1 || rec[0].Action != "forget" {
		t.Fatalf("the record of the forget: %v %+v", err, rec)
	}
}

// Every read a viewer may ask is an endpoint, and none of them acts.
func TestReadsAreEndpointsThatTakeNoWho(t *testing.T) {
	t.Parallel()
	served := map[string]bool{}
	for _, e := range admin.Endpoints {
		served[e] = true
	}
	for _, r := range admin.Reads {
		if !served[r] {
			t.Errorf("read %s is not an endpoint", r)
		}
	}
	nc, st := serverAndLedger(t, ledger.Config{})
	addr := admin.Address{Stream: "S", Durable: "d"}
	s, err := admin.Serve(admin.Config{Conn: nc, Store: st, Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	reads := map[string]bool{}
	for _, r := range admin.Reads {
		reads[r] = true
	}
	// An action asked with no who is refused for it; a read never is.
	for _, e := range admin.Endpoints {
		err := callAt(nc, addr, e, map[string]any{"id": 1, "ids": []string{"x"}, "stream": "S", "durable": "old", "dry_run": true}, nil)
		noWho := err != nil && strings.Contains(err.Error(), "no who")
		if noWho == reads[e] {
			t.Errorf("%s: read %v, but asked with no who: %v", e, reads[e], err)
		}
	}
}

// A request whose reply subject is no inbox is not taken: its answer would
// be published where the client names, with the run's rights (into a
// stream here), and its action not done.
func TestARequestWhoseReplyIsNoInboxIsNotTaken(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	nc, js := consumertest.Connect(t, srv)
	ctx := context.Background()
	s0, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.>"}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.RecordDeadLetters(ctx, []ledger.DeadLetter{{MessageID: "d", Stream: "EV", Sequence: 1, Subject: "ev.1", Reason: "bad", Deliveries: 5}}); err != nil {
		t.Fatal(err)
	}
	addr := admin.Address{Stream: "EV", Durable: "d"}
	s, err := admin.Serve(admin.Config{Conn: nc, Store: st, Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if err := nc.PublishMsg(&nats.Msg{Subject: addr.Subject("dlq.discard"), Reply: "ev.x", Data: []byte(`{"id":1,"who":"x"}`)}); err != nil {
		t.Fatal(err)
	}
	// The same endpoint's next request, taken after it in order: the
	// dead letter is still there to discard.
	if err := callAt(nc, addr, "dlq.discard", admin.ByID{ID: 1, Who: "ops"}, nil); err != nil {
		t.Fatalf("a discard after one with the reply ev.x: %v, want it done (the first not taken)", err)
	}
	if info, err := s0.Info(ctx); err != nil || info.State.Msgs != 0 {
		t.Fatalf("stream EV holds %d messages after a request with the reply ev.x (%v), want 0", info.State.Msgs, err)
	}
}

// A row in review with its cancel pending (cancelled while its send was in
// flight, or a cancel that deleted the item and could not write after)
// resolved as failed through the API: the cancel is done, recorded.
func TestAPendingCancelResolvedAsFailedThroughTheAPIIsCancelled(t *testing.T) {
	t.Parallel()
	nc, st := serverAndLedger(t, ledger.Config{})
	ctx := context.Background()
	ids := admintest.Enqueue(t, st, "p")
	if _, err := st.Transition(ctx, ids[0], ledger.Claim, ledger.Params{Worker: "w", Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []ledger.Change{ledger.CancelInFlight, ledger.Review} {
		if _, err := st.Transition(ctx, ids[0], c, ledger.Params{Worker: "w", Reason: "timed out"}); err != nil {
			t.Fatal(err)
		}
	}
	addr := admin.Address{Stream: "S", Durable: "d"}
	s, err := admin.Serve(admin.Config{Conn: nc, Store: st, Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	var dry, done admin.Acted
	if err := callAt(nc, addr, "outbox.resolve", admin.Act{Who: "ops", IDs: ids, As: ledger.StatusFailed, DryRun: true}, &dry); err != nil {
		t.Fatal(err)
	}
	if err := callAt(nc, addr, "outbox.resolve", admin.Act{Who: "ops", IDs: ids, As: ledger.StatusFailed, Seen: dry.Seen}, &done); err != nil || len(done.Done) != 1 {
		t.Fatalf("resolve as failed: %+v, %v", done, err)
	}
	if it, _ := st.Get(ctx, ids[0]); it.Status != ledger.StatusCancelled || it.PendingDelete {
		t.Fatalf("row %s (cancel pending %v), want cancelled", it.Status, it.PendingDelete)
	}
	if rec, err := st.AuditOf(ctx, ids[0]); err != nil || len(rec) != 1 || rec[0].Who != "ops" {
		t.Fatalf("the record: %v %+v", err, rec)
	}
}
