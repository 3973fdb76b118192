package changelog_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
)

// Helper-18: a release (a clean stop, or Own giving the lease up for a
// fuller copy while the run's Keep still renews) racing a renewal of the
// same lease. Whatever the interleaving, once both are done the owner may
// believe it holds the lease (Held) only while the key names it, and a
// release after them (the stop's) leaves the key free for a run of
// another TTL.
func TestAttackAReleaseRacingARenewal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	heldFree := 0
	for i := range 40 {
		a, err := changelog.OpenLease(ctx, js, "PAY", "p0", "host-a:1", 3*time.Second, 1)
		if err != nil {
			t.Fatal(err)
		}
		consumertest.Eventually(t, time.Minute, "the lease taken", func() bool { return a.Acquire(ctx) == nil })
		start := make(chan struct{})
		var wg sync.WaitGroup
		var renewErr error
		wg.Go(func() {
			<-start
			for range 3 {
				if err := a.Renew(ctx); err != nil {
					renewErr = err
					return
				}
			}
		})
		close(start)
		a.Release()
		wg.Wait()
		holder, err := a.Holder(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if a.Held() && holder != "host-a:1" {
			heldFree++
			t.Logf("round %d: the owner believes it holds the lease (Held) after its release while the key names %q (renewal: %v)", i, holder, renewErr)
		}
		a.Release() // the stop's
		if holder, err := a.Holder(ctx); err != nil || holder != "" {
			t.Fatalf("round %d: after the stop's release the key names %q (%v), want nobody", i, holder, err)
		}
		b, err := changelog.OpenLease(ctx, js, "PAY", "p0", "host-b:2", 5*time.Second, 1)
		if err != nil {
			t.Fatalf("round %d: a run of another TTL after the stop: %v", i, err)
		}
		if err := b.Acquire(ctx); err != nil {
			t.Fatalf("round %d: a run of another TTL after the stop: %v", i, err)
		}
		b.Release()
	}
	if heldFree > 0 {
		t.Errorf("in %d of 40 rounds a renewal racing the release left the owner believing it holds a lease whose key it had just deleted", heldFree)
	}
}

// A release whose first delete is refused because the key moved on, to
// another owner who took it after this one's expired (a paused owner),
// does not delete the other's key.
func TestAttackAReleaseAfterTheKeyPassedToAnotherDeletesNothingOfIts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	a, err := changelog.OpenLease(ctx, js, "PAY", "p0", "host-a:1", 2*time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := changelog.OpenLease(ctx, js, "PAY", "p0", "host-b:2", 2*time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	// a's key expires (never renewed); b takes it.
	consumertest.Eventually(t, time.Minute, "b takes the key after a's expired", func() bool {
		err := b.Acquire(ctx)
		if err != nil && !errors.Is(err, changelog.ErrLeaseHeld) {
			t.Fatal(err)
		}
		return err == nil
	})
	a.Release()
	if holder, err := b.Holder(ctx); err != nil || holder != "host-b:2" {
		t.Fatalf("after the paused owner's release the key names %q (%v), want host-b:2", holder, err)
	}
	if err := b.Renew(ctx); err != nil {
		t.Fatalf("b's renewal after a's release: %v", err)
	}
}
