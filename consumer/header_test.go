package consumer_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestHandlerSeesHeaders: a handler reads the headers the publisher set,
// every value of a key in order, from ledger.Delivery.Header.
func TestHandlerSeesHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var (
		mu  sync.Mutex
		got ledger.Header
	)
	handler := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		mu.Lock()
		got = d.Header
		mu.Unlock()
		return record(ctx, tx, d)
	}
	m := &nats.Msg{Subject: "ev.x", Data: []byte(`{}`), Header: nats.Header{}}
	m.Header.Set(jetstream.MsgIDHeader, "h1")
	m.Header.Set("Tenant", "acme")
	m.Header.Add("Trace", "a")
	m.Header.Add("Trace", "b")
	if _, err := e.js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	e.start(t, consumer.Config{Handler: handler})
	consumertest.Eventually(t, 10*time.Second, "the handler ran", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return got != nil
	})
	mu.Lock()
	defer mu.Unlock()
	if got.Get("Tenant") != "acme" || got.Get(jetstream.MsgIDHeader) != "h1" || len(got["Trace"]) != 2 || got["Trace"][1] != "b" || got.Get("Missing") != "" {
		t.Fatalf("handler saw headers %v, want Tenant acme, Nats-Msg-Id h1, Trace [a b]", got)
	}
}
