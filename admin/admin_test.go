package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/micro"
)

// enqueue puts one outbox row per payload in st, as a handler does.
func enqueue(t *testing.T, st *ledger.Store, payloads ...string) []string {
	t.Helper()
	var ids []string
	for i, p := range payloads {
		d := ledger.Delivery{MessageID: "m" + p, Stream: "S", Sequence: uint64(i + 1), Subject: "ev", Data: []byte(p), Delivered: 1}
		_, err := st.ApplyBatch(context.Background(), []ledger.Delivery{d}, func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
			id, err := tx.Enqueue(ctx, "webhook", d.Data)
			ids = append(ids, id)
			return err
		}, ledger.Budget{})
		if err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// The API of a run, on a real server: found by micro's discovery; status
// says what needs a person; outbox.list lists without payloads and
// outbox.show decodes the payload; a bad request and an unknown id are
// refused with their codes; an address nobody serves is ErrNoRun, naming
// the subject.
func TestTheAdminAPIAnswersReads(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	nc, _ := consumertest.Connect(t, srv)
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ids := enqueue(t, st, `{"amount":5}`, "plain text")
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
	if err := json.Unmarshal(msg.Data, &info); err != nil || info.Metadata["durable"] != "pay-p0" || len(info.Endpoints) != 3 {
		t.Fatalf("the service's info: %v %+v", err, info)
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
