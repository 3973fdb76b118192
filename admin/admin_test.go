package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/admin/admintest"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// The API of a run, on a real server: found by micro's discovery; status
// says what needs a person; outbox.list lists without payloads and
// outbox.show decodes the payload; a bad request and an unknown id are
// refused with their codes; an address nobody serves is ErrNoRun, naming
// the subject.
func TestTheAdminAPIAnswersReads(t *testing.T) {
	t.Parallel()
	nc, st := serverAndLedger(t, ledger.Config{})
	ids := admintest.Enqueue(t, st, `{"amount":5}`, "plain text")
	ctx := context.Background()
	if _, err := st.Transition(ctx, ids[0], ledger.Claim, ledger.Params{Worker: "w", Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Transition(ctx, ids[0], ledger.Review, ledger.Params{Worker: "w", Reason: "timed out"}); err != nil {
		t.Fatal(err)
	}
	addr := admin.Address{Stream: "PAY", Durable: "pay-p0"}
	s, err := admin.Serve(admin.Config{Conn: nc, Store: st, Address: addr, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()

	msg, err := nc.Request("$SRV.INFO."+admin.ServiceName, nil, 5*time.Second)
	if err != nil {
		t.Fatalf("micro discovery: %v", err)
	}
	var info micro.Info
	if err := json.Unmarshal(msg.Data, &info); err != nil || info.Metadata["durable"] != "pay-p0" || len(info.Endpoints) != len(admin.Endpoints) {
		t.Fatalf("the service's info: %v %+v", err, info)
	}
	served := map[string]bool{}
	for _, e := range info.Endpoints {
		served[e.Subject] = true
	}
	for _, name := range admin.Endpoints {
		if !served[addr.Subject(name)] {
			t.Errorf("endpoint %s not served at %s", name, addr.Subject(name))
		}
	}

	call := func(endpoint string, req, resp any) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return admin.Call(ctx, nc, addr, endpoint, req, resp)
	}
	var status admin.Status
	if err := call("status", nil, &status); err != nil || len(status.Attention) != 1 || status.Attention[0].Kind != ledger.AttentionReview ||
		status.Outbox[ledger.StatusReview] != 1 || status.Outbox[ledger.StatusQueued] != 1 {
		t.Fatalf("status: %v %+v", err, status)
	}
	var rows admin.Rows
	if err := call("outbox.list", admin.OutboxList{Status: ledger.StatusReview}, &rows); err != nil || len(rows.Rows) != 1 ||
		rows.Rows[0].ID != ids[0] || rows.Rows[0].Payload != nil || rows.Rows[0].Error == "" {
		t.Fatalf("outbox.list of review: %v %+v", err, rows)
	}
	var row admin.Row
	if err := call("outbox.show", admin.OutboxShow{ID: ids[0]}, &row); err != nil || string(row.Payload) != `{"amount":5}` {
		t.Fatalf("outbox.show of a JSON payload: %v %+v", err, row)
	}
	if err := call("outbox.show", admin.OutboxShow{ID: ids[1]}, &row); err != nil || row.PayloadText != "plain text" {
		t.Fatalf("outbox.show of a text payload: %v %+v", err, row)
	}
	var e *admin.Error
	if err := call("outbox.show", admin.OutboxShow{ID: "nope"}, &row); !errors.As(err, &e) || e.Code != admin.CodeNotFound {
		t.Fatalf("an unknown id: %v, want code %s", err, admin.CodeNotFound)
	}
	if err := call("outbox.list", admin.OutboxList{Status: "bogus"}, &rows); !errors.As(err, &e) || e.Code != admin.CodeBadRequest {
		t.Fatalf("a bad status: %v, want code %s", err, admin.CodeBadRequest)
	}
	if err := admin.Call(ctx, nc, admin.Address{Stream: "PAY", Durable: "pay-p9"}, "status", nil, &status); !errors.Is(err, admin.ErrNoRun) {
		t.Fatalf("a partition nobody serves: %v, want ErrNoRun", err)
	}
}

// toReview claims each row and sends it to review, as an ambiguous send.
func toReview(t *testing.T, st *ledger.Store, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if _, err := st.Transition(context.Background(), id, ledger.Claim, ledger.Params{Worker: "w", Lease: time.Minute}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Transition(context.Background(), id, ledger.Review, ledger.Params{Worker: "w", Reason: "timed out"}); err != nil {
			t.Fatal(err)
		}
	}
}

// A bulk action: the dry run counts the review rows and says when it saw
// them; one of them is settled meanwhile (by the worker's own lookup); the
// action on the rows seen settles the others, skips that one and says why,
// and records each row's change with who did it, which show returns.
// Bad requests change nothing.
func TestABulkActionSkipsRowsThatChangedSinceSeen(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.UnixMilli(1_800_000_000_000)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	tick := func() { mu.Lock(); now = now.Add(time.Second); mu.Unlock() }
	nc, st := serverAndLedger(t, ledger.Config{Now: clock})
	ids := admintest.Enqueue(t, st, "a", "b", "c", "d")
	toReview(t, st, ids[:3]...)
	tick()
	addr := admin.Address{Stream: "PAY", Durable: "pay"}
	s, err := admin.Serve(admin.Config{Conn: nc, Store: st, Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	ctx := context.Background()
	call := func(endpoint string, req admin.Act) (admin.Acted, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		var out admin.Acted
		err := admin.Call(ctx, nc, addr, endpoint, req, &out)
		return out, err
	}
	var e *admin.Error
	for _, bad := range []admin.Act{{Status: ledger.StatusReview, DryRun: true}, {Who: "ops", DryRun: true},
		{Who: "ops", Status: ledger.StatusReview}, {Who: "ops", Status: ledger.StatusReview, As: "maybe", DryRun: true}} {
		if _, err := call("outbox.resolve", bad); !errors.As(err, &e) || e.Code != admin.CodeBadRequest {
			t.Fatalf("%+v: %v, want a bad request", bad, err)
		}
	}
	dry, err := call("outbox.resolve", admin.Act{Who: "ops", Status: ledger.StatusReview, As: ledger.StatusFailed, DryRun: true})
	if err != nil || dry.Matched != 3 || len(dry.IDs) != 3 || len(dry.Done) != 0 {
		t.Fatalf("the dry run: %v %+v", err, dry)
	}
	if it, _ := st.Get(ctx, ids[0]); it.Status != ledger.StatusReview {
		t.Fatalf("the dry run changed %s to %s", ids[0], it.Status)
	}
	// Meanwhile the worker's lookup finds ids[1] at the destination.
	tick()
	if _, err := st.Transition(ctx, ids[1], ledger.Found, ledger.Params{ExternalID: "x1"}); err != nil {
		t.Fatal(err)
	}
	done, err := call("outbox.resolve", admin.Act{Who: "ops@example", Note: "checked the provider's dashboard", IDs: dry.IDs, Seen: dry.Seen, As: ledger.StatusFailed})
	if err != nil || len(done.Done) != 2 || len(done.Skipped) != 1 || done.Skipped[0].ID != ids[1] || !done.Skipped[0].Changed {
		t.Fatalf("the action: %v %+v", err, done)
	}
	if it, _ := st.Get(ctx, ids[1]); it.Status != ledger.StatusSent {
		t.Fatalf("the row settled meanwhile is %s, want sent (as its lookup left it)", it.Status)
	}
	var row admin.Row
	if err := admin.Call(ctx, nc, addr, "outbox.show", admin.OutboxShow{ID: ids[0]}, &row); err != nil || row.Status != ledger.StatusFailed ||
		!strings.HasPrefix(row.Error, "resolved as not sent by a person") || len(row.History) != 1 || row.History[0].Who != "ops@example" || row.History[0].Note == "" || row.History[0].From == "" {
		t.Fatalf("the row acted on: %v %+v", err, row)
	}
	tick()
	retried, err := call("outbox.retry", admin.Act{Who: "ops@example", IDs: []string{ids[0], ids[3]}, Seen: clock()})
	if err != nil || len(retried.Done) != 1 || len(retried.Skipped) != 1 || retried.Skipped[0].ID != ids[3] {
		t.Fatalf("retry of a failed row and a queued one: %v %+v", err, retried)
	}
}

// Dead letters and conflicts through the API: listed (a dead letter's
// payload only in show), discarded and acknowledged with who and why,
// each recorded; settling twice is refused with 409, an unknown id 404.
func TestDeadLettersAndConflictsAreSettledThroughTheAPI(t *testing.T) {
	t.Parallel()
	nc, st := serverAndLedger(t, ledger.Config{})
	ctx := context.Background()
	if err := st.RecordDeadLetters(ctx, []ledger.DeadLetter{{MessageID: "d", Stream: "S", Sequence: 9, Subject: "ev", Payload: []byte("p"), Reason: "bad", Deliveries: 5}}); err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context, *ledger.Tx, ledger.Delivery) error { return nil }
	for _, d := range []ledger.Delivery{{MessageID: "c", Stream: "S", Sequence: 10, Subject: "ev", Data: []byte("a")}, {MessageID: "c", Stream: "S", Sequence: 11, Subject: "ev", Data: []byte("b")}} {
		if _, err := st.ApplyBatch(ctx, []ledger.Delivery{d}, noop, ledger.Budget{}); err != nil {
			t.Fatal(err)
		}
	}
	addr := admin.Address{Stream: "S", Durable: "d"}
	s, err := admin.Serve(admin.Config{Conn: nc, Store: st, Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	call := func(endpoint string, req, resp any) error {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return admin.Call(ctx, nc, addr, endpoint, req, resp)
	}
	var dls admin.DeadLetters
	if err := call("dlq.list", nil, &dls); err != nil || len(dls.DeadLetters) != 1 || dls.DeadLetters[0].Payload != nil {
		t.Fatalf("dlq.list: %v %+v", err, dls)
	}
	id := dls.DeadLetters[0].ID
	var dl ledger.DeadLetter
	if err := call("dlq.show", admin.ByID{ID: id}, &dl); err != nil || string(dl.Payload) != "p" {
		t.Fatalf("dlq.show: %v %+v", err, dl)
	}
	var e *admin.Error
	if err := call("dlq.discard", admin.ByID{ID: id}, nil); !errors.As(err, &e) || e.Code != admin.CodeBadRequest {
		t.Fatalf("a discard without who: %v", err)
	}
	if err := call("dlq.discard", admin.ByID{ID: id, Who: "ops", Note: "a test message"}, nil); err != nil {
		t.Fatalf("dlq.discard: %v", err)
	}
	if err := call("dlq.discard", admin.ByID{ID: id, Who: "ops"}, nil); !errors.As(err, &e) || e.Code != admin.CodeNotFound {
		t.Fatalf("a second discard: %v, want %s", err, admin.CodeNotFound)
	}
	var cs admin.Conflicts
	if err := call("conflicts.list", nil, &cs); err != nil || len(cs.Conflicts) != 1 {
		t.Fatalf("conflicts.list: %v %+v", err, cs)
	}
	ack := admin.ByID{ID: cs.Conflicts[0].ID, Who: "ops", Note: "the sender reused the id"}
	if err := call("conflicts.ack", ack, nil); err != nil {
		t.Fatalf("conflicts.ack: %v", err)
	}
	if err := call("conflicts.ack", ack, nil); !errors.As(err, &e) || e.Code != admin.CodeConflict {
		t.Fatalf("a second ack: %v, want %s", err, admin.CodeConflict)
	}
	var status admin.Status
	if err := call("status", nil, &status); err != nil || len(status.Attention) != 0 {
		t.Fatalf("status after both settled: %v %+v", err, status)
	}
	for _, target := range []string{fmt.Sprintf("dead letter %d", id), fmt.Sprintf("conflict %d", ack.ID)} {
		if rec, err := st.AuditOf(ctx, target); err != nil || len(rec) != 1 || rec[0].Who != "ops" {
			t.Fatalf("the record of %s: %v %+v", target, err, rec)
		}
	}
}

// serverAndLedger runs a server, connects to it, and opens a ledger with
// cfg, all closed when t ends.
func serverAndLedger(t *testing.T, cfg ledger.Config) (*nats.Conn, *ledger.Store) {
	t.Helper()
	srv := consumertest.RunServer(t)
	nc, _ := consumertest.Connect(t, srv)
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return nc, st
}
