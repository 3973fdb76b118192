package changelog_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// An owner that stops renewing (paused, or its host gone with its files)
// loses the partition to the standby within the lease's TTL; the standby
// holds everything the owner committed, and the old owner, going on as
// if nothing happened, commits nothing more.
func TestStandbyTakesOverFromALostOwner(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, s)
	dir := t.TempDir()
	cfg := changelog.Config{Stream: "PAY", Durable: "pay-p0"}
	ttl := 2 * time.Second
	_, leaseA, a := ownedWithSnapshot(t, ctx, js, cfg, filepath.Join(dir, "a.db"), "host-a", ttl)
	keepCtx, stopKeeping := context.WithCancel(ctx)
	kept := make(chan error, 1)
	go func() { kept <- leaseA.Keep(keepCtx) }()
	budget := ledger.Budget{Work: time.Minute}
	if _, err := a.ApplyBatch(ctx, batch(0, 20, 0), credit, budget); err != nil {
		t.Fatal(err)
	}

	logB := ensure(t, js, cfg)
	leaseB, err := changelog.OpenLease(ctx, js, "PAY", "pay-p0", "host-b", ttl, 1)
	if err != nil {
		t.Fatal(err)
	}
	fileB := filepath.Join(dir, "b.db")
	var lags []uint64
	standby := make(chan error, 1)
	go func() {
		standby <- changelog.Standby(ctx, logB, leaseB, fileB, ledger.Config{}, func(n uint64) { lags = append(lags, n) })
	}()
	if _, err := a.ApplyBatch(ctx, batch(20, 20, 0), credit, budget); err != nil {
		t.Fatal(err)
	}
	// The owner's host is lost: it renews no more. (Its ledger stays open
	// here, as a paused owner's would, to try to write once it is taken.)
	lost := time.Now()
	stopKeeping()
	<-kept
	if err := leaseA.Acquire(ctx); err != nil { // Keep let go on its stop; a lost host never does: take it back, renewed never again
		t.Fatal(err)
	}
	if err := <-standby; err != nil {
		t.Fatal(err)
	}
	took := time.Since(lost)
	// The owner's first batch was in the log before the standby first
	// looked, and nothing came in its last looks before the take-over.
	if len(lags) == 0 || lags[0] < 1 || lags[len(lags)-1] != 0 {
		t.Fatalf("the standby's lag reports %v: want the entries it found behind the snapshot first, 0 last", lags)
	}
	if took > ttl+3*time.Second {
		t.Fatalf("the standby took %v to take over, want within the TTL (%v) and a little", took, ttl)
	}
	b := openLedger(t, fileB, logB)
	if err := changelog.Own(ctx, logB, leaseB, b); err != nil {
		t.Fatal(err)
	}
	if a1, n := balance(t, b); a1 != 40 || n != 40 {
		t.Fatalf("the new owner holds balance %d and %d rows, want 40 and 40", a1, n)
	}
	_, err = a.ApplyBatch(ctx, batch(40, 5, 0), credit, budget)
	if !errors.Is(err, changelog.ErrFenced) {
		t.Fatalf("the old owner's batch after the take-over: %v, want ErrFenced", err)
	}
	rs, err := b.ApplyBatch(ctx, batch(30, 15, 0), credit, budget)
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Outcome != ledger.Duplicate || rs[14].Outcome != ledger.Applied {
		t.Fatalf("the new owner's first batch: %v", rs)
	}
	if a1, _ := balance(t, b); a1 != 45 {
		t.Fatalf("balance %d, want 45", a1)
	}
	t.Logf("take-over %v after the owner's last renewal stopped (TTL %v); the standby's lag at its first look %d", took.Round(time.Millisecond), ttl, lags[0])
}

// ownedWithSnapshot makes owner the owner of cfg's partition on a ledger
// at file, its snapshot stored: the log, the lease held, the store.
func ownedWithSnapshot(t *testing.T, ctx context.Context, js jetstream.JetStream, cfg changelog.Config, file, owner string, ttl time.Duration) (*changelog.Log, *changelog.Lease, *ledger.Store) {
	t.Helper()
	log := ensure(t, js, cfg)
	lease := openLease(t, js, cfg.Durable, owner, ttl)
	if err := lease.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	st := openLedger(t, file, log)
	if err := changelog.Own(ctx, log, lease, st); err != nil {
		t.Fatal(err)
	}
	if _, err := log.Snapshot(ctx, st); err != nil {
		t.Fatal(err)
	}
	return log, lease, st
}

// An owner that begins the log stores its snapshot before Own returns;
// while it cannot (here its snapshot bucket answers nothing) Own does not
// return, so nothing is consumed. Once that owner is gone a standby does
// not take the partition over from the log alone, which lacks the rows
// the owner's file held before (a plain ledger joining its log): it
// waits, saying why. (An owner whose file held nothing says so before
// its take-over: TestAFreshStandbyTakesOverALogWhoseFirstOwnerWasLost….)
func TestNoTakeOverWithoutASnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, s)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OBJ_" + changelog.SnapshotBucket, Subjects: []string{"nothing.here"}}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	log := ensure(t, js, changelog.Config{Stream: "PAY", Durable: "pay-p0"})
	leaseA, err := changelog.OpenLease(ctx, js, "PAY", "pay-p0", "host-a", 2*time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := leaseA.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	plain := openLedger(t, filepath.Join(dir, "a.db"), nil)
	if _, err := plain.ApplyBatch(ctx, batch(0, 5, 0), credit, ledger.Budget{Work: time.Minute}); err != nil {
		t.Fatal(err)
	}
	plain.Close()
	a := openLedger(t, filepath.Join(dir, "a.db"), log)
	ownCtx, cancelOwn := context.WithTimeout(ctx, 3*time.Second)
	defer cancelOwn()
	if err := changelog.Own(ownCtx, log, leaseA, a); err == nil {
		t.Fatal("Own returned with no snapshot stored")
	}
	leaseB, err := changelog.OpenLease(ctx, js, "PAY", "pay-p0", "host-b", 2*time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	fileB := filepath.Join(dir, "b.db")
	sbCtx, cancelStandby := context.WithTimeout(ctx, 5*time.Second) // past host-a's TTL
	defer cancelStandby()
	if err := changelog.Standby(sbCtx, log, leaseB, fileB, ledger.Config{}, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the standby of an owner gone before its first snapshot: %v, want it still waiting", err)
	}
	if _, err := os.Stat(fileB); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the standby made a copy without a snapshot: %v", err)
	}
	if holder, err := leaseB.Holder(ctx); err != nil || holder != "" {
		t.Fatalf("the lease is held by %q (%v): the standby took the partition over from the log alone", holder, err)
	}
}
