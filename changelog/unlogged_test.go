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

// A pipelined batch commits before its entry is in the log. Fenced meanwhile
// (a standby took over and wrote the entry's place), Durable fails with
// ErrNotChangelogOwner, so none of it is acknowledged; the old owner then
// writes nothing, and catching up with the log undoes the batch before it
// applies the new owner's entry: its file is the new owner's again, as if
// the batch had never been. No snapshot is made of it meanwhile. Its file closed before it catches up (a crash),
// the next run's Prepare undoes it as well. A batch whose entry landed is
// kept by both.
func TestAPipelinedBatchWhoseEntryNeverLandedIsUndone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, s)
	dir := t.TempDir()
	cfg := changelog.Config{Stream: "PAY", Durable: "pay-p0", MaxEntry: 8 << 10}
	log := ensure(t, js, cfg)
	ownerFile := filepath.Join(dir, "a.db")
	owner := openLedger(t, ownerFile, log)
	if err := owner.TakeOver(ctx, log.Instance(), "a", 0, 0); err != nil {
		t.Fatal(err)
	}
	budget := ledger.Budget{Work: time.Minute}
	if err := pipelinedBatch(owner, 0, 10); err != nil {
		t.Fatal(err)
	}
	log2 := ensure(t, js, cfg)
	standby := openLedger(t, filepath.Join(dir, "b.db"), log2)
	applied, last, err := log2.CatchUp(ctx, standby)
	if err != nil || applied != last {
		t.Fatalf("catch up: %d of %d, %v", applied, last, err)
	}
	if err := standby.TakeOver(ctx, log2.Instance(), "b", applied, last); err != nil {
		t.Fatal(err)
	}
	if err := pipelinedBatch(standby, 100, 3); err != nil {
		t.Fatal(err)
	}
	err = pipelinedBatch(owner, 10, 5)
	if !errors.Is(err, changelog.ErrFenced) || !errors.Is(err, ledger.ErrNotChangelogOwner) {
		t.Fatalf("the old owner's pipelined batch after the take-over: Durable = %v, want ErrFenced", err)
	}
	if a, n := balance(t, owner); a != 15 || n != 15 {
		t.Fatalf("the old owner's file before it catches up: balance %d, %d rows; want the fenced batch committed (15, 15)", a, n)
	}
	if _, err := owner.ApplyBatch(ctx, batch(20, 1, 0), credit, budget); !errors.Is(err, ledger.ErrNotChangelogOwner) {
		t.Fatalf("a write of the fenced owner: %v, want ErrNotChangelogOwner", err)
	}
	if seq, err := log.Snapshot(ctx, owner); !errors.Is(err, changelog.ErrFenced) {
		t.Fatalf("a snapshot of the file holding the fenced batch: entry %d, %v; want ErrFenced, nothing stored", seq, err)
	}
	if _, _, err := log.CatchUp(ctx, owner); err != nil {
		t.Fatal(err)
	}
	if a, n := balance(t, owner); a != 13 || n != 13 {
		t.Fatalf("the old owner caught up: balance %d, %d rows; want the new owner's (13, 13), the fenced batch undone", a, n)
	}
	if a, n := balance(t, standby); a != 13 || n != 13 {
		t.Fatalf("the new owner: balance %d, %d rows", a, n)
	}

	// The old owner takes the log back, and the other is fenced in turn:
	// its file closed before it catches up (a crash), the next run's
	// Prepare undoes its batch; the batch that landed is kept.
	applied, last, err = log.CatchUp(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	if err := owner.TakeOver(ctx, log.Instance(), "a", applied, last); err != nil {
		t.Fatal(err)
	}
	if err := pipelinedBatch(owner, 200, 4); err != nil {
		t.Fatal(err)
	}
	if err := pipelinedBatch(standby, 300, 6); !errors.Is(err, changelog.ErrFenced) {
		t.Fatalf("the fenced standby's batch: %v", err)
	}
	for _, st := range []*ledger.Store{owner, standby} {
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{ownerFile, filepath.Join(dir, "b.db")} {
		l := ensure(t, js, cfg)
		if _, err := l.Prepare(ctx, f); err != nil {
			t.Fatalf("prepare %s: %v", f, err)
		}
		st := openLedger(t, f, l)
		if _, _, err := l.CatchUp(ctx, st); err != nil {
			t.Fatal(err)
		}
		if a, n := balance(t, st); a != 17 || n != 17 {
			t.Fatalf("%s after a restart: balance %d, %d rows; want 17 and 17: the landed batch kept, the fenced one undone", f, a, n)
		}
		if _, ok, err := st.Unlogged(ctx); ok || err != nil {
			t.Fatalf("%s still has an unlogged batch (%v)", f, err)
		}
	}
}

// The log deleted while the owner's pipelined batch was on its way, and
// begun again by the standby's host from the entry before that batch: the
// owner's host, started again, undoes the batch (its entry reached no log,
// and the new one began without it), restores the new log's snapshot and
// follows. Kept, the batch would be "entries no log holds" and the host
// would wait for a person.
func TestABatchOfALogMadeAgainWithoutItIsUndone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, s)
	dir := t.TempDir()
	cfg := changelog.Config{Stream: "PAY", Durable: "pay-p0"}
	aFile, bFile := filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")
	log := ensure(t, js, cfg)
	owner := openLedger(t, aFile, log)
	if err := owner.TakeOver(ctx, log.Instance(), "a", 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := pipelinedBatch(owner, 0, 10); err != nil {
		t.Fatal(err)
	}
	standby := openLedger(t, bFile, ensure(t, js, cfg))
	if _, _, err := log.CatchUp(ctx, standby); err != nil {
		t.Fatal(err)
	}
	standby.Close()
	name, _ := changelog.Names("PAY", "pay-p0")
	if err := js.DeleteStream(ctx, name); err != nil {
		t.Fatal(err)
	}
	if err := pipelinedBatch(owner, 10, 5); err == nil {
		t.Fatal("a batch whose log was deleted under it is durable")
	}
	owner.Close()

	// The standby's host begins the log made again, from its copy.
	logB := ensure(t, js, cfg)
	if begin, err := logB.Prepare(ctx, bFile); err != nil || !begin {
		t.Fatalf("the standby's copy beginning the log made again: %v, %v", begin, err)
	}
	stB := openLedger(t, bFile, logB)
	if err := stB.TakeOver(ctx, logB.Instance(), "b", 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := logB.Snapshot(ctx, stB); err != nil {
		t.Fatal(err)
	}

	// The owner's host, started again on its file.
	logA := ensure(t, js, cfg)
	if _, err := logA.Prepare(ctx, aFile); err != nil {
		t.Fatalf("the owner's file, holding a batch the new log began without: %v; want it undone and the snapshot restored", err)
	}
	stA := openLedger(t, aFile, logA)
	if _, _, err := logA.CatchUp(ctx, stA); err != nil {
		t.Fatal(err)
	}
	if a, n := balance(t, stA); a != 10 || n != 10 {
		t.Fatalf("the owner's host after the log was made again: balance %d, %d rows; want the new log's 10 and 10", a, n)
	}
}

// pipelinedBatch applies messages from..from+n to st as run does
// (ApplyBatchPipelined) and waits for the batch's Durable.
func pipelinedBatch(st *ledger.Store, from, n int) error {
	ctx := context.Background()
	_, p, err := st.ApplyBatchPipelined(ctx, batch(from, n, 0), credit, ledger.Budget{Work: time.Minute})
	if err != nil {
		return err
	}
	return p.Durable(ctx)
}
