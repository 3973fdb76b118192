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

// An owner whose log was deleted, which kept its lease's key (Retain) and
// took it again right after (Resumed), begins the new log without marking
// its queued rows maybe sent, but only from the file that stands where it
// last said it stood (RecordOwner): a record elsewhere (a copy restored
// since, a record that failed) keeps them marked.
func TestTheSoleWriterBeginsTheNewLogOnlyFromTheFileItLeft(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		behind uint64 // the record says this many entries less than the file
		marked bool
	}{{"where-it-said", 0, false}, {"record-elsewhere", 1, true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := beginAfterDeletion(t, c.behind); (got > 0) != c.marked {
				t.Fatalf("%d queued rows marked maybe sent, want marked: %v", got, c.marked)
			}
		})
	}
}

// beginAfterDeletion owns a log with queued rows, records its position
// (less behind), has the log deleted, and begins the new log with the
// lease taken again; it returns the queued rows marked maybe sent.
func beginAfterDeletion(t *testing.T, behind uint64) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, js := consumertest.Connect(t, consumertest.RunServer(t))
	cfg := changelog.Config{Stream: "PAY", Durable: "pay-p0"}
	file := filepath.Join(t.TempDir(), "a.db")
	logA := ensure(t, js, cfg)
	lease, err := changelog.OpenLease(ctx, js, "PAY", "pay-p0", "host-a", 30*time.Second, 1)
	if err == nil {
		err = lease.Acquire(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	a := openLedger(t, file, logA.Owned(lease))
	if err := changelog.Own(ctx, logA, lease, a); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ApplyBatch(ctx, batch(0, 5, 0), credit, ledger.Budget{Work: time.Minute}); err != nil {
		t.Fatal(err)
	}
	pos, err := a.ChangelogPosition(ctx)
	if err == nil {
		pos.Seq -= behind
		err = logA.RecordOwner(ctx, "host-a", pos)
	}
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	lease.Retain() // the run lost its log: the key stays as it is
	lease.Release()
	name, _ := changelog.Names("PAY", "pay-p0")
	if err := js.DeleteStream(ctx, name); err != nil {
		t.Fatal(err)
	}
	if err := lease.Acquire(ctx); err != nil || !lease.Resumed() {
		t.Fatalf("the lease taken again: %v, resumed %v", err, lease.Resumed())
	}
	logB := ensure(t, js, cfg)
	b := openLedger(t, file, logB.Owned(lease))
	if err := changelog.Own(ctx, logB, lease, b); err != nil {
		t.Fatal(err)
	}
	var marked int
	if err := b.DB().QueryRow(`SELECT count(*) FROM outbox WHERE status = 'queued' AND maybe_sent = 1`).Scan(&marked); err != nil {
		t.Fatal(err)
	}
	return marked
}
