package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
)

// Helper-18's attacks on a prune whose steps end early for a waiting
// batch (ledger/prune.go pruneStep: a cut step commits the slices it did).

// attackOpsEvents is the built-in handler's shape: one events row per
// message, keyed by its id, pruned with it (PruneOptions.AlsoFrom).
func attackOpsEvents(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO events (message_id, body) VALUES (?, ?)`, d.MessageID, string(d.Data))
	return err
}

const attackOpsEventsTable = `CREATE TABLE IF NOT EXISTS events (message_id TEXT PRIMARY KEY, body TEXT NOT NULL)`

func attackOpsDelivery(i int) ledger.Delivery {
	id := fmt.Sprintf("s-%06d", i)
	return ledger.Delivery{MessageID: id, Stream: "S", Sequence: uint64(i), Subject: "s", Data: []byte(id + "-payload")}
}

// attackOpsOrphans counts events rows without their ledger row and ledger
// rows without their events row.
func attackOpsOrphans(t *testing.T, st *ledger.Store) (events, rows int) {
	t.Helper()
	if err := st.DB().QueryRow(`SELECT count(*) FROM events WHERE message_id NOT IN (SELECT message_id FROM processed_messages)`).Scan(&events); err != nil {
		t.Fatal(err)
	}
	if err := st.DB().QueryRow(`SELECT count(*) FROM processed_messages WHERE message_id NOT IN (SELECT message_id FROM events)`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	return events, rows
}

func attackOpsCount(t *testing.T, st *ledger.Store, q string) int {
	t.Helper()
	var n int
	if err := st.DB().QueryRow(q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// An owned ledger (changelog) prunes while its batches keep waiting for
// the writer, so its steps end early and commit part of their chunk: each
// such commit is an entry of the log. A standby applying the log holds
// exactly the owner's file (ledger rows, events, outbox, position), no
// events row is left without its ledger row or the reverse on either, the
// prune removed exactly the rows below FirstSeq, and a redelivery of a
// kept id is a duplicate on both while a pruned id is applied again.
func TestAttackACutPruneStepLeavesTheStandbyTheOwnersCopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rows := 6_000
	if raceEnabled {
		rows = 2_400
	}
	keepFrom := rows - rows/4 // seqs keepFrom.. stay: a copy is in the stream
	dir := t.TempDir()
	clock := &agingClock{now: time.Now()}
	log := &memLog{max: 16 << 10} // a large step's changes span several entries
	owner, err := ledger.Open(filepath.Join(dir, "owner.db"), ledger.Config{Changelog: log, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { owner.Close() })
	standby, err := ledger.Open(filepath.Join(dir, "standby.db"), ledger.Config{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { standby.Close() })
	for _, st := range []*ledger.Store{owner, standby} {
		if _, err := st.DB().Exec(attackOpsEventsTable); err != nil {
			t.Fatal(err)
		}
	}
	attackOpsOwnRows(t, owner, rows)
	clock.advance(30 * 24 * time.Hour)
	sameAsOwner(t, log, owner, standby)
	entriesBefore := len(log.entries)

	stop := make(chan struct{})
	load, done := runBatches(owner, "B", 10, 10*time.Second, attackOpsEvents, stop)
	res, err := owner.Prune(ctx, ledger.PruneOptions{Stream: "S", FirstSeq: uint64(keepFrom), AlsoFrom: []string{"events"}, Hold: 5 * time.Second})
	close(stop)
	<-done
	if err != nil {
		t.Fatalf("prune: %v", err)
	}
	if load.other != nil {
		t.Fatalf("a batch beside the prune failed: %v", load.other)
	}
	n, p50, _, longest := load.summary()
	t.Logf("prune %+v; %d log entries for it and the batches; %d batches beside it, p50 %s, longest %s",
		res, len(log.entries)-entriesBefore, n, p50, longest)
	if want := int64(keepFrom - 1); res.Processed != want {
		t.Errorf("the prune says it removed %d rows, want %d", res.Processed, want)
	}
	sameAsOwner(t, log, owner, standby)
	for name, st := range map[string]*ledger.Store{"owner": owner, "standby": standby} {
		if ev, r := attackOpsOrphans(t, st); ev != 0 || r != 0 {
			t.Errorf("%s: %d events rows without their ledger row, %d ledger rows without their events row", name, ev, r)
		}
		if left := attackOpsCount(t, st, `SELECT count(*) FROM processed_messages WHERE stream = 'S'`); left != rows-keepFrom+1 {
			t.Errorf("%s: %d rows of S left, want %d (seqs %d..%d)", name, left, rows-keepFrom+1, keepFrom, rows)
		}
		if below := attackOpsCount(t, st, fmt.Sprintf(`SELECT count(*) FROM processed_messages WHERE stream = 'S' AND last_seq < %d`, keepFrom)); below != 0 {
			t.Errorf("%s: %d rows below the stream's first sequence left", name, below)
		}
	}

	// A redelivery of a kept id is a duplicate; a pruned id (whose every
	// copy left the stream) is applied as new on the owner and its copy.
	kept, pruned := attackOpsDelivery(keepFrom), attackOpsDelivery(keepFrom-1)
	got, err := owner.ApplyBatch(ctx, []ledger.Delivery{kept, pruned}, attackOpsEvents, ledger.Budget{})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Outcome != ledger.Duplicate || got[1].Outcome != ledger.Applied {
		t.Errorf("a kept id came back %v, a pruned one %v; want Duplicate, Applied", got[0].Outcome, got[1].Outcome)
	}
	sameAsOwner(t, log, owner, standby)
}

// The disk fills (a small tmpfs) while a prune runs: the prune stops with
// a clear error (ErrFull) or succeeds, the file stays whole (integrity,
// no events row without its ledger row or the reverse, counts adding up),
// and, space given back, the next prune and the next open go on.
func TestAttackAPruneOnAFullDiskFailsClearlyAndTheNextGoesOn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := consumertest.SmallDisk(t, 48<<20)
	rows := 20_000
	clock := &agingClock{now: time.Now()}
	file := filepath.Join(dir, "l.db")
	st, err := ledger.Open(file, ledger.Config{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			st.Close()
		}
	}()
	if _, err := st.DB().Exec(attackOpsEventsTable); err != nil {
		t.Fatal(err)
	}
	fillPrunable(t, st, clock, rows)
	if _, err := st.DB().Exec(`INSERT INTO events (message_id, body) SELECT message_id, hex(randomblob(100)) FROM processed_messages`); err != nil {
		t.Fatal(err)
	}
	// The WAL back to nothing, so that the prune's writes need new space.
	if _, err := st.DB().Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Logf("checkpoint: %v", err)
	}
	free := consumertest.FillDisk(t, dir)
	res1, err1 := st.Prune(ctx, ledger.PruneOptions{Stream: "S", FirstSeq: uint64(rows) + 1, AlsoFrom: []string{"events"}})
	t.Logf("prune on a full disk: %+v, %v", res1, err1)
	if err1 != nil && !errors.Is(err1, ledger.ErrFull) {
		t.Errorf("a prune on a full disk failed with %v, want ledger.ErrFull", err1)
	}
	check := func(when string) {
		t.Helper()
		var ok string
		if err := st.DB().QueryRow(`PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
			t.Fatalf("%s: integrity_check %q, %v", when, ok, err)
		}
		if ev, r := attackOpsOrphans(t, st); ev != 0 || r != 0 {
			t.Fatalf("%s: %d events rows without their ledger row, %d ledger rows without their events row", when, ev, r)
		}
	}
	check("after the prune on a full disk")
	left := attackOpsCount(t, st, `SELECT count(*) FROM processed_messages`)
	if int64(left)+res1.Processed != int64(rows) {
		t.Errorf("after the prune on a full disk: %d rows left, %d said removed, of %d", left, res1.Processed, rows)
	}
	free()
	res2, err := st.Prune(ctx, ledger.PruneOptions{Stream: "S", FirstSeq: uint64(rows) + 1, AlsoFrom: []string{"events"}})
	if err != nil {
		t.Fatalf("the prune after space came back: %v", err)
	}
	check("after the next prune")
	if res1.Processed+res2.Processed != int64(rows) || attackOpsCount(t, st, `SELECT count(*) FROM processed_messages`) != 0 ||
		attackOpsCount(t, st, `SELECT count(*) FROM events`) != 0 {
		t.Errorf("the two prunes removed %d+%d of %d rows; want all, events too", res1.Processed, res2.Processed, rows)
	}
	closed = true
	if err := st.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	st2, err := ledger.Open(file, ledger.Config{Now: clock.Now})
	if err != nil {
		t.Fatalf("the next open after a prune on a full disk: %v", err)
	}
	defer st2.Close()
	if _, err := st2.ApplyBatch(ctx, []ledger.Delivery{attackOpsDelivery(rows + 1)}, attackOpsEvents, ledger.Budget{}); err != nil {
		t.Fatalf("a batch after: %v", err)
	}
}

