package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

// agingClock is the ledger's clock in a test that ages its rows: the store
// reads it from its own goroutines while the test moves it on.
type agingClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *agingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *agingClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// openAgingStore opens a ledger whose clock starts at the wall clock and
// moves only when the test advances it.
func openAgingStore(tb testing.TB) (*ledger.Store, *agingClock) {
	tb.Helper()
	clock := &agingClock{now: time.Now()}
	st, err := ledger.Open(filepath.Join(tb.TempDir(), "l.db"), ledger.Config{Now: clock.Now})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return st, clock
}

func TestPruneBounds(t *testing.T) {
	t.Parallel()
	st, clock := openAgingStore(t)
	ctx := context.Background()
	apply := func(id string, stream string, seq uint64) {
		if _, err := st.ApplyBatch(ctx, []ledger.Delivery{{MessageID: id, Stream: stream, Sequence: seq, Subject: "s", Data: []byte(id)}}, noop, ledger.Budget{}); err != nil {
			t.Fatal(err)
		}
	}
	apply("old-gone", "S", 1) // old, no longer in the stream: prunable
	apply("old-kept", "S", 5) // old, still in the stream (first seq 5)
	apply("other", "T", 1)    // another stream
	clock.advance(8 * 24 * time.Hour)
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
	}, noop, ledger.Budget{})
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
	t.Parallel()
	st := openStore(t)
	var mode int
	if err := st.DB().QueryRow(`PRAGMA auto_vacuum`).Scan(&mode); err != nil || mode != 2 {
		t.Fatalf("auto_vacuum = %d, %v; want 2 (incremental)", mode, err)
	}
}

