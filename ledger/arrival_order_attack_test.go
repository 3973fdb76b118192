package ledger_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

// Attacks on processed_messages in arrival order (ids.go, seen.go,
// prune.go): a standby that follows an owner past a run boundary and
// takes over; readers looking ids up while batches seal runs; seqs used
// again after the rows at the top were pruned, with a standby following;
// a run whose rows were all pruned before the store was opened again.

// aoOpen opens file with log (nil: none) and clock.
func aoOpen(t *testing.T, file string, log ledger.Changelog, clock *agingClock) *ledger.Store {
	t.Helper()
	st, err := ledger.Open(file, ledger.Config{Changelog: log, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// aoWant applies batch to st and wants the outcomes want.
func aoWant(t *testing.T, st *ledger.Store, what string, batch []ledger.Delivery, want ...ledger.Outcome) {
	t.Helper()
	rs, err := st.ApplyBatch(context.Background(), batch, noop, ledger.Budget{})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got := outcomes(rs); !slices.Equal(got, want) {
		t.Fatalf("%s: outcomes %v, want %v", what, got, want)
	}
}

// aoRuns lists st's runs as first-last.
func aoRuns(t *testing.T, st *ledger.Store) []string {
	t.Helper()
	rows, err := st.DB().Query(`SELECT first, last FROM processed_runs ORDER BY first`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var f, l int64
		if err := rows.Scan(&f, &l); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%d-%d", f, l))
	}
	return out
}

// A standby follows its owner past a run boundary (the sealed run comes
// to it through the log), reads ids through its own index between
// entries, and takes over: ids of the sealed run and of the rows above it
// are duplicates (same payload) or conflicts (other payload) there, and
// the next run it seals itself is found too.
func TestArrivalAttackStandbyTakesOverPastARun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	clock := &agingClock{now: time.Now()}
	log := &memLog{max: 1 << 20}
	owner := aoOpen(t, filepath.Join(dir, "owner.db"), log, clock)
	standby := aoOpen(t, filepath.Join(dir, "standby.db"), log, clock)
	if err := owner.TakeOver(ctx, "log1", "a", 0, 0); err != nil {
		t.Fatal(err)
	}
	ids := randomIDs(t, owner, runRows-10, 0)
	_, err := attackOpsFollow(ctx, log, standby)
	if err != nil {
		t.Fatal(err)
	}
	// The standby's index loaded below the boundary, by a reader.
	for _, id := range []string{ids[0], ids[len(ids)-1]} {
		if ok, err := standby.HasProcessed(ctx, "S", 0, id); err != nil || !ok {
			t.Fatalf("standby: has processed %s = %v, %v", id, ok, err)
		}
	}
	ids = append(ids, randomIDs(t, owner, 3000, uint64(len(ids)))...)
	last, err := attackOpsFollow(ctx, log, standby)
	if err != nil {
		t.Fatal(err)
	}
	if o, s := aoRuns(t, owner), aoRuns(t, standby); len(o) != 1 || !slices.Equal(o, s) {
		t.Fatalf("runs: owner %v, standby %v; want one, the same", o, s)
	}
	for _, id := range []string{ids[0], ids[runRows-1], ids[runRows], ids[len(ids)-1]} {
		if ok, err := standby.HasProcessed(ctx, "S", 0, id); err != nil || !ok {
			t.Fatalf("standby after the seal: has processed %s = %v, %v", id, ok, err)
		}
	}
	if err := standby.TakeOver(ctx, "log1", "b", last, last); err != nil {
		t.Fatal(err)
	}
	seq := uint64(1 << 40)
	var batch []ledger.Delivery
	var want []ledger.Outcome
	for i, id := range []string{ids[0], ids[7], ids[runRows/2], ids[runRows-1], ids[runRows], ids[len(ids)-1]} {
		seq++
		batch = append(batch, delivery(id, seq, id))
		want = append(want, ledger.Duplicate)
		if i%2 == 1 {
			seq++
			batch = append(batch, delivery(id, seq, "other"))
			want = append(want, ledger.Conflict)
		}
	}
	aoWant(t, standby, "the new owner", batch, want...)
	more := randomIDs(t, standby, runRows, uint64(2*len(ids)))
	if r := aoRuns(t, standby); len(r) != 2 {
		t.Fatalf("the new owner's runs %v, want 2", r)
	}
	aoWant(t, standby, "the new owner's own run", []ledger.Delivery{delivery(more[0], 1, more[0]), delivery(ids[3], 2, ids[3]),
		delivery(more[len(more)-1], 3, "x")}, ledger.Duplicate, ledger.Duplicate, ledger.Conflict)
	if n := count(t, standby, `SELECT count(*) - count(DISTINCT message_id) FROM processed_messages`); n != 0 {
		t.Fatalf("%d ids in two rows", n)
	}
}

// Readers look ids up (HasProcessed, through the index in memory) while
// batches apply and seal runs: every id a committed batch applied is
// found by every later look; the batches never apply an id twice.
func TestArrivalAttackReadersRaceSealing(t *testing.T) {
	ledgerLong(t, "runs sealed beside readers: 25 s, minutes under -race")
	t.Parallel()
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "l.db")
	clock := &agingClock{now: time.Now()}
	st := aoOpen(t, file, nil, clock)
	var mu sync.Mutex
	var applied []string
	var misses atomic.Int64
	var errs atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				n := len(applied)
				var id string
				if n > 0 {
					id = applied[(i*7919+r*104729)%n]
				}
				mu.Unlock()
				if id == "" {
					continue
				}
				ok, err := st.HasProcessed(ctx, "S", 0, id)
				if err != nil {
					errs.Store(err)
					return
				}
				if !ok {
					misses.Add(1)
				}
			}
		}()
	}
	total := 2*runRows + 5000
	var seq uint64
	for len(applied) < total {
		batch := make([]ledger.Delivery, 0, 700)
		var fresh []string
		for range 500 {
			var b [16]byte
			rand.Read(b[:])
			id := hex.EncodeToString(b[:])
			seq++
			batch = append(batch, delivery(id, seq, id))
			fresh = append(fresh, id)
		}
		mu.Lock()
		for i := 0; i < 200 && len(applied) > 0; i++ {
			id := applied[(int(seq)*31+i*977)%len(applied)]
			batch = append(batch, delivery(id, seq, id))
		}
		mu.Unlock()
		rs, err := st.ApplyBatch(ctx, batch, noop, ledger.Budget{})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rs {
			want := ledger.Applied
			if i >= 500 {
				want = ledger.Duplicate
			}
			if r.Outcome != want {
				t.Fatalf("batch at seq %d, message %d (%s): %v, want %v", seq, i, batch[i].MessageID, r.Outcome, want)
			}
		}
		mu.Lock()
		applied = append(applied, fresh...)
		mu.Unlock()
	}
	close(stop)
	wg.Wait()
	if e := errs.Load(); e != nil {
		t.Fatal(e)
	}
	if n := misses.Load(); n != 0 {
		t.Fatalf("%d looks missed an applied id", n)
	}
	t.Logf("runs %v", aoRuns(t, st))
	for _, id := range applied {
		if ok, err := st.HasProcessed(ctx, "S", 0, id); err != nil || !ok {
			t.Fatalf("has processed %s = %v, %v", id, ok, err)
		}
	}
}

