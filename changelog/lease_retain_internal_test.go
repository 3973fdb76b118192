package changelog

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats.go"
)

// An owner whose log was deleted keeps its lease's key as it is (Retain)
// and takes it again at once: the take writes right after the revision it
// left, which proves that nobody held the partition between (Resumed), so
// the new log it begins needs no row marked maybe sent.
func TestARetainedLeaseTakenAgainIsResumed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js, a := heldByA(t)
	kept, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Keep(kept) }()
	a.Retain()
	stop()
	if err := <-done; err != nil || a.Held() {
		t.Fatalf("Keep stopped: %v, held %v", err, a.Held())
	}
	b, err := OpenLease(ctx, js, "PAY", "p0", "host-b:2", 3*time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Acquire(ctx); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("another host's take of a retained key: %v, want ErrLeaseHeld until its TTL", err)
	}
	if err := a.Acquire(ctx); err != nil || !a.Resumed() {
		t.Fatalf("the owner's take of the key it retained: %v, resumed %v; want resumed", err, a.Resumed())
	}
	a.Release()
	if a.Resumed() {
		t.Fatal("a released lease says resumed")
	}
}

// A take that is not right after the revision retained is no proof: the
// key deleted between (by a person, or expired and taken by another, then
// freed), or never retained.
func TestATakeAfterAnotherWriteIsNotResumed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js, a := heldByA(t)
	a.Retain()
	a.Release()
	kv, err := js.KeyValue(ctx, LeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, a.key); err != nil {
		t.Fatal(err)
	}
	if err := a.Acquire(ctx); err != nil || a.Resumed() {
		t.Fatalf("a take after the key was deleted: %v, resumed %v; want not resumed", err, a.Resumed())
	}
	a.Release() // not retained: deleted
	if err := a.Acquire(ctx); err != nil || a.Resumed() {
		t.Fatalf("a take after a plain release: %v, resumed %v; want not resumed", err, a.Resumed())
	}
}

// A stop (its context cancelled) that cuts short the take of a key this
// owner retained, its write landed but its answer not read: the run's
// release must still free the key, or the standby waits the TTL out for a
// lease whose holder stopped cleanly (TestAttack5SIGTERMRightAfterTheLogsDeletion
// under CI's load). The write is seen on the subject as it is stored, and
// the stop comes then; whether the answer was read first varies, and the
// key must be free either way.
func TestAStopDuringTheTakeOfARetainedKeyFreesIt(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	nc, js := consumertest.Connect(t, srv)
	cut := 0
	for range 12 {
		a, err := OpenLease(context.Background(), js, "PAY", "p0", "host-a:1", 3*time.Second, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		a.Retain()
		a.Release() // Keep's end on a lost log: the key kept
		ctx, stop := context.WithCancel(context.Background())
		sub, err := nc.Subscribe(a.put, func(*nats.Msg) { stop() })
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		if a.Acquire(ctx) != nil {
			cut++
		}
		_ = sub.Unsubscribe()
		stop()
		a.Release() // the run's deferred release
		if holder, err := a.Holder(context.Background()); err != nil || holder != "" {
			t.Fatalf("after a stop cut the take short (%d of these so far) and the release, the key names %q (%v), want nobody", cut, holder, err)
		}
	}
	t.Logf("%d of 12 takes were cut short before their answer", cut)
}
