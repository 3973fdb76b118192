package ledger_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

func TestPruneBounds(t *testing.T) {
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	noop := func(context.Context, *ledger.Tx, ledger.Delivery) error { return nil }
	apply := func(id string, stream string, seq uint64) {
		if _, err := st.ApplyBatch(ctx, []ledger.Delivery{{MessageID: id, Stream: stream, Sequence: seq, Subject: "s", Data: []byte(id)}}, noop); err != nil {
			t.Fatal(err)
		}
	}
	apply("old-gone", "S", 1) // old, no longer in the stream: prunable
	apply("old-kept", "S", 5) // old, still in the stream (first seq 5)
	apply("other", "T", 1)    // another stream
	mu.Lock()
	now = now.Add(8 * 24 * time.Hour)
	mu.Unlock()
	apply("young", "S", 2) // below first seq, but younger than the retention

	if _, err := st.Prune(ctx, ledger.PruneOptions{Stream: "S", FirstSeq: 5, DuplicateWindow: time.Hour, Retention: time.Minute}); !errors.Is(err, ledger.ErrUnsafePrune) {
		t.Fatalf("retention under the duplicate window: err = %v", err)
	}
	res, err := st.Prune(ctx, ledger.PruneOptions{Stream: "S", FirstSeq: 5, DuplicateWindow: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if res.Processed != 1 {
		t.Fatalf("pruned %d rows, want 1", res.Processed)
	}
	// The pruned id is a new message again; everything else is still a duplicate.
	rs, err := st.ApplyBatch(ctx, []ledger.Delivery{
		{MessageID: "old-kept", Stream: "S", Sequence: 5, Subject: "s", Data: []byte("old-kept")},
		{MessageID: "other", Stream: "T", Sequence: 1, Subject: "s", Data: []byte("other")},
		{MessageID: "young", Stream: "S", Sequence: 2, Subject: "s", Data: []byte("young")},
	}, noop)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if r.Outcome != ledger.Duplicate {
			t.Errorf("row %d: %v, want duplicate (not pruned)", i, r.Outcome)
		}
	}
}

func TestNewDatabaseHasIncrementalVacuum(t *testing.T) {
	st := openStore(t)
	var mode int
	if err := st.DB().QueryRow(`PRAGMA auto_vacuum`).Scan(&mode); err != nil || mode != 2 {
		t.Fatalf("auto_vacuum = %d, %v; want 2 (incremental)", mode, err)
	}
}
