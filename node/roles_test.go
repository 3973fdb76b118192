package node

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The people's roles on the real server (issue 43): a viewer reads
// through the admin API and cannot act; an operator acts and cannot delete
// a stream; a publisher cannot reach the API at all. Each action refused
// leaves the row as it was.
func TestOperatorsAndViewersOnTheEmbeddedServer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	n, err := Start(ctx, Config{Listen: "127.0.0.1:0", StoreDir: filepath.Join(t.TempDir(), "nats"), Logger: quiet,
		Token: "admin-secret", Publishers: PublishRole{Tokens: []string{"pub"}, Stream: "EV", Subjects: []string{"ev.>"}},
		Operators: []string{"op"}, Viewers: []string{"view"}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	own, err := n.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := own.CreateStream(ctx, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.>"}}); err != nil {
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
	addr := admin.Address{Stream: "EV", Durable: "run"}
	runConn, err := dial(t, n, nats.Token("admin-secret"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := admin.Serve(admin.Config{Conn: runConn, Store: st, Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	call := func(nc *nats.Conn, endpoint string, req, resp any) error {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		return admin.Call(ctx, nc, addr, endpoint, req, resp)
	}
	discard := admin.ByID{ID: 1, Who: "someone"}

	viewer, err := dial(t, n, nats.Token("view"), nats.CustomInboxPrefix(ViewerInboxPrefix))
	if err != nil {
		t.Fatal(err)
	}
	var dls admin.DeadLetters
	if err := call(viewer, "dlq.list", nil, &dls); err != nil || len(dls.DeadLetters) != 1 {
		t.Fatalf("a viewer's read: %v %+v", err, dls)
	}
	if err := call(viewer, "dlq.discard", discard, nil); err == nil {
		t.Fatal("a viewer discarded a dead letter")
	}
	pub, err := dial(t, n, nats.Token("pub"), nats.CustomInboxPrefix(PublisherInboxPrefix))
	if err != nil {
		t.Fatal(err)
	}
	if err := call(pub, "status", nil, nil); err == nil {
		t.Fatal("a publisher reached the admin API")
	}
	if dls, _ := st.DeadLetters(ctx, 0); len(dls) != 1 {
		t.Fatal("a refused action changed the ledger")
	}

	operator, err := dial(t, n, nats.Token("op"), nats.CustomInboxPrefix(OperatorInboxPrefix))
	if err != nil {
		t.Fatal(err)
	}
	if err := call(operator, "dlq.discard", discard, nil); err != nil {
		t.Fatalf("an operator's action: %v", err)
	}
	ojs, err := jetstream.New(operator)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ojs.Stream(ctx, "EV"); err != nil {
		t.Fatalf("an operator reads the stream's info: %v", err)
	}
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := ojs.DeleteStream(dctx, "EV"); err == nil {
		t.Fatal("an operator deleted the stream")
	}
	if _, err := own.Stream(ctx, "EV"); errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatal("the stream is gone")
	}
	if _, err := Start(ctx, Config{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), Logger: quiet, Operators: []string{"x"}, Viewers: []string{"x"}}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("an operator's token also a viewer's: %v, want ErrInvalidConfig", err)
	}
}