// The rows at the top pruned (every row of the stream gone from it), the
// owner opened again: its seqs begin again below those it used, while its
// standby follows. The standby's copy stays the owner's; old ids are new
// again (their copies are gone), fresh ids are found.
func TestArrivalAttackSeqsUsedAgainAfterThePrune(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	clock := &agingClock{now: time.Now()}
	log := &memLog{max: 1 << 20}
	ownerFile := filepath.Join(dir, "owner.db")
	owner := aoOpen(t, ownerFile, log, clock)
	standby := aoOpen(t, filepath.Join(dir, "standby.db"), log, clock)
	if err := owner.TakeOver(ctx, "log1", "a", 0, 0); err != nil {
		t.Fatal(err)
	}
	ids := randomIDs(t, owner, 1000, 0)
	// A reader on the standby loads its index over seqs 1..1000.
	if _, err := attackOpsFollow(ctx, log, standby); err != nil {
		t.Fatal(err)
	}
	if ok, err := standby.HasProcessed(ctx, "S", 0, ids[999]); err != nil || !ok {
		t.Fatalf("standby: %v %v", ok, err)
	}
	// The first 10 ids seen in another stream too: their rows are kept
	// (pinned); every other row is gone from the stream, the top ones too.
	var pins []ledger.Delivery
	var dup []ledger.Outcome
	for i := range 10 {
		d := delivery(ids[i], uint64(i+1), ids[i])
		d.Stream = "T"
		pins = append(pins, d)
		dup = append(dup, ledger.Duplicate)
	}
	aoWant(t, owner, "the pins", pins, dup...)
	clock.advance(30 * 24 * time.Hour)
	if res, err := owner.Prune(ctx, ledger.PruneOptions{Stream: "S", FirstSeq: 1001}); err != nil || res.Processed != 990 {
		t.Fatalf("prune: %+v, %v", res, err)
	}
	last, err := attackOpsFollow(ctx, log, standby)
	if err != nil {
		t.Fatal(err)
	}
	if err := owner.Close(); err != nil {
		t.Fatal(err)
	}
	owner = aoOpen(t, ownerFile, log, clock)
	if err := owner.TakeOver(ctx, "log1", "a", last, last); err != nil {
		t.Fatal(err)
	}
	fresh := randomIDs(t, owner, 50, 5000)
	if top := count(t, owner, `SELECT max(seq) FROM processed_messages`); top != 60 {
		t.Logf("after the reopen the seqs went on to %d", top)
	}
	if _, err := attackOpsFollow(ctx, log, standby); err != nil {
		t.Fatalf("the standby cannot follow the owner's seqs used again: %v", err)
	}
	if got, want := fullDump(t, standby), fullDump(t, owner); got != want {
		t.Fatalf("the standby's copy differs from the owner's")
	}
	for _, id := range []string{fresh[0], fresh[49], ids[0]} {
		if ok, err := standby.HasProcessed(ctx, "S", 0, id); err != nil || !ok {
			t.Fatalf("standby: has processed %s = %v, %v", id, ok, err)
		}
	}
	if ok, err := standby.HasProcessed(ctx, "S", 0, ids[500]); err != nil || ok {
		t.Fatalf("standby: a pruned id %s = %v, %v", ids[500], ok, err)
	}
	aoWant(t, owner, "after the reopen", []ledger.Delivery{delivery(fresh[3], 9000, fresh[3]), delivery(ids[5], 9001, "x"), delivery(ids[700], 9002, ids[700])},
		ledger.Duplicate, ledger.Conflict, ledger.Applied)
}

