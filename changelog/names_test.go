package changelog_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats.go/jetstream"
)

// Issue 42, item 7: stream ORDERS_EU with durable worker and stream ORDERS
// with durable EU_worker have logs of their own (they shared one, and each
// ledger applied the other's entries); a stream of a changelog's name made
// for another partition, or by someone else, is refused by Ensure, not
// written.
func TestChangelogsOfCollidingNamesAreApart(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	a := ensure(t, js, changelog.Config{Stream: "ORDERS_EU", Durable: "worker"})
	b := ensure(t, js, changelog.Config{Stream: "ORDERS", Durable: "EU_worker"})
	if a.Instance() == b.Instance() {
		t.Fatalf("ORDERS_EU/worker and ORDERS/EU_worker share the log %s", a.Instance())
	}
	nameA, subjA := changelog.Names("ORDERS_EU", "worker")
	nameB, subjB := changelog.Names("ORDERS", "EU_worker")
	if nameA == nameB || subjA == subjB {
		t.Fatalf("names %s %s, subjects %s %s: want apart", nameA, nameB, subjA, subjB)
	}

	name, subject := changelog.Names("PAY", "p0")
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: name, Subjects: []string{subject}}); err != nil {
		t.Fatal(err)
	}
	if _, err := changelog.Ensure(context.Background(), js, changelog.Config{Stream: "PAY", Durable: "p0"}); !errors.Is(err, changelog.ErrInvalidConfig) {
		t.Fatalf("a stream of the log's name that does not name its partition: %v, want ErrInvalidConfig", err)
	}
}
