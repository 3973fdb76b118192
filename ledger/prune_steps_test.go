package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

// Beside quick batches (here none: a batch's hold lately is nothing) a
// prune's steps are sized for a few milliseconds, whatever Hold allows:
// steps sized for a 25 ms hold took the same share of the writer in
// longer bursts, and the slowest batches beside a prune of 10M rows
// waited behind them (p99 2.4x, against 1.4x; BENCHMARKS.md). The
// figure itself is the bench's, never a timed test's: this checks the
// steps' size, which sized for Hold averaged 6 ms or more.
func TestAPruneBesideQuickBatchesTakesShortSteps(t *testing.T) {
	if raceEnabled {
		t.Skip("under the race detector a slice of 16 ids alone can take milliseconds; the sizing is the same")
	}
	st, clock := openAgingStore(t)
	rows := 100_000
	fillPrunable(t, st, clock, rows)
	res, err := st.Prune(context.Background(), ledger.PruneOptions{Stream: "S", FirstSeq: uint64(rows) + 1, Hold: 25 * time.Millisecond})
	if err != nil || res.Processed != int64(rows) {
		t.Fatalf("prune: %+v, %v; want %d rows", res, err, rows)
	}
	mean := res.Held / time.Duration(res.Steps)
	t.Logf("%d rows in %d steps, %s held, %s a step", res.Processed, res.Steps, res.Held.Round(time.Millisecond), mean.Round(10*time.Microsecond))
	if mean > 5*time.Millisecond {
		t.Errorf("prune steps held the writer %s each on average, want them sized for about 4 ms (at most half of it, as a rule) beside quick batches", mean)
	}
}