// A run whose rows were all pruned is dropped; opened again, the store's
// newest run is an older one (or none), and the rows above are found
// through the map; the next seal covers seqs below the rows it holds.
// Every id left is found, before and after the next seal.
func TestArrivalAttackRunPrunedEmptyThenReopened(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "l.db")
	clock := &agingClock{now: time.Now()}
	st := aoOpen(t, file, nil, clock)
	ids := randomIDs(t, st, runRows+500, 0)
	clock.advance(30 * 24 * time.Hour)
	// The whole first run gone from the stream.
	if res, err := st.Prune(ctx, ledger.PruneOptions{Stream: "S", FirstSeq: runRows + 1}); err != nil || res.Processed != runRows {
		t.Fatalf("prune: %+v, %v", res, err)
	}
	if r := aoRuns(t, st); len(r) != 0 {
		t.Fatalf("runs after the prune %v, want none", r)
	}
	check := func(when string) {
		t.Helper()
		for _, id := range []string{ids[runRows], ids[runRows+250], ids[len(ids)-1]} {
			if ok, err := st.HasProcessed(ctx, "S", 0, id); err != nil || !ok {
				t.Fatalf("%s: has processed %s = %v, %v", when, id, ok, err)
			}
			if ok, err := st.Holds(ctx, id, 0); err != nil || !ok {
				t.Fatalf("%s: holds %s = %v, %v", when, id, ok, err)
			}
		}
		aoWant(t, st, when, []ledger.Delivery{delivery(ids[runRows+1], 1<<40, ids[runRows+1]), delivery(ids[len(ids)-2], 1<<40+1, "x")},
			ledger.Duplicate, ledger.Conflict)
	}
	check("after the prune")
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = aoOpen(t, file, nil, clock)
	check("reopened")
	more := randomIDs(t, st, runRows, 1<<20)
	t.Logf("runs after %d more: %v", len(more), aoRuns(t, st))
	check("after the next seals")
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = aoOpen(t, file, nil, clock)
	check("reopened after the seals")
	aoWant(t, st, "the latest", []ledger.Delivery{delivery(more[0], 1<<41, more[0]), delivery(more[len(more)-1], 1<<41+1, more[len(more)-1])},
		ledger.Duplicate, ledger.Duplicate)
}