// Prune goes by the last sequence an id was seen at, not the first: a later
// copy (a provider's re-send after the duplicate window, or a conflicting
// reuse) still in the stream keeps the row, so a replay or a new durable
// meets it as a duplicate instead of applying it again.
func TestPruneKeepsRowsWhoseLaterCopyIsInTheStream(t *testing.T) {
	t.Parallel()
	st, clock := openAgingStore(t)
	ctx := context.Background()
	apply := func(id, data string, seq uint64) ledger.Outcome {
		t.Helper()
		rs, err := st.ApplyBatch(ctx, []ledger.Delivery{{MessageID: id, Stream: "S", Sequence: seq, Subject: "s", Data: []byte(data)}}, noop, ledger.Budget{})
		if err != nil {
			t.Fatal(err)
		}
		return rs[0].Outcome
	}
	apply("resent", "a", 1)
	apply("reused", "b", 2)
	apply("alone", "c", 3)
	if o := apply("resent", "a", 10); o != ledger.Duplicate {
		t.Fatalf("re-send: %v", o)
	}
	if o := apply("reused", "other payload", 11); o != ledger.Conflict {
		t.Fatalf("reuse: %v", o)
	}
	clock.advance(8 * 24 * time.Hour)
	// The stream dropped sequences 1-9; the copies at 10 and 11 remain.
	res, err := st.Prune(ctx, ledger.PruneOptions{Stream: "S", FirstSeq: 10, DuplicateWindow: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if res.Processed != 1 {
		t.Fatalf("pruned %d rows, want 1 (only 'alone')", res.Processed)
	}
	if o := apply("resent", "a", 10); o != ledger.Duplicate {
		t.Fatalf("replayed re-send after prune: %v, want duplicate", o)
	}
	if o := apply("reused", "other payload", 11); o != ledger.Conflict {
		t.Fatalf("replayed reuse after prune: %v, want conflict", o)
	}
}

// A prune of many rows holds the single writer only briefly at a time, so a
// batch waiting for it keeps its deadline (ackwait.Plan.PruneHold).
func TestPruneHoldsTheWriterBriefly(t *testing.T) {
	st, clock := openAgingStore(t)
	ctx := context.Background()
	rows := 300_000
	if raceEnabled {
		rows = 20_000
	}
	fillPrunable(t, st, clock, rows)
	// Meanwhile another writer (a batch, say) keeps asking for the writer.
	stop := make(chan struct{})
	longest := make(chan time.Duration, 1)
	go func() {
		var worst time.Duration
		defer func() { longest <- worst }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			began := time.Now()
			if _, err := st.DB().ExecContext(ctx, `UPDATE processed_messages SET subject = subject WHERE 0`); err != nil {
				t.Error(err)
				return
			}
			worst = max(worst, time.Since(began))
		}
	}()
	const hold = 20 * time.Millisecond
	began := time.Now()
	res, err := st.Prune(ctx, ledger.PruneOptions{Stream: "S", FirstSeq: uint64(rows) + 1, DuplicateWindow: time.Minute, Hold: hold})
	took := time.Since(began)
	close(stop)
	worst := <-longest
	if err != nil {
		t.Fatal(err)
	}
	if res.Processed != int64(rows) {
		t.Fatalf("pruned %d rows, want %d", res.Processed, rows)
	}
	t.Logf("longest wait for the writer during a prune of %s: %s", took, worst)
	// One DELETE of every row holds the writer for the whole prune; steps
	// let a waiting writer in many times over. Relative, so a slow machine
	// (or the race detector) does not make it flaky.
	if worst > took/4 && worst > 15*hold {
		t.Fatalf("a writer waited %s behind a prune of %s; each step may hold the writer about %s", worst, took, hold)
	}
}

// fillPrunable puts rows of stream S in st, seqs 1..rows, and ages them a
// month: all prunable below rows+1.
func fillPrunable(t *testing.T, st *ledger.Store, clock *agingClock, rows int) {
	t.Helper()
	at := clock.Now().UnixMilli()
	if _, err := st.DB().ExecContext(context.Background(), `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
		INSERT INTO processed_messages (message_id, stream, stream_seq, last_seq, subject, payload_sha256, processed_at, last_seen_at)
		SELECT printf('id-%08d', i), 'S', i, i, 's', randomblob(32), ?, ? FROM n`, rows, at, at); err != nil {
		t.Fatal(err)
	}
	// Rows written by batches are in the index of ids as they commit;
	// these are read into it now, not by the first batch timed beside the
	// prune.
	if _, err := st.HasProcessed(context.Background(), "S", 0, "id-00000001"); err != nil {
		t.Fatal(err)
	}
	clock.advance(30 * 24 * time.Hour)
}

// While batches keep asking for the writer, a prune takes about a fifth of
// its time (it rests four steps' lengths after each step a batch asked
// during), so pruning a week of rows costs batches little throughput; with
// no batch asking, it goes on at once. Shares of the prune's own time, so a
// slow machine does not change them.
func TestAPruneYieldsTheWriterToBatches(t *testing.T) {
	rows := 60_000
	if raceEnabled {
		rows = 10_000
	}
	ctx := context.Background()
	share := func(batches bool) (float64, int64) {
		st, clock := openAgingStore(t)
		fillPrunable(t, st, clock, rows)
		stop, done := make(chan struct{}), make(chan int64, 1)
		go func() {
			var n int64
			defer func() { done <- n }()
			for i := 0; batches; i++ {
				select {
				case <-stop:
					return
				default:
				}
				d := []ledger.Delivery{{MessageID: fmt.Sprint("b-", i), Stream: "B", Sequence: uint64(i + 1), Subject: "s", Data: []byte("x")}}
				if _, err := st.ApplyBatch(ctx, d, noop, ledger.Budget{}); err != nil {
					t.Error(err)
					return
				}
				n++
			}
		}()
		began := time.Now()
		res, err := st.Prune(ctx, ledger.PruneOptions{Stream: "S", FirstSeq: uint64(rows) + 1, Hold: 10 * time.Millisecond})
		wall := time.Since(began)
		close(stop)
		n := <-done
		if err != nil || res.Processed != int64(rows) {
			t.Fatalf("prune: %+v, %v; want %d rows", res, err, rows)
		}
		t.Logf("batches %v: %d steps held the writer %s of %s; %d batches meanwhile", batches, res.Steps, res.Held, wall, n)
		return float64(res.Held) / float64(wall), n
	}
	if s, n := share(true); s > 0.4 || n == 0 {
		t.Errorf("with batches writing, the prune held the writer %.2f of its time (%d batches); want at most about 0.2", s, n)
	}
	if s, _ := share(false); s < 0.5 {
		t.Errorf("alone, the prune held the writer %.2f of its time; want it to go on at once", s)
	}
}

// Prune of a stream that copies another records, before any row goes, the
// source's sequence the pruned rows came from below: it only rises for one
// instance of the source, a new instance replaces it, and a floor that says
// nothing is refused before anything is pruned.
func TestPruneRecordsTheSourceFloorFirst(t *testing.T) {
	t.Parallel()
	st, clock := openAgingStore(t)
	ctx := context.Background()
	if _, err := st.ApplyBatch(ctx, []ledger.Delivery{{MessageID: "gone", Stream: "EDGE", Sequence: 1, Subject: "s", Data: []byte("x")}}, noop, ledger.Budget{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SourceFloor(ctx, "EDGE", "HUB"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("floor before any prune: err = %v, want ErrNotFound", err)
	}
	clock.advance(8 * 24 * time.Hour)
	prune := func(f ledger.SourceFloor) (ledger.PruneResult, error) {
		return st.Prune(ctx, ledger.PruneOptions{Stream: "EDGE", FirstSeq: 2, Floors: []ledger.SourceFloor{f}})
	}
	if _, err := prune(ledger.SourceFloor{Source: "HUB", Instance: "a"}); !errors.Is(err, ledger.ErrUnsafePrune) {
		t.Fatalf("floor at 0: err = %v, want ErrUnsafePrune", err)
	}
	res, err := prune(ledger.SourceFloor{Source: "HUB", Instance: "a", Below: 40})
	if err != nil || res.Processed != 1 {
		t.Fatalf("prune: %+v, %v; want 1 row", res, err)
	}
	for _, step := range []struct {
		f    ledger.SourceFloor
		want uint64
	}{
		{ledger.SourceFloor{Source: "HUB", Instance: "a", Below: 30}, 40}, // lower, same instance: stays
		{ledger.SourceFloor{Source: "HUB", Instance: "a", Below: 50}, 50},
		{ledger.SourceFloor{Source: "HUB", Instance: "b", Below: 3}, 3}, // the source made again
	} {
		if _, err := prune(step.f); err != nil {
			t.Fatal(err)
		}
		got, err := st.SourceFloor(ctx, "EDGE", "HUB")
		now := clock.Now()
		if err != nil || got.Below != step.want || got.Instance != step.f.Instance || !got.Since.Equal(now.Truncate(time.Millisecond)) {
			t.Fatalf("after %+v: floor %+v, %v; want %d of instance %s since %s", step.f, got, err, step.want, step.f.Instance, now)
		}
	}
}

// A stream made again numbers its messages anew: HoldRows takes its rows as
// last seen where a copy of theirs can still come in the new one, so prune
// keeps them until the new stream's first sequence passes it.
func TestHoldRowsKeepsThemPastTheNewStreamsSequences(t *testing.T) {
	t.Parallel()
	st, clock := openAgingStore(t)
	ctx := context.Background()
	for i, seq := range []uint64{3, 9} {
		if _, err := st.ApplyBatch(ctx, []ledger.Delivery{{MessageID: fmt.Sprint("m", i), Stream: "EDGE", Sequence: seq, Subject: "s", Data: []byte("x")}}, noop, ledger.Budget{}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := st.RowsOf(ctx, "EDGE"); err != nil || n != 2 {
		t.Fatalf("RowsOf = %d, %v; want 2", n, err)
	}
	if n, err := st.HoldRows(ctx, "EDGE", 6); err != nil || n != 1 {
		t.Fatalf("HoldRows = %d, %v; want 1 (the row at 9 is past it already)", n, err)
	}
	clock.advance(8 * 24 * time.Hour)
	// The new stream's first sequence is 5: the row once at 3 may have a
	// copy still in it.
	if res, err := st.Prune(ctx, ledger.PruneOptions{Stream: "EDGE", FirstSeq: 5}); err != nil || res.Processed != 0 {
		t.Fatalf("prune below 5: %+v, %v; want nothing pruned", res, err)
	}
	if res, err := st.Prune(ctx, ledger.PruneOptions{Stream: "EDGE", FirstSeq: 7}); err != nil || res.Processed != 1 {
		t.Fatalf("prune below 7: %+v, %v; want the held row pruned", res, err)
	}
}
