package service

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/natsconn"
	"github.com/nats-io/nats.go/jetstream"
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
	plain := func(plan ackwait.Plan) Config {
		cfg := testConfig(t, t.TempDir())
		cfg.NATS, cfg.Consumer.Plan = &natsconn.Config{URL: srv.ClientURL()}, plan
		return cfg
	}
	// A lease of a few seconds more than quickPlan's: the first run must
	// keep it through the second's wait on a loaded host, whose renewals
	// (every quarter TTL, each given a quarter) may be slow.
	steady := quickPlan
	steady.Deadline = 3 * time.Second
	a := plain(steady)
	ctxA, stopA := context.WithCancel(t.Context())
	defer stopA()
	doneA := make(chan error, 1)
	go func() { doneA <- Run(ctxA, a) }()
	publish(t, js, 0, 10)
	consumertest.Eventually(t, time.Minute, "a commits 10", func() bool { return processed(t, a.DB) == 10 })

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := Run(ctx, plain(steady)); !errors.Is(err, ErrOwned) {
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
	b := plain(quickPlan)
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
	a, b := ownedPair(t, srv, js, quickPlan, 20)
	b.halt()
	publish(t, js, 20, 50)
	consumertest.Eventually(t, time.Minute, "a commits 50", func() bool { return processed(t, a.cfg.DB) == 50 })
	a.halt()

	runOutOfTheLog(t, js, b.cfg, 50, 55)
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

// A ledger taken out of its changelog (--leave-changelog: a person
// settles rows on it) consumes on its own, then is started again with the
// changelog. It never gives way to the older snapshot: it waits, saying
// to delete the log, and once the log is deleted it begins the new one,
// and the standby's copy of the old log restores its snapshot. Every
// message is in both ledgers. Before, the rejoining file restored the
// older snapshot over itself, and what it applied outside the log was in
// no ledger but the file set aside.
func TestRejoiningTheChangelogKeepsWhatWasAppliedOutsideIt(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	a, b := ownedPair(t, srv, js, quickPlan, 20)
	b.halt()
	a.halt()

	runOutOfTheLog(t, js, a.cfg, 20, 30)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a.cfg.Metrics = l
	a.start()
	waitGauges(t, "http://"+l.Addr().String()+"/metrics", "jetledger_changelog_waiting 1", `jetledger_changelog_role{role="waiting"} 1`)
	if n := processed(t, a.cfg.DB); n != 30 || setAside(a) {
		t.Fatalf("the rejoining ledger holds %d of 30, files %v: it gave way to the older snapshot", n, a.files())
	}
	name, _ := changelog.Names("S", "d")
	if err := js.DeleteStream(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	b.start()
	publish(t, js, 30, 40)
	consumertest.Eventually(t, time.Minute, "a, back in a new log, commits 40", func() bool { return processed(t, a.cfg.DB) == 40 })
	consumertest.Eventually(t, time.Minute, "b's copy, restored from a's snapshot, holds 40", func() bool { return processed(t, b.cfg.DB) == 40 })
	if setAside(a) {
		t.Fatalf("a's files %v: its own was set aside", a.files())
	}
	a.halt()
	b.halt()
}

// setAside says whether a restore set h's file aside.
func setAside(h *ownedHost) bool {
	for _, f := range h.files() {
		if strings.Contains(f, ".replaced-") {
			return true
		}
	}
	return false
}

// runOutOfTheLog runs cfg's ledger out of its changelog (LeaveChangelog,
// a plain run), publishes messages from to to-1 and stops it once its
// ledger holds all to.
func runOutOfTheLog(t *testing.T, js jetstream.JetStream, cfg Config, from, to int, meanwhile ...func()) {
	t.Helper()
	cfg.Owner, cfg.Ledger.LeaveChangelog = nil, true
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	publish(t, js, from, to)
	consumertest.Eventually(t, time.Minute, fmt.Sprintf("the ledger out of its log holds all %d", to), func() bool { return processed(t, cfg.DB) == to })
	for _, f := range meanwhile {
		f()
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("the run out of the changelog: %v", err)
	}
}

// A standby running while its owner's file is out of the log (docs: stop
// the standbys first) lacks what the run out of the log applied and
// acknowledged: it waits, saying so, and once that run stops and frees the
// lease it still does not own, rather than consume on without those
// messages. It starts once the run out of the log holds the lease: left
// running from before, it took the lease the owner gave up as it stopped
// whenever the run out of the log was slower to start than its 250 ms look
// (CI's load), and then lacked nothing.
func TestAStandbyNeverOwnsACopyLackingAcknowledgedMessages(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	a, b := ownedPair(t, srv, js, quickPlan, 20)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.halt()
	b.cfg.Metrics = l
	a.halt()
	runOutOfTheLog(t, js, a.cfg, 20, 30, func() {
		b.start()
		waitGauges(t, "http://"+l.Addr().String()+"/metrics", "jetledger_changelog_waiting 1", `jetledger_changelog_role{role="waiting"} 1`)
	})
	waitGauges(t, "http://"+l.Addr().String()+"/metrics", "jetledger_changelog_waiting 1", `jetledger_changelog_role{role="waiting"} 1`)
	publish(t, js, 30, 35)
	if n := processed(t, b.cfg.DB); n != 20 {
		t.Fatalf("the standby's copy holds %d: it consumed without the 10 applied out of the log", n)
	}
	b.halt()
}

// A plain run restarted with other flags (another --deadline, so another
// lease TTL) while its predecessor's key is still there (SIGKILLed, or a
// stop whose release was lost) waits the key out and consumes, as it
// does for a key of its own timing; a live holder of another timing is
// still refused, naming both. Before, it was refused at once (the
// nemesis's flags step under CI's load).
func TestAPlainRunWaitsOutADeadRunOfAnotherTiming(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	other := quickPlan
	other.Deadline = 2 * time.Second
	holder := func(name string) *changelog.Lease {
		l, err := changelog.OpenLease(t.Context(), js, "S", "d", name, LeaseTTL(other.WithDefaults().AckWait()), 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Acquire(t.Context()); err != nil {
			t.Fatal(err)
		}
		return l
	}
	cfg := testConfig(t, t.TempDir())
	cfg.NATS, cfg.Consumer.Plan = &natsconn.Config{URL: srv.ClientURL()}, quickPlan

	// A live holder of another timing: refused once two of its TTLs passed.
	live := holder("live:1")
	keepCtx, stopKeeping := context.WithCancel(t.Context())
	kept := make(chan error, 1)
	go func() { kept <- live.Keep(keepCtx) }()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var te *changelog.TimingError
	if err := Run(ctx, cfg); !errors.As(err, &te) || te.Holder != "live:1" {
		t.Fatalf("a run beside a live holder of another timing: %v, want its TimingError", err)
	}
	stopKeeping()
	if err := <-kept; err != nil {
		t.Fatalf("the live holder lost its lease: %v", err)
	}

	holder("killed:1") // never renewed, never released
	ctxB, stopB := context.WithCancel(t.Context())
	doneB := make(chan error, 1)
	go func() { doneB <- Run(ctxB, cfg) }()
	publish(t, js, 0, 10)
	consumertest.Eventually(t, time.Minute, "the run of new flags, once the dead run's key expired, commits", func() bool { return processed(t, cfg.DB) == 10 })
	stopB()
	if err := <-doneB; err != nil {
		t.Fatalf("the run of new flags: %v", err)
	}
}