// A prune that empties many runs drops them (dropEmptyRuns) in one
// transaction, through the changelog, while the prune's row steps keep
// within Hold and end early for a waiting batch. Rows of 8 runs, all gone
// from the stream but one a run (seen again later); a first prune
// deletes all but those 8, a second the 8, emptying the 8 runs at once;
// a batch a millisecond keeps coming (on another stream, kept). How long
// does a batch wait behind each prune, and how large is the transaction
// the second writes to the changelog?
func TestArrivalAttackDroppingManyRunsHoldsTheWriter(t *testing.T) {
	ledgerLong(t, "half a million rows pruned: 40 s, minutes under -race")
	ctx := context.Background()
	dir := t.TempDir()
	clock := &agingClock{now: time.Now()}
	log := &memLog{max: 512 << 10}
	owner := aoOpen(t, filepath.Join(dir, "owner.db"), log, clock)
	if err := owner.TakeOver(ctx, "log1", "a", 0, 0); err != nil {
		t.Fatal(err)
	}
	const runs = 8
	ids := randomIDs(t, owner, runs*runRows+10, 0)
	var again []ledger.Delivery
	var dup []ledger.Outcome
	for r := range runs {
		id := ids[r*runRows+77]
		again = append(again, delivery(id, 1<<40+uint64(r), id))
		dup = append(dup, ledger.Duplicate)
	}
	aoWant(t, owner, "one row a run seen again", again, dup...)
	clock.advance(30 * 24 * time.Hour)
	hold := 25 * time.Millisecond
	prune := func(what string, firstSeq uint64) {
		t.Helper()
		log.mu.Lock()
		before := len(log.entries)
		log.mu.Unlock()
		stop := make(chan struct{})
		done := make(chan time.Duration)
		go func() {
			var worst time.Duration
			for i := uint64(1); ; i++ {
				select {
				case <-stop:
					done <- worst
					return
				default:
				}
				d := delivery(fmt.Sprintf("probe-%s-%d", what, i), i, "p")
				d.Stream = "T"
				began := time.Now()
				if _, err := owner.ApplyBatch(ctx, []ledger.Delivery{d}, noop, ledger.Budget{}); err != nil {
					t.Error(err)
				}
				worst = max(worst, time.Since(began))
				time.Sleep(time.Millisecond)
			}
		}()
		time.Sleep(50 * time.Millisecond)
		began := time.Now()
		res, err := owner.Prune(ctx, ledger.PruneOptions{Stream: "S", FirstSeq: firstSeq, Hold: hold})
		took := time.Since(began)
		close(stop)
		worst := <-done
		if err != nil {
			t.Fatal(err)
		}
		log.mu.Lock()
		var largest, size int
		for i := before; i < len(log.entries); i++ {
			size += len(log.entries[i])
			if log.ends[i+1] {
				largest = max(largest, size)
				size = 0
			}
		}
		log.mu.Unlock()
		t.Logf("%s: %d rows pruned in %s (Hold %s); runs left %d; largest transaction in the log %d bytes; a batch beside it waited at most %s",
			what, res.Processed, took.Round(time.Millisecond), hold, count(t, owner, `SELECT count(*) FROM processed_runs`), largest, worst.Round(time.Millisecond))
		if worst > 8*hold {
			t.Errorf("%s: a batch waited %s behind the prune, whose steps keep within %s", what, worst.Round(time.Millisecond), hold)
		}
	}
	prune("all rows but one a run", 1<<39)
	prune("the last row of each of 8 runs", 1<<41)
}

// ledgerLong skips a test of the ledger that takes minutes under -race
// unless JETLEDGER_LEDGER=long.
func ledgerLong(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("JETLEDGER_LEDGER") != "long" {
		t.Skip(why + ": JETLEDGER_LEDGER=long")
	}
}
