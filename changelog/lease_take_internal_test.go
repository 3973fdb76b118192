package changelog

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/jsretry"
	"github.com/nats-io/nats.go/jetstream"
)

// behindOnce answers the first read of a key as a replica that has not yet
// got it: the lease bucket allows direct gets, which any replica of an R3
// bucket answers, one behind during an election among them.
type behindOnce struct {
	jetstream.Stream
	reads  int
	always bool // every read, not only the first
}

func (b *behindOnce) GetLastMsgForSubject(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	if b.reads++; b.reads == 1 || b.always {
		return nil, jetstream.ErrMsgNotFound
	}
	return b.Stream.GetLastMsgForSubject(ctx, subject)
}

// A take whose read came from a replica behind writes after a revision the
// stream has passed and is refused; the key is free (the last holder
// released it). The take reads again and takes it: it was refused as
// "held" by an empty holder ("took EV.jetledger first"), and a run on a
// cluster electing a leader said its lease was held by nobody
// (TestRunStartsWhileStreamHasNoLeader in CI).
func TestATakeAfterAReadFromAReplicaBehindTakesAFreeKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js, a := heldByA(t)
	a.Release()
	b := leaseBehindOnce(t, js, "host-b:2")
	if err := b.Acquire(ctx); err != nil || !b.Held() {
		t.Fatalf("a take after a read from a replica behind, the key free: %v, held %v", err, b.Held())
	}
	if holder, err := b.Holder(ctx); err != nil || holder != "host-b:2" {
		t.Fatalf("the key names %q (%v), want host-b:2", holder, err)
	}

	// A holder the second read finds is still a holder.
	c := leaseBehindOnce(t, js, "host-c:3")
	if err := c.Acquire(ctx); !errors.Is(err, ErrLeaseHeld) || c.Held() {
		t.Fatalf("a take after a read behind, the key held by host-b:2: %v, held %v; want ErrLeaseHeld", err, c.Held())
	}
}

// behindJS answers every read of every stream as a replica behind.
type behindJS struct{ jetstream.JetStream }

func (b behindJS) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	s, err := b.JetStream.Stream(ctx, name)
	if err != nil {
		return nil, err
	}
	return &behindOnce{Stream: s, always: true}, nil
}

// leaseBehindOnce opens owner's lease of PAY.p0, its first read answered
// by a replica behind.
func leaseBehindOnce(t *testing.T, js jetstream.JetStream, owner string) *Lease {
	l, err := OpenLease(context.Background(), js, "PAY", "p0", owner, 3*time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	l.stream = &behindOnce{Stream: l.stream}
	l.mu.Unlock()
	return l
}

// Every read from a replica behind (an election that lasts), the key
// written (its holder's, unseen): the take passes, to be tried again
// (jsretry.Transient), not refused as held, nor a failure that ends the run ("take lease: wrong last sequence", CI's
// TestRunStartsWhileStreamHasNoLeader once a take retried on its own).
func TestATakeReadBehindEveryTimePasses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js, _ := heldByA(t)
	b, err := OpenLease(ctx, behindJS{js}, "PAY", "p0", "host-b:2", 3*time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	err = b.Acquire(ctx)
	var behind *behindError
	if !errors.As(err, &behind) || !jsretry.Transient(err) || errors.Is(err, ErrLeaseHeld) || b.Held() {
		t.Fatalf("a take read behind every time: %v (transient %v, held %v); want a passing error", err, jsretry.Transient(err), b.Held())
	}
}

// heldByA is a server of its own whose lease PAY.p0 host-a:1 holds (TTL 3s).
func heldByA(t *testing.T) (jetstream.JetStream, *Lease) {
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	a, err := OpenLease(context.Background(), js, "PAY", "p0", "host-a:1", 3*time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	return js, a
}
