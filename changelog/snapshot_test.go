package changelog_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
)

// A lost owner's snapshot taken after the new owner's (the old owner
// paused mid-snapshot, or its snapshot loop not stopped yet when it
// wakes) is refused: replacing the newer snapshot, and trimming the log
// behind it, would leave a new standby needing entries the log no longer
// holds until the owner's next snapshot. A new standby restores the
// newer snapshot and applies the entries after it.
func TestAStaleOwnersSnapshotDoesNotBreakNewStandbys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, s)
	dir := t.TempDir()
	cfg := changelog.Config{Stream: "PAY", Durable: "pay-p0"}
	log := ensure(t, js, cfg)
	budget := ledger.Budget{Work: time.Minute}
	a := openLedger(t, filepath.Join(dir, "a.db"), log)
	if err := a.TakeOver(ctx, log.Instance(), "a", 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ApplyBatch(ctx, batch(0, 5, 0), credit, budget); err != nil {
		t.Fatal(err)
	}
	if _, err := log.Snapshot(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ApplyBatch(ctx, batch(5, 5, 0), credit, budget); err != nil {
		t.Fatal(err)
	}
	// b takes over from a's snapshot and the log
	bFile := filepath.Join(dir, "b.db")
	if ok, err := log.Restore(ctx, bFile); err != nil || !ok {
		t.Fatal(ok, err)
	}
	b := openLedger(t, bFile, log)
	applied, last, err := log.CatchUp(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.TakeOver(ctx, log.Instance(), "b", applied, last); err != nil {
		t.Fatal(err)
	}
	for i := 10; i < 40; i += 10 {
		if _, err := b.ApplyBatch(ctx, batch(i, 10, 0), credit, budget); err != nil {
			t.Fatal(err)
		}
		if _, err := log.Snapshot(ctx, b); err != nil { // at the take-over and on
			t.Fatal(err)
		}
	}
	// a, fenced, finishes the snapshot it was taking
	if _, err := a.ApplyBatch(ctx, batch(40, 1, 0), credit, budget); !errors.Is(err, ledger.ErrNotChangelogOwner) {
		t.Fatalf("a is fenced: %v", err)
	}
	seq, snapErr := log.Snapshot(ctx, a)
	t.Logf("the fenced owner's snapshot: seq %d, %v", seq, snapErr)
	// a new standby
	cFile := filepath.Join(dir, "c.db")
	if ok, err := log.Restore(ctx, cFile); err != nil || !ok {
		t.Fatal(ok, err)
	}
	c := openLedger(t, cFile, nil)
	if _, _, err := log.CatchUp(ctx, c); err != nil {
		t.Fatalf("a new standby, from the stored snapshot: %v", err)
	}
	if got, want := dumpAll(t, c), dumpAll(t, b); got != want {
		t.Fatalf("the new standby holds\n%s\nthe owner\n%s", got, want)
	}
}
