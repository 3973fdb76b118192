package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

// A row queued with InsertLater is the message's work, inserted "as a
// handler's statements" (flushInserts) - but after the watchdog has been
// stopped and before the commit's own bound starts. A slow trigger on the
// queued row's table (a few seconds here; an unbounded one would hang the
// consumer for good, holding the writer) runs with no deadline at all, and
// the message is committed as Applied long past the batch deadline that
// AckWait is computed from. Inserted at once (savepoint batches after a
// failed flush), the same row is interrupted at the deadline and rolled
// back, as the README promises for a handler that outruns it.
func TestInsertLaterRowsRunUnderTheDeadline(t *testing.T) {
	t.Parallel()
	st := openEventsStore(t, false)
	n := 500 // 500³ rows counted: about 2.5 s
	if raceEnabled {
		n = 150 // the race detector slows SQLite about 60-fold
	}
	if _, err := st.DB().Exec(`CREATE TABLE big (x INTEGER); CREATE TABLE audit (n INTEGER);
		WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < ?) INSERT INTO big SELECT x FROM c;
		CREATE TRIGGER events_audit AFTER INSERT ON events BEGIN
			INSERT INTO audit SELECT count(*) FROM big a, big b, big c;
		END`, n); err != nil {
		t.Fatal(err)
	}
	const work = 100 * time.Millisecond
	start := time.Now()
	rs, err := st.ApplyBatch(context.Background(), []ledger.Delivery{delivery("m1", 1, "x")}, recordEvent, ledger.Budget{Work: work})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if took > work+time.Second || rs[0].Outcome != ledger.Failed {
		t.Fatalf("batch with a %s deadline took %s and its message is %v: the queued row's work ran without a deadline and committed",
			work, took.Round(time.Millisecond), rs[0].Outcome)
	}
}
