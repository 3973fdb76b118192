package ledger_test

import (
	"testing"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

// The sum of two partitions' ledgers: counts add up, the times span both,
// the schema version is the one that lags, the path is neither's.
func TestStatsAdd(t *testing.T) {
	t.Parallel()
	t1, t2, t3 := time.UnixMilli(1000), time.UnixMilli(2000), time.UnixMilli(3000)
	var sum ledger.Stats
	sum.Add(ledger.Stats{Path: "a-p0", SchemaVersion: 9, SizeBytes: 10, Processed: 2, Conflicts: 1, DeadLetters: 3, Oldest: t2, Newest: t2})
	sum.Add(ledger.Stats{Path: "a-p1", SchemaVersion: 8, SizeBytes: 5, Processed: 1, DeadLetters: 1, Oldest: t1, Newest: t3})
	sum.Add(ledger.Stats{Path: "a-p2", SchemaVersion: 9, SizeBytes: 1}) // empty: no times
	want := ledger.Stats{SchemaVersion: 8, SizeBytes: 16, Processed: 3, Conflicts: 1, DeadLetters: 4, Oldest: t1, Newest: t3}
	if sum != want {
		t.Fatalf("sum\n got %+v\nwant %+v", sum, want)
	}
}
