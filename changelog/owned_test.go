package changelog_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// An owner whose batch's entry is stored only after its lease ended (the
// owner paused, or its network held, mid-publish) rolls the batch back:
// it commits nothing, while the log keeps the entry and a standby holds
// it. With the lease ended nothing more is published.
func TestAnOwnerPastItsLeaseCommitsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := consumertest.RunServer(t)
	var lease *changelog.Lease
	var hold atomic.Bool
	p := consumertest.NewProxy(t, s.Addr().String(), consumertest.ProxyHooks{Before: func(up bool, _ int64, data []byte) consumertest.Verdict {
		if up && hold.Load() && bytes.Contains(data, []byte("_JETLEDGER.changelog.")) {
			for lease.Held() {
				time.Sleep(5 * time.Millisecond) // the fault: the entry waits out the lease on the wire
			}
		}
		return consumertest.Pass
	}})
	nc, err := nats.Connect(p.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := changelog.Config{Stream: "PAY", Durable: "pay-p0"}
	log := ensure(t, js, cfg)
	if lease, err = changelog.OpenLease(ctx, js, "PAY", "pay-p0", "a", time.Second, 1); err != nil {
		t.Fatal(err)
	}
	if err := lease.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	owner := openLedger(t, filepath.Join(dir, "a.db"), log.Owned(lease))
	if err := owner.TakeOver(ctx, log.Instance(), "a", 0, 0); err != nil {
		t.Fatal(err)
	}
	hold.Store(true)
	_, err = owner.ApplyBatch(ctx, batch(0, 10, 0), credit, ledger.Budget{Work: time.Minute})
	if !errors.Is(err, changelog.ErrLeaseLost) || !errors.Is(err, ledger.ErrNotChangelogOwner) {
		t.Fatalf("a batch whose entry landed after the lease: %v, want ErrLeaseLost", err)
	}
	if a, n := balance(t, owner); a != 0 || n != 0 {
		t.Fatalf("the owner committed past its lease: balance %d, %d rows", a, n)
	}
	last, err := log.Last(ctx)
	if err != nil || last != 2 {
		t.Fatalf("the log's last entry: %d (%v), want 2: the take-over and the batch", last, err)
	}
	standby := openLedger(t, filepath.Join(dir, "b.db"), log)
	if applied, _, err := log.CatchUp(ctx, standby); err != nil || applied != 2 {
		t.Fatalf("the standby's catch-up: %d, %v", applied, err)
	}
	if a, n := balance(t, standby); a != 10 || n != 10 {
		t.Fatalf("the standby holds balance %d and %d rows, want the log's 10 and 10", a, n)
	}
	hold.Store(false)
	if err := log.Owned(lease).Append(ctx, 2, [][]byte{[]byte("x")}); !errors.Is(err, changelog.ErrLeaseLost) {
		t.Fatalf("an append with the lease ended: %v, want ErrLeaseLost", err)
	}
	if last, err := log.Last(ctx); err != nil || last != 2 {
		t.Fatalf("the log's last entry: %d (%v): an entry was published with the lease ended", last, err)
	}
}
