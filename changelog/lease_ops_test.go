package changelog_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats.go/jetstream"
)

// openLease opens the lease of partition PAY/durable for owner.
func openLease(t *testing.T, js jetstream.JetStream, durable, owner string, ttl time.Duration) *changelog.Lease {
	t.Helper()
	l, err := changelog.OpenLease(t.Context(), js, "PAY", durable, owner, ttl, 1)
	if err != nil {
		t.Fatalf("open the lease of %s for %s, TTL %v: %v", durable, owner, ttl, err)
	}
	return l
}

// takeWhenFree does what a standby does at each look: asks who holds the
// lease and, told nobody, tries to take it. True once it holds it.
func takeWhenFree(t *testing.T, ctx context.Context, l *changelog.Lease) bool {
	t.Helper()
	holder, err := l.Holder(ctx)
	if err != nil {
		t.Fatalf("who holds the lease: %v", err)
	}
	if holder != "" {
		return false
	}
	err = l.Acquire(ctx)
	if err != nil && !errors.Is(err, changelog.ErrLeaseHeld) {
		t.Fatalf("take the free lease: %v", err)
	}
	return err == nil
}

// The lease bucket deleted under a running owner and its standby: the
// owner keeps the partition (its renewals make the bucket and its key
// again), the standby's looks go on answering, and the two never hold the
// lease at once.
func TestAnOwnerKeepsItsLeaseThroughTheBucketsDeletion(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, s)
	ttl := 2 * time.Second
	a := openLease(t, js, "pay-p0", "host-a", ttl)
	b := openLease(t, js, "pay-p0", "host-b", ttl)
	if err := a.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	keepCtx, stopKeeping := context.WithCancel(ctx)
	kept := make(chan error, 1)
	go func() { kept <- a.Keep(keepCtx) }()
	defer func() { stopKeeping(); <-kept }()

	if err := js.DeleteKeyValue(ctx, changelog.LeaseBucket); err != nil {
		t.Fatal(err)
	}
	for deleted := time.Now(); time.Since(deleted) < 2*ttl; {
		if takeWhenFree(t, ctx, b) || b.Held() {
			t.Fatalf("the standby took the lease while its owner kept it (owner holds: %v)", a.Held())
		}
		select {
		case err := <-kept:
			kept <- err
			t.Fatalf("the owner's Keep ended after the bucket's deletion: %v", err)
		default:
		}
		if !ackwait.Sleep(ctx, 50*time.Millisecond) { // poll interval, not synchronisation
			t.Fatal(ctx.Err())
		}
	}
	if !a.Held() {
		t.Fatal("the owner no longer holds its lease two TTLs after the bucket's deletion")
	}
	if holder, err := b.Holder(ctx); err != nil || holder != "host-a" {
		t.Fatalf("the standby sees holder %q (%v), want host-a", holder, err)
	}
}

// The lease bucket deleted under an owner with no standby: its renewals
// make the bucket again, with its key in it, and it goes on holding.
func TestAnOwnerAloneMakesItsBucketAgain(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, s)
	a := openLease(t, js, "pay-p0", "host-a", 2*time.Second)
	if err := a.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	keepCtx, stopKeeping := context.WithCancel(ctx)
	kept := make(chan error, 1)
	go func() { kept <- a.Keep(keepCtx) }()
	defer func() { stopKeeping(); <-kept }()

	if err := js.DeleteKeyValue(ctx, changelog.LeaseBucket); err != nil {
		t.Fatal(err)
	}
	consumertest.Eventually(t, 10*time.Second, "the owner's key in the bucket made again", func() bool {
		kv, err := js.KeyValue(ctx, changelog.LeaseBucket)
		if err != nil {
			return false
		}
		e, err := kv.Get(ctx, "PAY.pay-p0")
		return err == nil && string(e.Value()) == "host-a"
	})
	select {
	case err := <-kept:
		kept <- err
		t.Fatalf("the owner's Keep ended after the bucket's deletion: %v", err)
	default:
	}
	if err := a.Renew(ctx); err != nil || !a.Held() {
		t.Fatalf("the owner's renewal in the bucket made again: %v", err)
	}
}

// The lease bucket deleted after its owner was lost: the standby's looks
// make it again, and it takes the partition only once the lost owner's
// hold has ended, not at once in the bucket it has just made.
func TestAStandbyTakesALeaseWhoseBucketWasDeleted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, s)
	ttl := 2 * time.Second
	a := openLease(t, js, "pay-p0", "host-a", ttl)
	b := openLease(t, js, "pay-p0", "host-b", ttl)
	if err := a.Acquire(ctx); err != nil { // and renewed never again: a lost owner
		t.Fatal(err)
	}
	if err := js.DeleteKeyValue(ctx, changelog.LeaseBucket); err != nil {
		t.Fatal(err)
	}
	consumertest.Eventually(t, 10*ttl, "the standby takes the lease", func() bool {
		if takeWhenFree(t, ctx, b) {
			return true
		}
		if a.Held() && b.Held() {
			t.Fatal("two holders at once")
		}
		return false
	})
	if a.Held() {
		t.Fatal("the standby took the lease while the lost owner still held it")
	}
	if err := b.Renew(ctx); err != nil || !b.Held() {
		t.Fatalf("the new owner's renewal: %v", err)
	}
}

