package changelog

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// unanswered cuts a lease's next write (not a delete) short: the answer
// never comes (a timeout). With land the write reaches the server first.
type unanswered struct {
	jetstream.JetStream
	subject string
	armed   atomic.Bool
	land    bool
}

func (u *unanswered) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if m.Subject == u.subject && m.Header.Get(kvOperation) == "" && u.armed.CompareAndSwap(true, false) {
		if u.land {
			if _, err := u.JetStream.PublishMsg(context.Background(), m, opts...); err != nil {
				return nil, err
			}
		}
		return nil, context.DeadlineExceeded
	}
	return u.JetStream.PublishMsg(ctx, m, opts...)
}

// retainedByA: host-a:1 holds PAY.p0 (TTL 3s) through js, then keeps the
// key for its take after a lost log (Retain, Keep's release).
func retainedByA(t *testing.T, land bool) (raw jetstream.JetStream, u *unanswered, a *Lease) {
	srv := consumertest.RunServer(t)
	_, raw = consumertest.Connect(t, srv)
	u = &unanswered{JetStream: raw, subject: "$KV." + LeaseBucket + ".PAY.p0", land: land}
	a, err := OpenLease(context.Background(), u, "PAY", "p0", "host-a:1", 3*time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.Retain()
	a.Release()
	return raw, u, a
}

func holderIs(t *testing.T, l *Lease, want string) {
	t.Helper()
	consumertest.Eventually(t, 30*time.Second, "the key names "+want, func() bool {
		h, err := l.Holder(context.Background())
		return err == nil && h == want
	})
}

// Attack 6 on 069630b: a take of the retained key cut short (no answer),
// then tried again (jsretry): Resumed is true only if nobody wrote the key
// between; the write that did not land leaves the proof intact.
func TestAttack6RetriedTakeAfterAnUnansweredWriteResumes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, land := range []bool{false, true} {
		_, u, a := retainedByA(t, land)
		u.armed.Store(true)
		if err := a.Acquire(ctx); err == nil {
			t.Fatalf("land %v: a take whose answer never came succeeded", land)
		}
		if err := a.Acquire(ctx); err != nil || !a.Held() {
			t.Fatalf("land %v: the retried take: %v, held %v", land, err, a.Held())
		}
		t.Logf("land %v (the first write reached the server): the retry's Resumed says %v (nobody else wrote the key)", land, a.Resumed())
		if !land && !a.Resumed() {
			t.Errorf("the first write never landed, the retry wrote right after the kept revision: Resumed false")
		}
		a.Release()
		holderIs(t, a, "")
	}
}

// A take cut short (doubt), the retained key then expires and another
// host takes it: a retry is not Resumed, and a release (the stop) leaves
// the other host's key alone.
func TestAttack6DoubtfulReleaseLeavesAnothersKey(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, land := range []bool{false, true} {
		raw, u, a := retainedByA(t, land)
		u.armed.Store(true)
		if err := a.Acquire(ctx); err == nil {
			t.Fatalf("land %v: a take whose answer never came succeeded", land)
		}
		b, err := OpenLease(ctx, raw, "PAY", "p0", "host-b:2", 3*time.Second, 1)
		if err != nil {
			t.Fatal(err)
		}
		consumertest.Eventually(t, 30*time.Second, "host-b takes the expired key", func() bool { return b.Acquire(ctx) == nil })
		if err := a.Acquire(ctx); !errors.Is(err, ErrLeaseHeld) {
			t.Fatalf("land %v: a's retry with b holding: %v, want ErrLeaseHeld", land, err)
		}
		a.Release()
		if h, err := a.Holder(ctx); err != nil || h != "host-b:2" {
			t.Fatalf("land %v: after a's release (in doubt) the key names %q (%v), want host-b:2", land, h, err)
		}
		if err := b.Renew(ctx); err != nil {
			t.Fatalf("land %v: b's renewal after a's release: %v", land, err)
		}
		// b goes; a takes again: not resumed (b held it between).
		b.Release()
		if err := a.Acquire(ctx); err != nil || a.Resumed() {
			t.Fatalf("land %v: a's take after b held the key: %v, resumed %v; want not resumed", land, err, a.Resumed())
		}
		a.Release()
		holderIs(t, a, "")
	}
}

// A take cut short, its write landed, then a Keep-stopped clean stop: the
// key is freed at once for a standby (no TTL wait).
func TestAttack6UnansweredTakeThenCleanStopFreesTheKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	raw, u, a := retainedByA(t, true)
	u.armed.Store(true)
	if err := a.Acquire(ctx); err == nil {
		t.Fatal("a take whose answer never came succeeded")
	}
	if h, _ := a.Holder(ctx); h != "host-a:1" {
		t.Fatalf("the landed write: the key names %q", h)
	}
	// A concurrent renewal loop (service.holding) while the stop's release runs.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = a.Renew(ctx)
		}
	}()
	a.Release()
	close(stop)
	<-done
	b, err := OpenLease(ctx, raw, "PAY", "p0", "host-b:2", 3*time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Acquire(ctx); err != nil {
		t.Fatalf("a standby's take right after the stop: %v, want the key free", err)
	}
}

// 069630b keeps retain as well as kept through a take without an answer.
// A retain flag nothing consumed (Keep had ended on "not renewed in time"
// before runKept's Retain, TestAttack5StaleRetainKeepsTheKeyAtALaterCleanStop)
// was cleared by any take before; now a take cut short by the stop keeps
// it, and the stop's release keeps the key it just wrote: the standby
// waits the TTL out after a clean stop.
func TestAttack6StaleRetainSurvivesACutShortTake(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := consumertest.RunServer(t)
	_, raw := consumertest.Connect(t, srv)
	u := &unanswered{JetStream: raw, subject: "$KV." + LeaseBucket + ".PAY.p0", land: true}
	a, err := OpenLease(ctx, u, "PAY", "p0", "host-a:1", 3*time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	s := a.stream
	a.mu.Unlock()
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	good := info.Config
	refuse := good
	refuse.MaxMsgSize = 1
	if _, err := raw.UpdateStream(ctx, refuse); err != nil {
		t.Fatal(err)
	}
	keepErr := a.Keep(ctx) // ends on "not renewed in time", rev still set
	if !errors.Is(keepErr, ErrLeaseLost) {
		t.Fatalf("Keep: %v, want ErrLeaseLost", keepErr)
	}
	if _, err := raw.UpdateStream(ctx, good); err != nil {
		t.Fatal(err)
	}
	a.Retain() // runKept: the partition lost, ctx alive
	u.armed.Store(true)
	if err := a.Acquire(ctx); err == nil { // the role loop's take, cut short by SIGTERM
		t.Fatal("a take whose answer never came succeeded")
	}
	a.Release() // runOwned's deferred release at the clean stop
	h, err := a.Holder(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenLease(ctx, raw, "PAY", "p0", "host-b:2", 3*time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	if berr := b.Acquire(ctx); h != "" || berr != nil {
		t.Errorf("after a clean stop that cut the take short, the key names %q and the standby's take says %v: "+
			"the stale retain flag survived the take without an answer and kept the key at the stop", h, berr)
	}
}
