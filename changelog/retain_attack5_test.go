package changelog

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Attack 5 on 1275ec7 (Lease.Retain). runKept calls Retain when the run
// ended because it lost its partition, and only then stops Keep, whose
// release is what consumes the flag. But Keep may have ended already: a
// lease not renewed in time (renewals failing for 3/4 of the TTL, the
// server's trouble) makes Keep return ErrLeaseLost without release and
// without lose, so rev is still set and Retain sets retain = true with
// nothing left to consume it. The flag outlived that hold: the next
// release of a later hold (the clean stop of a SIGTERM, or
// Own/prepareOwned giving the lease up) kept the key instead of deleting
// it, and every other host waited a whole TTL. Now a take (Acquire)
// starts a new holding and clears it.
func TestAttack5StaleRetainKeepsTheKeyAtALaterCleanStop(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	js, a := heldByA(t) // TTL 3s, held
	a.mu.Lock()
	s := a.stream
	a.mu.Unlock()
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	good := info.Config

	// The run's Keep, as runKept starts it.
	keepCtx, stopKeeping := context.WithCancel(ctx)
	kept := make(chan error, 1)
	go func() { kept <- a.Keep(keepCtx) }()

	// The server refuses the renewals (a real refusal, not a lost lease):
	// no write to the bucket fits.
	refuse := good
	refuse.MaxMsgSize = 1
	if _, err := js.UpdateStream(ctx, refuse); err != nil {
		t.Fatal(err)
	}
	var keepErr error
	select {
	case keepErr = <-kept:
	case <-ctx.Done():
		t.Fatal("Keep did not end while its renewals were refused")
	}
	if !errors.Is(keepErr, ErrLeaseLost) {
		t.Fatalf("Keep ended with %v, want ErrLeaseLost (not renewed in time)", keepErr)
	}
	if _, err := js.UpdateStream(ctx, good); err != nil {
		t.Fatal(err)
	}
	// runKept: the run's cause is the lease lost (lostOwnership), ctx
	// alive: retainLease, then stopKeeping (Keep has already returned).
	a.Retain()
	stopKeeping()
	t.Logf("Keep ended: %v; rev still %d after it", keepErr, a.rev)

	// runOwned's loop: the role loop takes the lease again and owns.
	if err := a.Acquire(ctx); err != nil {
		t.Fatalf("take again: %v", err)
	}
	t.Logf("taken again: resumed %v", a.Resumed())

	// Later, a clean stop (SIGTERM): the run's ctx ends, runKept does not
	// call retainLease (ctx.Err() != nil), Keep's release runs.
	stopCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Keep(stopCtx) }()
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Keep at a clean stop: %v", err)
	}
	holder, err := a.Holder(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenLease(ctx, js, "PAY", "p0", "host-b:2", 3*time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	berr := b.Acquire(ctx)
	if holder != "" || berr != nil {
		t.Fatalf("after a clean stop (Keep released the lease) the key still names %q and another host's take says %v: "+
			"the retain flag set after Keep had already ended was never consumed and kept the key at this later stop; "+
			"the standby waits a whole TTL", holder, berr)
	}
}