// Partitions of different timings (another --batch, another AckWait, so
// another lease TTL) own their leases side by side, in either order.
func TestLeasesOfDifferentTTLsCoexist(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, s)
	leases := []*changelog.Lease{
		openLease(t, js, "pay-p0", "host-a", 2*time.Second),
		openLease(t, js, "pay-p1", "host-a", 5*time.Second),
		openLease(t, js, "pay-p2", "host-b", 1500*time.Millisecond),
	}
	for i, l := range leases {
		if err := l.Acquire(ctx); err != nil {
			t.Fatalf("lease %d: %v", i, err)
		}
		if err := l.Renew(ctx); err != nil || !l.Held() {
			t.Fatalf("lease %d's renewal: %v", i, err)
		}
	}
}

// Two runs of one partition must agree on its timing: one whose TTL is
// not the holder's is refused, naming both TTLs; runs of its TTL are not.
func TestOnePartitionWithTwoTTLsIsRefused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, s)
	a := openLease(t, js, "pay-p0", "host-a", 2*time.Second)
	b := openLease(t, js, "pay-p0", "host-b", 3*time.Second) // opened while nobody held it
	if err := a.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, changelog.ErrInvalidConfig) || !strings.Contains(err.Error(), "2s") || !strings.Contains(err.Error(), "3s") {
			t.Fatalf("%s: %v, want ErrInvalidConfig naming 2s and 3s", what, err)
		}
	}
	err := b.Acquire(ctx)
	refused("take the lease with another TTL", err)
	_, err = b.Holder(ctx)
	refused("look at the lease with another TTL", err)
	_, err = changelog.OpenLease(ctx, js, "PAY", "pay-p0", "host-c", 3*time.Second, 1)
	refused("open the lease with another TTL", err)
	c := openLease(t, js, "pay-p0", "host-c", 2*time.Second)
	if err := c.Acquire(ctx); !errors.Is(err, changelog.ErrLeaseHeld) {
		t.Fatalf("a run of the owner's TTL: %v, want ErrLeaseHeld", err)
	}
}

// A lease expires about its own TTL after its owner's last renewal, even
// in a bucket made by a partition of a longer TTL, and not before the
// owner's hold has ended.
func TestALeaseExpiresAfterItsOwnTTL(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, s)
	openLease(t, js, "pay-p1", "host-a", 20*time.Second) // makes the bucket
	ttl := 2 * time.Second
	a := openLease(t, js, "pay-p0", "host-a", ttl)
	b := openLease(t, js, "pay-p0", "host-b", ttl)
	if err := a.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	taken := time.Now()
	consumertest.Eventually(t, 10*time.Second, "the lease of TTL 2s expires", func() bool {
		return takeWhenFree(t, ctx, b)
	})
	if took := time.Since(taken); a.Held() || took > ttl+3*time.Second {
		t.Fatalf("taken over after %v (the old owner holds: %v), want after about %v", took, a.Held(), ttl)
	}
	if err := a.Renew(ctx); !errors.Is(err, changelog.ErrLeaseLost) {
		t.Fatalf("the old owner's renewal: %v, want ErrLeaseLost", err)
	}
}

// A lease held by a run of an earlier version (a bucket of one TTL, no
// per-key TTL, the owner's name as the value) is honoured: a standby of
// this version waits for it even once another partition has widened the
// bucket for a longer TTL, and the key it then writes reads as before.
func TestAnEarlierVersionsLeaseIsHonoured(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, s)
	ttl := 3 * time.Second
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: changelog.LeaseBucket, TTL: ttl, History: 1})
	if err != nil {
		t.Fatal(err)
	}
	rev, err := kv.Create(ctx, "PAY.pay-p0", []byte("old-host"))
	if err != nil {
		t.Fatal(err)
	}
	openLease(t, js, "pay-p1", "host-a", 5*time.Second) // a longer TTL than the bucket's
	b := openLease(t, js, "pay-p0", "host-b", ttl)
	if holder, err := b.Holder(ctx); err != nil || holder != "old-host" {
		t.Fatalf("the earlier version's lease: held by %q (%v), want old-host", holder, err)
	}
	if err := b.Acquire(ctx); !errors.Is(err, changelog.ErrLeaseHeld) {
		t.Fatalf("take the earlier version's lease: %v, want ErrLeaseHeld", err)
	}
	if _, err := kv.Update(ctx, "PAY.pay-p0", []byte("old-host"), rev); err != nil { // its owner's last renewal
		t.Fatal(err)
	}
	renewed := time.Now()
	consumertest.Eventually(t, 30*time.Second, "the earlier version's lease expires", func() bool {
		return takeWhenFree(t, ctx, b)
	})
	if took := time.Since(renewed); took < ttl-ttl/4 {
		t.Fatalf("taken %v after the earlier version's renewal, within its hold of %v", took, ttl-ttl/4)
	}
	if e, err := kv.Get(ctx, "PAY.pay-p0"); err != nil || string(e.Value()) != "host-b" {
		t.Fatalf("the lease as an earlier version reads it: %v", err)
	}
}
