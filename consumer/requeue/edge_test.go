package requeue_test

import (
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/requeue"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// At an edge the dead letter's stream PAY captures nothing: it sources the
// hub's HUB. The copy goes into HUB (without the Nats-Stream-Source header
// the sourced original carries) and the dead letter goes only once the
// copy is in PAY after the original.
func TestRequeueAtAnEdgeThroughTheHub(t *testing.T) {
	t.Parallel()
	port := consumertest.FreePort(t)
	hub := consumertest.RunServerWithOptions(t, &server.Options{JetStreamDomain: "hub", ServerName: "hub",
		LeafNode: server.LeafNodeOpts{Host: "127.0.0.1", Port: port}})
	_, hjs := consumertest.Connect(t, hub)
	consumertest.CreateStream(t, hjs, jetstream.StreamConfig{Name: "HUB", Subjects: []string{"pay.*"}, Duplicates: 100 * time.Millisecond})
	u, _ := url.Parse(fmt.Sprintf("nats-leaf://127.0.0.1:%d", port))
	edge := consumertest.RunServerWithOptions(t, &server.Options{JetStreamDomain: "site", ServerName: "site",
		LeafNode: server.LeafNodeOpts{Remotes: []*server.RemoteLeafOpts{{URLs: []*url.URL{u}}}}})
	_, ejs := consumertest.Connect(t, edge)
	consumertest.Eventually(t, 10*time.Second, "the edge connected to the hub", func() bool {
		lz, _ := hub.Leafz(nil)
		return lz != nil && lz.NumLeafs == 1
	})
	s := consumertest.CreateStream(t, ejs, jetstream.StreamConfig{Name: "PAY", Duplicates: 100 * time.Millisecond,
		Sources: []*jetstream.StreamSource{{Name: "HUB", Domain: "hub"}}})
	if _, err := hjs.PublishMsg(t.Context(), &nats.Msg{Subject: "pay.alice", Data: []byte(`{}`), Header: nats.Header{jetstream.MsgIDHeader: {"evt-1"}}}); err != nil {
		t.Fatal(err)
	}
	var raw *jetstream.RawStreamMsg
	consumertest.Eventually(t, 10*time.Second, "PAY sourcing the original", func() bool {
		var err error
		raw, err = s.GetMsg(t.Context(), 1)
		return err == nil
	})
	d := ledger.DeadLetter{ID: 1, MessageID: "evt-1", Stream: "PAY", Sequence: 1, Subject: raw.Subject, Headers: raw.Header,
		Payload: raw.Data, CreatedAt: raw.Time}
	l := &discards{}
	var res requeue.Result
	var err error
	consumertest.Eventually(t, 10*time.Second, "requeue outside the windows", func() bool {
		res, err = requeue.Requeue(t.Context(), ejs, l, d, requeue.Config{Wait: 10 * time.Second})
		return !errors.Is(err, requeue.ErrStillInWindow)
	})
	if err != nil {
		t.Fatalf("requeue at the edge: %v", err)
	}
	if res.Via.Stream != "HUB" || res.Via.Sequence != 2 || res.Seq != 2 || res.Earlier {
		t.Errorf("Result %+v, want via HUB seq 2 into PAY seq 2", res)
	}
	if l.n != 1 {
		t.Errorf("%d dead letters deleted, want 1", l.n)
	}
	got, err := s.GetMsg(t.Context(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if got.Header.Get(jetstream.MsgIDHeader) != "evt-1" || got.Subject != "pay.alice" {
		t.Errorf("PAY seq 2 is %s id %q, want the copy", got.Subject, got.Header.Get(jetstream.MsgIDHeader))
	}
}