// The disk fills while batches and a prune share the writer and the
// prune's steps are cut for them: whatever fails, fails as ErrFull, and
// the file stays whole.
func TestAttackACutPruneBesideBatchesOnAFillingDisk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := consumertest.SmallDisk(t, 48<<20)
	rows := 20_000
	if raceEnabled {
		rows = 8_000
	}
	clock := &agingClock{now: time.Now()}
	st, err := ledger.Open(filepath.Join(dir, "l.db"), ledger.Config{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.DB().Exec(attackOpsEventsTable); err != nil {
		t.Fatal(err)
	}
	fillPrunable(t, st, clock, rows)
	if _, err := st.DB().Exec(`INSERT INTO events (message_id, body) SELECT message_id, hex(randomblob(100)) FROM processed_messages`); err != nil {
		t.Fatal(err)
	}
	st.DB().Exec(`PRAGMA wal_checkpoint(TRUNCATE)`) //nolint:errcheck // best effort
	free := consumertest.FillDisk(t, dir)
	defer free()
	stop := make(chan struct{})
	load, done := runBatches(st, "B", 10, 10*time.Second, attackOpsEvents, stop)
	res, err := st.Prune(ctx, ledger.PruneOptions{Stream: "S", FirstSeq: uint64(rows) + 1, AlsoFrom: []string{"events"}, Hold: 5 * time.Second})
	close(stop)
	<-done
	t.Logf("prune: %+v, %v; batches: %d ok rows, busy %d, other %v", res, err, load.rows, load.busy, load.other)
	if err != nil && !errors.Is(err, ledger.ErrFull) {
		t.Errorf("the prune failed with %v, want ErrFull", err)
	}
	if load.other != nil && !errors.Is(load.other, ledger.ErrFull) {
		t.Errorf("a batch failed with %v, want ErrFull", load.other)
	}
	var ok string
	if err := st.DB().QueryRow(`PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("integrity_check %q, %v", ok, err)
	}
	if ev, r := attackOpsOrphans(t, st); ev != 0 || r != 0 {
		t.Fatalf("%d events rows without their ledger row, %d ledger rows without their events row", ev, r)
	}
	if left := attackOpsCount(t, st, `SELECT count(*) FROM processed_messages WHERE stream = 'S'`); int64(left)+res.Processed != int64(rows) {
		t.Errorf("%d rows of S left, %d said removed, of %d", left, res.Processed, rows)
	}
}

// attackOpsGate is a memLog whose Appends wait while it is shut, until
// open is closed.
type attackOpsGate struct {
	*memLog
	shut atomic.Bool
	open chan struct{}
}

func (g *attackOpsGate) Append(ctx context.Context, after uint64, parts [][]byte) error {
	if g.shut.Load() {
		<-g.open
	}
	return g.memLog.Append(ctx, after, parts)
}

// attackOpsFollow is memLog.follow for a goroutine: it applies to st every
// whole entry of log past st's position, and says what failed.
func attackOpsFollow(ctx context.Context, log *memLog, st *ledger.Store) (uint64, error) {
	pos, err := st.ChangelogPosition(ctx)
	if err != nil {
		return 0, err
	}
	log.mu.Lock()
	entries, ends := log.entries, make(map[int]bool, len(log.ends))
	for k, v := range log.ends {
		ends[k] = v
	}
	log.mu.Unlock()
	var changes []byte
	last := pos.Seq
	for seq := int(pos.Seq) + 1; seq <= len(entries); seq++ {
		changes = append(changes, entries[seq-1]...)
		if !ends[seq] {
			continue
		}
		if err := st.ApplyChanges(ctx, "log1", uint64(seq), changes); err != nil {
			return last, fmt.Errorf("apply through %d: %w", seq, err)
		}
		changes, last = nil, uint64(seq)
	}
	return last, nil
}

// attackOpsRows renders the ledger rows and events rows of st.
func attackOpsRows(t *testing.T, st *ledger.Store) string {
	t.Helper()
	var b []byte
	for _, q := range []string{
		`SELECT message_id || ':' || stream || ':' || last_seq FROM processed_messages ORDER BY 1`,
		`SELECT message_id || ':' || body FROM events ORDER BY 1`,
	} {
		rows, err := st.DB().Query(q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			b = append(b, s+"\n"...)
		}
		rows.Close()
	}
	return string(b)
}

// A standby takes the log over while the owner prunes beside batches (its
// steps cut for them): the owner's prune ends fenced
// (ErrNotChangelogOwner), its file holds exactly what the log gave the
// standby up to the take-over (no step committed that the log lacks), and
// the new owner's own prune removes the rest: no row below the first
// sequence, none of the kept ones, and no events row or ledger row alone.
func TestAttackAStandbyTakesOverMidPrune(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rows := 6_000
	if raceEnabled {
		rows = 2_400
	}
	keepFrom := rows - rows/4
	dir := t.TempDir()
	clock := &agingClock{now: time.Now()}
	log := &memLog{max: 16 << 10}
	open := func(name string, cl ledger.Changelog) *ledger.Store {
		st, err := ledger.Open(filepath.Join(dir, name), ledger.Config{Changelog: cl, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		if _, err := st.DB().Exec(attackOpsEventsTable); err != nil {
			t.Fatal(err)
		}
		return st
	}
	// The owner's entries pass a gate the test closes to take over: an
	// Append under way then waits (the owner holding its writer, in a
	// prune step or a batch) while the standby catches up and takes over.
	gated := &attackOpsGate{memLog: log, open: make(chan struct{})}
	owner, standby := open("owner.db", gated), open("standby.db", log)
	attackOpsOwnRows(t, owner, rows)
	clock.advance(30 * 24 * time.Hour)
	if _, err := attackOpsFollow(ctx, log, standby); err != nil {
		t.Fatal(err)
	}
	log.mu.Lock()
	base := len(log.entries)
	log.mu.Unlock()

	stop := make(chan struct{})
	load, done := runBatches(owner, "B", 10, 10*time.Second, attackOpsEvents, stop)
	type took struct {
		at   uint64
		rows string
		err  error
	}
	tookOver := make(chan took, 1)
	go func() {
		// Once the prune has published a few steps.
		for {
			log.mu.Lock()
			n := len(log.entries)
			log.mu.Unlock()
			if n >= base+8 {
				break
			}
			time.Sleep(time.Millisecond) // poll the log, not a synchronisation
		}
		gated.shut.Store(true)
		defer close(gated.open)
		for try := 0; ; try++ {
			last, err := attackOpsFollow(ctx, log, standby)
			if err == nil {
				err = standby.TakeOver(ctx, "log1", "b", last, last)
			}
			if err == nil {
				tookOver <- took{at: last, rows: attackOpsRows(t, standby)}
				return
			}
			if try > 1000 {
				tookOver <- took{err: err}
				return
			}
		}
	}()
	res, err := owner.Prune(ctx, ledger.PruneOptions{Stream: "S", FirstSeq: uint64(keepFrom), AlsoFrom: []string{"events"}, Hold: 5 * time.Second})
	tk := <-tookOver
	close(stop)
	<-done
	if tk.err != nil {
		t.Fatalf("the standby could not take over: %v", tk.err)
	}
	t.Logf("the owner's prune: %+v, %v; the standby took over after entry %d (prune began after %d); batches beside: %d rows, last error %v",
		res, err, tk.at, base, load.rows, load.other)
	if err == nil {
		t.Skip("the prune ended before the take-over: nothing attacked")
	}
	if !errors.Is(err, ledger.ErrNotChangelogOwner) {
		t.Errorf("the fenced owner's prune: %v, want ErrNotChangelogOwner", err)
	}
	if got := attackOpsRows(t, owner); got != tk.rows {
		t.Errorf("the fenced owner's file differs from the log it wrote, as the standby took it over (%d vs %d bytes): a step committed without its entry, or an entry without its step", len(got), len(tk.rows))
	}
	if ev, r := attackOpsOrphans(t, owner); ev != 0 || r != 0 {
		t.Errorf("the fenced owner: %d events rows alone, %d ledger rows alone", ev, r)
	}
	res2, err := standby.Prune(ctx, ledger.PruneOptions{Stream: "S", FirstSeq: uint64(keepFrom), AlsoFrom: []string{"events"}})
	if err != nil {
		t.Fatalf("the new owner's prune: %v", err)
	}
	t.Logf("the new owner's prune: %+v", res2)
	if res.Processed+res2.Processed < int64(keepFrom-1) {
		t.Errorf("the two prunes say %d+%d rows, want at least %d", res.Processed, res2.Processed, keepFrom-1)
	}
	if left := count(t, standby, `SELECT count(*) FROM processed_messages WHERE stream = 'S'`); left != rows-keepFrom+1 {
		t.Errorf("the new owner holds %d rows of S, want %d", left, rows-keepFrom+1)
	}
	if ev, r := attackOpsOrphans(t, standby); ev != 0 || r != 0 {
		t.Errorf("the new owner: %d events rows alone, %d ledger rows alone", ev, r)
	}
	// The old owner writes nothing more.
	if _, err := owner.ApplyBatch(ctx, []ledger.Delivery{attackOpsDelivery(rows + 1)}, attackOpsEvents, ledger.Budget{}); !errors.Is(err, ledger.ErrNotChangelogOwner) {
		t.Errorf("the fenced owner's batch: %v, want ErrNotChangelogOwner", err)
	}
}

// Sent outbox rows past their retention are pruned while three workers
// claim and send the queued rest and batches keep the prune's steps cut:
// every claim and write-back of the workers succeeds (no row they hold
// goes), the prune removes exactly the old sent rows, and every queued
// row ends sent once.
func TestAttackOutboxPruneBesideWorkersSending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n := 3_000
	if raceEnabled {
		n = 1_200
	}
	st, clock := openAgingStore(t)
	if _, err := st.DB().Exec(attackOpsEventsTable); err != nil {
		t.Fatal(err)
	}
	enqueue := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		if err := attackOpsEvents(ctx, tx, d); err != nil {
			return err
		}
		_, err := tx.Enqueue(ctx, "hook", d.Data)
		return err
	}
	for from := 1; from <= n; from += 100 {
		var b []ledger.Delivery
		for i := from; i < from+100 && i <= n; i++ {
			b = append(b, attackOpsDelivery(i))
		}
		if _, err := st.ApplyBatch(ctx, b, enqueue, ledger.Budget{}); err != nil {
			t.Fatal(err)
		}
	}
	send := func(worker, id string) error {
		if _, err := st.Transition(ctx, id, ledger.Claim, ledger.Params{Worker: worker, Lease: time.Hour}); err != nil {
			return err
		}
		_, err := st.Transition(ctx, id, ledger.Sent, ledger.Params{Worker: worker, ExternalID: "x-" + id})
		return err
	}
	// Half sent a month ago.
	old, err := st.Due(ctx, "hook", n/2)
	if err != nil || len(old) != n/2 {
		t.Fatalf("due: %d, %v", len(old), err)
	}
	for _, id := range old {
		if err := send("w0", id); err != nil {
			t.Fatal(err)
		}
	}
	clock.advance(31 * 24 * time.Hour)

	stop := make(chan struct{})
	load, done := runBatches(st, "B", 10, 10*time.Second, noop, stop)
	type tally struct {
		sent int
		err  error
	}
	tallies := make(chan tally, 3)
	for w := range 3 {
		go func() {
			var tl tally
			defer func() { tallies <- tl }()
			worker := fmt.Sprintf("w%d", w+1)
			for {
				ids, err := st.Due(ctx, "hook", 10)
				if err != nil {
					tl.err = err
					return
				}
				if len(ids) == 0 {
					return
				}
				for _, id := range ids {
					err := send(worker, id)
					switch {
					case errors.Is(err, ledger.ErrNotClaimed): // another worker has it
					case err != nil:
						tl.err = fmt.Errorf("%s: %w", id, err)
						return
					default:
						tl.sent++
					}
				}
			}
		}()
	}
	res, perr := st.Prune(ctx, ledger.PruneOptions{Stream: "S", FirstSeq: 1, Hold: 5 * time.Second})
	sent := 0
	for range 3 {
		tl := <-tallies
		if tl.err != nil {
			t.Errorf("a worker's send beside the prune: %v", tl.err)
		}
		sent += tl.sent
	}
	close(stop)
	<-done
	t.Logf("prune %+v, %v; workers sent %d; batches %d rows, %v", res, perr, sent, load.rows, load.other)
	if perr != nil {
		t.Fatalf("prune: %v", perr)
	}
	if res.Outbox != int64(n/2) {
		t.Errorf("the prune removed %d outbox rows, want the %d sent a month ago", res.Outbox, n/2)
	}
	if sent != n-n/2 {
		t.Errorf("the workers sent %d, want %d", sent, n-n/2)
	}
	if got := count(t, st, `SELECT count(*) FROM outbox WHERE status = 'sent'`); got != n-n/2 {
		t.Errorf("%d sent rows left, want the %d sent beside the prune", got, n-n/2)
	}
	if got := count(t, st, `SELECT count(*) FROM outbox WHERE status != 'sent'`); got != 0 {
		t.Errorf("%d rows not sent", got)
	}
}

// attackOpsOwnRows has owner take log1 over and apply rows deliveries in
// batches of 100.
func attackOpsOwnRows(t *testing.T, owner *ledger.Store, rows int) {
	ctx := context.Background()
	if err := owner.TakeOver(ctx, "log1", "a", 0, 0); err != nil {
		t.Fatal(err)
	}
	for from := 1; from <= rows; from += 100 {
		var b []ledger.Delivery
		for i := from; i < from+100 && i <= rows; i++ {
			b = append(b, attackOpsDelivery(i))
		}
		if _, err := owner.ApplyBatch(ctx, b, attackOpsEvents, ledger.Budget{}); err != nil {
			t.Fatal(err)
		}
	}
}
