package changelog_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The changelog stream and the lease bucket are deleted together under a
// live owner A (helper-15's attack). A fresh run C (an empty disk) takes
// the key at once, restores the snapshot and begins the new log. A, which
// has not yet renewed (its next renewal is up to a quarter of its TTL
// away), writes its batch in hand. Its entry names the stream and the
// sequence it follows, and the new log of the same name may have reached
// that sequence: the message id it follows (Nats-Expected-Last-Msg-Id)
// is what refuses it. A commits nothing once C owns the partition, and C,
// the owner, is not fenced by it. Both with A's last entry known to its
// Log (it wrote one before the deletion) and read anew.
func TestAnOldOwnersEntryNeverLandsInTheNewLogOfItsName(t *testing.T) {
	t.Parallel()
	for _, wrote := range []bool{false, true} {
		t.Run(map[bool]string{false: "read", true: "known"}[wrote], func(t *testing.T) {
			t.Parallel()
			oldOwnerAfterTheLogIsMadeAgain(t, wrote)
		})
	}
}

func oldOwnerAfterTheLogIsMadeAgain(t *testing.T, wrote bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, s)
	dir := t.TempDir()
	cfg := changelog.Config{Stream: "PAY", Durable: "pay-p0"}
	ttl := 40 * time.Second // A renews every 10 s: C's start fits between

	logA := ensure(t, js, cfg)
	leaseA, err := changelog.OpenLease(ctx, js, "PAY", "pay-p0", "host-a", ttl, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := leaseA.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	a := openLedger(t, filepath.Join(dir, "a.db"), logA.Owned(leaseA))
	if err := changelog.Own(ctx, logA, leaseA, a); err != nil {
		t.Fatal(err)
	}
	keepCtx, stopKeeping := context.WithCancel(ctx)
	kept := make(chan error, 1)
	go func() { kept <- leaseA.Keep(keepCtx) }()
	defer func() { stopKeeping(); <-kept }()
	budget := ledger.Budget{Work: time.Minute}
	if wrote {
		if _, err := a.ApplyBatch(ctx, batch(100, 5, 0), credit, budget); err != nil {
			t.Fatal(err)
		}
	}
	_, before := balance(t, a)
	posA, _ := a.ChangelogPosition(ctx)
	t.Logf("A owns %s at entry %d", posA.Log, posA.Seq)

	// An operator deletes both.
	name, _ := changelog.Names("PAY", "pay-p0")
	if err := js.DeleteStream(ctx, name); err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteKeyValue(ctx, changelog.LeaseBucket); err != nil {
		t.Fatal(err)
	}

	// A fresh run C, on an empty disk.
	logC := ensure(t, js, cfg)
	leaseC, err := changelog.OpenLease(ctx, js, "PAY", "pay-p0", "host-c", ttl, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := leaseC.Acquire(ctx); err != nil {
		t.Skipf("C could not take the lease at once (%v): the attack's premise does not hold here", err)
	}
	fileC := filepath.Join(dir, "c.db")
	if _, err := logC.Prepare(ctx, fileC); err != nil {
		t.Skipf("C's copy may not begin the new log (%v): the attack's premise does not hold here", err)
	}
	c := openLedger(t, fileC, logC.Owned(leaseC))
	if err := changelog.Own(ctx, logC, leaseC, c); err != nil {
		t.Fatalf("C's take-over: %v", err)
	}
	for range posA.Seq - 1 { // C's log reaches A's position: its sequence alone would let A's entry in
		if _, err := c.ApplyBatch(ctx, batch(200, 1, 0), credit, ledger.Budget{Work: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	posC, _ := c.ChangelogPosition(ctx)
	t.Logf("C owns %s at entry %d; A still holds its lease in its own view: %t", posC.Log, posC.Seq, leaseA.Held())

	// A's batch in hand (as at a stop: a begun write goes on).
	_, errA := a.ApplyBatch(ctx, batch(0, 5, 0), credit, budget)
	_, errC := c.ApplyBatch(ctx, batch(5, 5, 0), credit, budget)
	stream, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := stream.Info(ctx)
	t.Logf("A's batch after C took over: %v; C's batch: %v; the new log's last entry %d", errA, errC, info.State.LastSeq)
	if errA == nil {
		if amt, n := balance(t, a); n > before {
			t.Errorf("A committed (and would acknowledge) a batch after C began the new log and owned the partition: A holds %d messages (balance %d)", n, amt)
		}
	}
	if errC != nil {
		t.Errorf("C, the partition's owner, was fenced by the old owner's entry in its log: %v", errC)
	}
}

// Attack (scenario: a standby takes over while the old owner's stopped
// write is completing). The owner A begins a write (an outbox claim,
// through ledger's write: begun, it goes on beyond the stop); its publish
// to the log is held on the wire (a proxy holds A's connection, so its
// lease renewals are held too), and A is stopped meanwhile. A's lease
// runs out, the standby B takes the partition over and writes its own
// entry; then A's held publish reaches the server. Promise: A's entry
// lands nowhere after B's take-over point (the log refuses it), A commits
// nothing, B's copy holds no claim of A's, and B goes on owning.
func TestAttack2AStoppedWriteCompletingAfterTheTakeOverIsFenced(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := consumertest.RunServer(t)
	_, jsB := consumertest.Connect(t, s)
	var armed atomic.Bool
	held, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	letGo := func() { releaseOnce.Do(func() { close(release) }) }
	proxy := consumertest.NewProxy(t, strings.TrimPrefix(s.ClientURL(), "nats://"), consumertest.ProxyHooks{
		Before: func(up bool, _ int64, data []byte) consumertest.Verdict {
			if up && armed.Load() && bytes.Contains(data, []byte("_JETLEDGER.changelog.")) && armed.CompareAndSwap(true, false) {
				close(held)
				<-release
			}
			return consumertest.Pass
		},
	})
	t.Cleanup(letGo)
	ncA, err := nats.Connect(proxy.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer ncA.Close()
	jsA, err := jetstream.New(ncA)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := changelog.Config{Stream: "PAY", Durable: "pay-p0"}
	ttl := 2 * time.Second

	logA := ensure(t, jsA, cfg)
	leaseA, err := changelog.OpenLease(ctx, jsA, "PAY", "pay-p0", "host-a", ttl, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := leaseA.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	a := openLedger(t, filepath.Join(dir, "a.db"), logA.Owned(leaseA))
	if err := changelog.Own(ctx, logA, leaseA, a); err != nil {
		t.Fatal(err)
	}
	keepCtx, stopKeeping := context.WithCancel(context.Background())
	kept := make(chan error, 1)
	go func() { kept <- leaseA.Keep(keepCtx) }()
	budget := ledger.Budget{Work: time.Minute}
	if _, err := a.ApplyBatch(ctx, batch(0, 3, 0), credit, budget); err != nil {
		t.Fatal(err)
	}
	ids, err := a.Due(ctx, "hook", 1)
	if err != nil || len(ids) != 1 {
		t.Fatalf("due: %v %v", ids, err)
	}
	id := ids[0]

	logB := ensure(t, jsB, cfg)
	leaseB, err := changelog.OpenLease(ctx, jsB, "PAY", "pay-p0", "host-b", ttl, 1)
	if err != nil {
		t.Fatal(err)
	}
	fileB := filepath.Join(dir, "b.db")
	standby := make(chan error, 1)
	go func() { standby <- changelog.Standby(ctx, logB, leaseB, fileB, ledger.Config{}, nil) }()

	// A's claim, begun; its publish held on the wire; the stop lands.
	armed.Store(true)
	stopCtx, stop := context.WithCancel(ctx)
	claimed := make(chan error, 1)
	go func() {
		_, err := a.Transition(stopCtx, id, ledger.Claim, ledger.Params{Worker: "a#1", Lease: time.Minute})
		claimed <- err
	}()
	select {
	case <-held:
	case <-time.After(time.Minute):
		t.Fatal("A's claim was never published")
	}
	stop() // SIGTERM
	held0 := time.Now()
	select {
	case err := <-standby:
		if err != nil {
			t.Fatalf("B's standby: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("B never took the partition over")
	}
	b := openLedger(t, fileB, logB.Owned(leaseB))
	if err := changelog.Own(ctx, logB, leaseB, b); err != nil {
		t.Fatalf("B's take-over: %v", err)
	}
	tookOver := time.Since(held0)
	letGo() // A's publish reaches the server now
	var claimErr error
	select {
	case claimErr = <-claimed:
	case <-time.After(time.Minute):
		t.Fatal("A's claim never ended")
	}
	stopKeeping()
	<-kept
	t.Logf("B took over %s after A's publish was held; A's claim then: %v", tookOver.Round(time.Millisecond), claimErr)
	if claimErr == nil {
		t.Errorf("A's claim, published after B took over, committed")
	}
	if it, err := a.Get(ctx, id); err != nil || it.Status != ledger.StatusQueued {
		t.Errorf("A's file: row %s is %s (%v), want queued (the claim rolled back)", id, it.Status, err)
	}
	if it, err := b.Get(ctx, id); err != nil || it.Status != ledger.StatusQueued || it.ClaimedBy != "" {
		t.Errorf("B's file: row %s is %s claimed by %q (%v): A's claim reached B's copy", id, it.Status, it.ClaimedBy, err)
	}
	if _, err := b.Transition(ctx, id, ledger.Claim, ledger.Params{Worker: "b#1", Lease: time.Minute}); err != nil {
		t.Errorf("B, the owner, cannot claim after A's late publish: %v", err)
	}
	if _, err := a.ApplyBatch(ctx, batch(3, 2, 0), credit, budget); err == nil {
		t.Errorf("A committed a batch after B took over")
	}
}
