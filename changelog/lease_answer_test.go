package changelog_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats.go/jetstream"
)

// A renewal whose answer was lost (a timeout) wrote the key: the next,
// sent after the revision before, is refused by the stream. The key still
// names this owner, so the lease is renewed, not lost (a plain run stopped
// itself on it, "another run took the durable's lease", naming itself);
// a key naming another is still lost.
func TestARenewalWhoseAnswerWasLostKeepsTheLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js, kv, a := heldWithALostAnswer(t)
	if err := a.Renew(ctx); err != nil || !a.Held() {
		t.Fatalf("a renewal after a lost answer of its own: %v, held %v", err, a.Held())
	}
	if _, err := kv.Put(ctx, "PAY.p0", []byte("host-b:2")); err != nil {
		t.Fatal(err)
	}
	if err := a.Renew(ctx); !errors.Is(err, changelog.ErrLeaseLost) {
		t.Fatalf("a renewal after another wrote the key: %v, want ErrLeaseLost", err)
	}

	// A take whose answer was lost: the key names this process, so taking
	// it again succeeds (a plain run was refused naming "" as the other).
	if _, err := kv.Put(ctx, "PAY.p0", []byte("host-c:3")); err != nil {
		t.Fatal(err)
	}
	c, err := changelog.OpenLease(ctx, js, "PAY", "p0", "host-c:3", 3*time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Acquire(ctx); err != nil || !c.Held() {
		t.Fatalf("taking a lease its own lost answer wrote: %v, held %v", err, c.Held())
	}
}

// A renewal whose answer was lost wrote a revision the owner does not
// know: its release on a clean stop must still free the key. A run
// restarted with another --deadline (another TTL) was refused for the
// TTL after such a stop (the nemesis, under CI's load).
func TestAReleaseAfterALostRenewalAnswerFreesTheLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js, _, a := heldWithALostAnswer(t)
	a.Release()
	if holder, err := a.Holder(ctx); err != nil || holder != "" {
		t.Fatalf("after the release the lease is held by %q (%v), want nobody", holder, err)
	}
	b, err := changelog.OpenLease(ctx, js, "PAY", "p0", "host-b:2", 5*time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Acquire(ctx); err != nil {
		t.Fatalf("a run of another TTL after a clean stop: %v", err)
	}
}

// heldWithALostAnswer is a lease of PAY.p0 held by host-a:1 (TTL 3s) on a
// server of its own, with a write of the key whose answer was lost: the
// same owner, one revision on.
func heldWithALostAnswer(t *testing.T) (jetstream.JetStream, jetstream.KeyValue, *changelog.Lease) {
	ctx := context.Background()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	a, err := changelog.OpenLease(ctx, js, "PAY", "p0", "host-a:1", 3*time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, changelog.LeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "PAY.p0", []byte("host-a:1")); err != nil {
		t.Fatal(err)
	}
	return js, kv, a
}
