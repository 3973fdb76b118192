package changelog_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
)

// A partition that ran before without --changelog has a ledger with
// state when its first --changelog owner begins the log: the rows from
// before are in no entry. Own stores the snapshot before it returns, so
// when that owner is lost right after, the standby that takes over holds
// them (it failed before: the standby took over from the empty log).
func TestAMigratedLedgerIsInItsFirstSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, s)
	dir := t.TempDir()
	ownerFile := filepath.Join(dir, "a.db")
	budget := ledger.Budget{Work: time.Minute}
	{ // the partition's history without a changelog
		pre := openLedger(t, ownerFile, nil)
		if _, err := pre.ApplyBatch(ctx, batch(0, 10, 0), enqueueOnly, budget); err != nil {
			t.Fatal(err)
		}
		pre.Close()
	}
	log := ensure(t, js, changelog.Config{Stream: "PAY", Durable: "pay-p0"})
	ttl := time.Second
	leaseA, err := changelog.OpenLease(ctx, js, "PAY", "pay-p0", "a", ttl, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := leaseA.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	owner := openLedger(t, ownerFile, log.Owned(leaseA))
	if err := changelog.Own(ctx, log, leaseA, owner); err != nil {
		t.Fatalf("the first owner takes over its existing ledger: %v", err)
	}
	if _, err := owner.ApplyBatch(ctx, batch(10, 5, 0), enqueueOnly, budget); err != nil {
		t.Fatal(err)
	}
	want := dumpAll(t, owner)
	owner.Close() // lost: no snapshot was stored; its lease expires

	leaseB, err := changelog.OpenLease(ctx, js, "PAY", "pay-p0", "b", ttl, 1)
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	standbyFile := filepath.Join(dir, "b.db")
	if err := changelog.Standby(sctx, log, leaseB, standbyFile, ledger.Config{}, nil); err != nil {
		t.Logf("the standby: %v", err)
		return
	}
	next := openLedger(t, standbyFile, log.Owned(leaseB))
	if err := changelog.Own(ctx, log, leaseB, next); err != nil {
		t.Logf("the new owner refused to take over: %v (a clear error: held)", err)
		return
	}
	got := dumpAll(t, next)
	var o, n int
	owner2, _ := ledger.OpenExisting(ownerFile, ledger.Config{})
	owner2.DB().QueryRow(`SELECT count(*) FROM outbox`).Scan(&o)
	owner2.Close()
	next.DB().QueryRow(`SELECT count(*) FROM outbox`).Scan(&n)
	// Everything but the position, which the new owner's take-over moved on.
	if strip := func(d string) string { return d[:strings.LastIndex(strings.TrimSuffix(d, "\n"), "\n")] }; strip(got) != strip(want) {
		t.Fatalf("the new owner took over without error and holds %d outbox rows, the lost owner %d\nnew owner:\n%s\nlost owner:\n%s", n, o, got, want)
	}
}

// enqueueOnly is a handler that only inserts: every delivery's effect is
// an outbox row, no row of its own is ever updated.
func enqueueOnly(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
	_, err := tx.Enqueue(ctx, "hook", d.Data)
	return err
}
