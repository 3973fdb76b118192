package service

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/natsconn"
)

// quickPlan keeps the lease's TTL short: AckWait about 2s.
var quickPlan = ackwait.Plan{Deadline: time.Second, BatchSize: 10, BufferWait: 200 * time.Millisecond, CommitMargin: 300 * time.Millisecond, AckMargin: 200 * time.Millisecond}

// Issue 42, item 8: two plain runs (no changelog) of one durable on two
// ledgers: the second waits out the lease's TTL and is refused, naming the
// owner, while the first consumes on; a lease left by a run that stopped
// without giving it up (SIGKILLed) is taken once its TTL has passed.
func TestOnePlainRunPerDurable(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	plain := func() Config {
		cfg := testConfig(t, t.TempDir())
		cfg.NATS, cfg.Consumer.Plan = &natsconn.Config{URL: srv.ClientURL()}, quickPlan
		return cfg
	}
	a := plain()
	ctxA, stopA := context.WithCancel(t.Context())
	defer stopA()
	doneA := make(chan error, 1)
	go func() { doneA <- Run(ctxA, a) }()
	publish(t, js, 0, 10)
	consumertest.Eventually(t, time.Minute, "a commits 10", func() bool { return processed(t, a.DB) == 10 })

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := Run(ctx, plain()); !errors.Is(err, ErrOwned) {
		t.Fatalf("a second run of the durable: %v, want ErrOwned", err)
	}
	stopA()
	if err := <-doneA; err != nil {
		t.Fatalf("the first run: %v", err)
	}

	// A run SIGKILLed while it held the lease: its key, never renewed.
	dead, err := changelog.OpenLease(t.Context(), js, "S", "d", "killed:1", LeaseTTL(quickPlan.WithDefaults().AckWait()), 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := dead.Acquire(t.Context()); err != nil {
		t.Fatal(err)
	}
	b := plain()
	ctxB, stopB := context.WithCancel(t.Context())
	doneB := make(chan error, 1)
	go func() { doneB <- Run(ctxB, b) }()
	publish(t, js, 10, 20)
	consumertest.Eventually(t, time.Minute, "the next run, once the dead one's lease expired, commits the rest", func() bool { return processed(t, b.DB) == 10 })
	stopB()
	if err := <-doneB; err != nil {
		t.Fatalf("the next run: %v", err)
	}
}

// Issue 42, item 6: a standby's copy, behind its log, taken out of the
// log (LeaveChangelog) with the owner stopped, first applies what it
// lacks: it holds every message the owner committed. Before, it left with
// what it had, and the messages it lacked, acknowledged, were gone.
func TestLeavingTheChangelogCatchesUpFirst(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	a, b := newOwnedHost(t, srv.ClientURL(), "a", 0), newOwnedHost(t, srv.ClientURL(), "b", 0)
	a.cfg.Consumer.Plan, b.cfg.Consumer.Plan = quickPlan, quickPlan
	a.start()
	consumertest.Eventually(t, time.Minute, "a owns the partition", func() bool { return hasSnapshot(t, js) })
	b.start()
	publish(t, js, 0, 20)
	consumertest.Eventually(t, time.Minute, "b's copy holds 20", func() bool { return processed(t, b.cfg.DB) == 20 })
	b.halt()
	publish(t, js, 20, 50)
	consumertest.Eventually(t, time.Minute, "a commits 50", func() bool { return processed(t, a.cfg.DB) == 50 })
	a.halt()

	leave := b.cfg
	leave.Owner, leave.Ledger.LeaveChangelog = nil, true
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, leave) }()
	publish(t, js, 50, 55)
	consumertest.Eventually(t, time.Minute, "the ledger that left its log holds all 55", func() bool { return processed(t, leave.DB) == 55 })
	stop()
	if err := <-done; err != nil {
		t.Fatalf("the run that left the changelog: %v", err)
	}
}

// An owner (a changelog, no standby) started again by its supervisor
// within the TTL of the lease its SIGKILLed run left: it waits the lease
// out and owns the partition. Before, it was refused at once (ErrOwned),
// naming its own dead run (TestAMigratedPartitionWaitsForItsFirstSnapshot
// in CI).
func TestAnOwnerRestartedAtOnceWaitsForItsDeadRunsLease(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	dead, err := changelog.OpenLease(t.Context(), js, "S", "d", "killed:1", LeaseTTL(quickPlan.WithDefaults().AckWait()), 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := dead.Acquire(t.Context()); err != nil {
		t.Fatal(err)
	}
	h := newOwnedHost(t, srv.ClientURL(), "a", 0)
	h.cfg.Owner.Standby, h.cfg.Consumer.Plan = false, quickPlan
	h.start()
	running := func() {
		select {
		case err := <-h.done:
			t.Fatalf("the restarted owner ended: %v", err)
		default:
		}
	}
	consumertest.Eventually(t, time.Minute, "the restarted owner makes its stream", func() bool {
		running()
		_, err := js.Stream(t.Context(), "S")
		return err == nil
	})
	publish(t, js, 0, 10)
	consumertest.Eventually(t, time.Minute, "the restarted owner commits", func() bool {
		running()
		return processed(t, h.cfg.DB) == 10
	})
	h.halt()
}
