package changelog_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
)

// A standby's take that landed but whose answer was lost leaves the key
// naming the standby itself. Its next look must take the partition at
// once (the key is its own), not stand by for its own name until the
// TTL lets the key go (a gap found by ops_attack7's held answers).
func TestAStandbyTakesAtOnceAKeyItsOwnLostTakeWrote(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, s)
	dir := t.TempDir()
	cfg := changelog.Config{Stream: "PAY", Durable: "pay-p0"}
	ttl := 30 * time.Second
	_, leaseA, a := ownedWithSnapshot(t, ctx, js, cfg, filepath.Join(dir, "a.db"), "host-a", ttl)
	if _, err := a.ApplyBatch(ctx, batch(0, 20, 0), credit, ledger.Budget{Work: time.Minute}); err != nil {
		t.Fatal(err)
	}
	leaseA.Release() // the owner stopped
	// The standby's take landed; its answer never came back to it.
	landed := openLease(t, js, cfg.Durable, "host-b", ttl)
	if err := landed.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	leaseB := openLease(t, js, cfg.Durable, "host-b", ttl)
	began := time.Now()
	logB := ensure(t, js, cfg)
	if err := changelog.Standby(ctx, logB, leaseB, filepath.Join(dir, "b.db"), ledger.Config{}, nil); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > ttl/2 || !leaseB.Held() {
		t.Fatalf("the standby took %v to take a key its own take wrote (held %v), want well within the TTL %v", took, leaseB.Held(), ttl)
	}
}
