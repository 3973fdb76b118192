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
	logA, err := changelog.Ensure(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	leaseA, err := changelog.OpenLease(ctx, js, "PAY", "pay-p0", "host-a", ttl, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := leaseA.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	fileA := filepath.Join(dir, "a.db")
	a := openLedger(t, fileA, logA)
	if err := changelog.Own(ctx, logA, leaseA, a); err != nil {
		t.Fatal(err)
	}
	if _, err := logA.Snapshot(ctx, a); err != nil {
		t.Fatal(err)
	}
	keepCtx, stopKeeping := context.WithCancel(ctx)
	kept := make(chan error, 1)
	go func() { kept <- leaseA.Keep(keepCtx) }()
	budget := ledger.Budget{Work: time.Minute}
	if _, err := a.ApplyBatch(ctx, batch(0, 20, 0), credit, budget); err != nil {
		t.Fatal(err)
	}

	logB, err := changelog.Ensure(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
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

// owning opens durable's log and a lease of host on it, and, for a
// ledger at file (when not ""), takes the lease and the log over and
// commits n messages.
func owning(t *testing.T, ctx context.Context, js jetstream.JetStream, durable, host, file string, n int) (*changelog.Log, *changelog.Lease, *ledger.Store) {
	t.Helper()
	log, err := changelog.Ensure(ctx, js, changelog.Config{Stream: "PAY", Durable: durable})
	if err != nil {
		t.Fatal(err)
	}
	lease, err := changelog.OpenLease(ctx, js, "PAY", durable, host, 2*time.Second, 1)
	if err != nil || file == "" {
		return log, lease, nil
	}
	if err := lease.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	st := openLedger(t, file, log)
	if err := changelog.Own(ctx, log, lease, st); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ApplyBatch(ctx, batch(0, n, 0), credit, ledger.Budget{Work: time.Minute}); err != nil {
		t.Fatal(err)
	}
	return log, lease, st
}

// A standby that starts before the owner's first snapshot waits for it
// (a copy begun from the log alone would lack the owner's tables), then
// holds what the owner committed; one whose owner is lost before any
// snapshot takes the lease with no copy, for the new owner's ledger to
// catch up from the log's start.
func TestStandbyWaitsForTheFirstSnapshot(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, s)
	dir := t.TempDir()
	log, leaseA, a := owning(t, ctx, js, "pay-p0", "host-a", filepath.Join(dir, "a.db"), 10)
	_, leaseB, _ := owning(t, ctx, js, "pay-p0", "host-b", "", 0)
	fileB := filepath.Join(dir, "b.db")
	keepCtx, stopKeeping := context.WithCancel(ctx)
	kept := make(chan error, 1)
	go func() { kept <- leaseA.Keep(keepCtx) }()
	standby := make(chan error, 1)
	go func() { standby <- changelog.Standby(ctx, log, leaseB, fileB, ledger.Config{}, nil) }()
	consumertest.Eventually(t, 10*time.Second, "the standby waiting, with no copy", func() bool {
		_, err := os.Stat(fileB)
		return errors.Is(err, os.ErrNotExist)
	})
	if _, err := log.Snapshot(ctx, a); err != nil {
		t.Fatal(err)
	}
	consumertest.Eventually(t, 10*time.Second, "the copy restored", func() bool {
		_, err := os.Stat(fileB)
		return err == nil
	})
	stopKeeping() // released: the standby takes over
	<-kept
	if err := <-standby; err != nil {
		t.Fatal(err)
	}
	b := openLedger(t, fileB, log)
	if amount, n := balance(t, b); amount != 10 || n != 10 {
		t.Fatalf("the standby's copy holds balance %d, %d rows; want 10, 10", amount, n)
	}
	b.Close()

	// A second partition whose owner goes before its first snapshot.
	log2, _, _ := owning(t, ctx, js, "pay-p1", "host-a", filepath.Join(dir, "a1.db"), 5)
	_, lease2, _ := owning(t, ctx, js, "pay-p1", "host-b", "", 0)
	file2 := filepath.Join(dir, "b1.db")
	if err := changelog.Standby(ctx, log2, lease2, file2, ledger.Config{}, nil); err != nil { // the TTL lets host-a's key go
		t.Fatal(err)
	}
	if _, err := os.Stat(file2); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a standby that took over before any snapshot made a copy: %v", err)
	}
	b1 := openLedger(t, file2, log2)
	if err := changelog.Own(ctx, log2, lease2, b1); err != nil {
		t.Fatal(err)
	}
	if amount, n := balance(t, b1); amount != 5 || n != 5 {
		t.Fatalf("the new owner caught up from the log's start holds balance %d, %d rows; want 5, 5", amount, n)
	}
}
