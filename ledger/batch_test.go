package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

// Both ways a batch runs, optimistically (no savepoints, redone with them
// when a message fails) and with a savepoint per message, must give the
// same outcomes.
var modes = []struct {
	name       string
	savepoints bool
}{{"optimistic", false}, {"savepoints", true}}

var eventsRow = &ledger.Insert{Table: "events", Columns: []string{"message_id", "data"}}

// recordEvent queues the message's events row and credits it.
func recordEvent(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
	if err := tx.InsertLater(eventsRow, d.MessageID, d.Data); err != nil {
		return err
	}
	return credit(ctx, tx, d)
}

// recordFailing records the event and fails, after writing, on id: the
// ledger must undo the write.
func recordFailing(id string) ledger.Handler {
	return func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		if err := recordEvent(ctx, tx, d); err != nil {
			return err
		}
		if d.MessageID == id {
			return fmt.Errorf("%s fails after writing", id)
		}
		return nil
	}
}

// inBothModes runs f in parallel on a fresh events store in each mode.
func inBothModes(t *testing.T, f func(t *testing.T, st *ledger.Store)) {
	t.Helper()
	t.Parallel()
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			f(t, openEventsStore(t, m.savepoints))
		})
	}
}

func openEventsStore(t *testing.T, savepoints bool) *ledger.Store {
	t.Helper()
	st := openStore(t)
	if _, err := st.DB().Exec(`CREATE TABLE events (message_id TEXT PRIMARY KEY, data BLOB CHECK (CAST(data AS TEXT) IS NOT 'bad')) WITHOUT ROWID`); err != nil {
		t.Fatal(err)
	}
	ledger.UseSavepoints(st, savepoints)
	return st
}

func count(t *testing.T, st *ledger.Store, query string, args ...any) int {
	t.Helper()
	var n int
	if err := st.DB().QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func apply(t *testing.T, st *ledger.Store, h ledger.Handler, batch ...ledger.Delivery) []ledger.Result {
	t.Helper()
	rs, err := st.ApplyBatch(context.Background(), batch, h, ledger.Budget{Work: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func TestSameIDTwiceInOneBatch(t *testing.T) {
	inBothModes(t, func(t *testing.T, st *ledger.Store) {
		rs := apply(t, st, recordEvent, delivery("m1", 1, "x"), delivery("m1", 7, "x"), delivery("m2", 8, "y"))
		if got := outcomes(rs); !equal(got, []ledger.Outcome{ledger.Applied, ledger.Duplicate, ledger.Applied}) {
			t.Fatalf("outcomes = %v", got)
		}
		if b := balance(t, st); b != 2 {
			t.Fatalf("balance = %d, want 2: applied twice or lost", b)
		}
		if n := count(t, st, `SELECT count(*) FROM events`); n != 2 {
			t.Fatalf("events rows = %d, want 2", n)
		}
		// The later copy is where prune must look: its sequence is kept.
		if n := count(t, st, `SELECT last_seq FROM processed_messages WHERE message_id = 'm1'`); n != 7 {
			t.Fatalf("last_seq of m1 = %d, want 7", n)
		}
	})
}

func TestSameIDDifferentPayloadInOneBatch(t *testing.T) {
	inBothModes(t, func(t *testing.T, st *ledger.Store) {
		rs := apply(t, st, recordEvent, delivery("m1", 1, "x"), delivery("m1", 2, "other"))
		if got := outcomes(rs); !equal(got, []ledger.Outcome{ledger.Applied, ledger.Conflict}) || !errors.Is(rs[1].Err, ledger.ErrConflict) {
			t.Fatalf("results = %+v", rs)
		}
		if b := balance(t, st); b != 1 {
			t.Fatalf("balance = %d, want 1", b)
		}
		cs, err := st.Conflicts(context.Background(), 10)
		if err != nil || len(cs) != 1 || cs[0].MessageID != "m1" || cs[0].Sequence != 2 {
			t.Fatalf("conflicts = %+v, %v", cs, err)
		}
	})
}

// A copy whose first copy in the batch failed is a new message: it must be
// tried, not taken for a duplicate of something never applied.
func TestFailedFirstCopyLeavesTheSecondToApply(t *testing.T) {
	inBothModes(t, func(t *testing.T, st *ledger.Store) {
		failFirst := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
			if err := recordEvent(ctx, tx, d); err != nil {
				return err
			}
			if d.Sequence == 1 {
				return errors.New("first copy fails after writing")
			}
			return nil
		}
		rs := apply(t, st, failFirst, delivery("m1", 1, "x"), delivery("m1", 2, "x"))
		if got := outcomes(rs); !equal(got, []ledger.Outcome{ledger.Failed, ledger.Applied}) {
			t.Fatalf("outcomes = %v", got)
		}
		if b, n := balance(t, st), count(t, st, `SELECT count(*) FROM events`); b != 1 || n != 1 {
			t.Fatalf("balance %d, events %d: want 1 and 1", b, n)
		}
	})
}

// One message failing in a batch costs only itself: every other message of
// the batch is applied once, with its queued rows, and the failed one
// leaves nothing behind.
func TestOneFailureCostsOnlyItself(t *testing.T) {
	inBothModes(t, func(t *testing.T, st *ledger.Store) {
		failOne := recordFailing("m25")
		var batch []ledger.Delivery
		for i := range 50 {
			batch = append(batch, delivery(fmt.Sprintf("m%d", i), uint64(i+1), fmt.Sprint(i)))
		}
		rs := apply(t, st, failOne, batch...)
		for i, r := range rs {
			if want := map[bool]ledger.Outcome{true: ledger.Failed, false: ledger.Applied}[i == 25]; r.Outcome != want {
				t.Fatalf("result %d = %v, want %v", i, r.Outcome, want)
			}
		}
		if b := balance(t, st); b != 49 {
			t.Fatalf("balance = %d, want 49", b)
		}
		if n := count(t, st, `SELECT count(*) FROM events WHERE message_id = 'm25'`) +
			count(t, st, `SELECT count(*) FROM processed_messages WHERE message_id = 'm25'`); n != 0 {
			t.Fatalf("the failed message left %d rows", n)
		}
		if n := count(t, st, `SELECT count(*) FROM events`); n != 49 {
			t.Fatalf("events rows = %d, want 49", n)
		}
	})
}

// A queued row that fails its insert (a CHECK here) cannot be pinned on a
// message inside a multi-row statement: the batch is redone inserting each
// row at once, so only that message fails.
func TestInsertLaterFailureCostsOnlyItsMessage(t *testing.T) {
	inBothModes(t, func(t *testing.T, st *ledger.Store) {
		rs := apply(t, st, recordEvent, delivery("m1", 1, "ok"), delivery("m2", 2, "bad"), delivery("m3", 3, "ok"))
		if got := outcomes(rs); !equal(got, []ledger.Outcome{ledger.Applied, ledger.Failed, ledger.Applied}) {
			t.Fatalf("outcomes = %v (%v)", got, rs[1].Err)
		}
		if b, n := balance(t, st), count(t, st, `SELECT count(*) FROM events`); b != 2 || n != 2 {
			t.Fatalf("balance %d, events %d: want 2 and 2", b, n)
		}
	})
}

func TestInsertLaterIsHeldToWhatAHandlerMayDo(t *testing.T) {
	t.Parallel()
	st := openEventsStore(t, false)
	forged := &ledger.Insert{Table: "processed_messages", Columns: []string{"message_id"}}
	h := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		if d.MessageID == "forger" {
			return tx.InsertLater(forged, "someone-else")
		}
		return recordEvent(ctx, tx, d)
	}
	rs := apply(t, st, h, delivery("m1", 1, "x"), delivery("forger", 2, "y"))
	if rs[0].Outcome != ledger.Applied || rs[1].Outcome != ledger.Failed || !errors.Is(rs[1].Err, ledger.ErrTransactionControl) {
		t.Fatalf("results = %+v", rs)
	}
	if n := count(t, st, `SELECT count(*) FROM processed_messages WHERE message_id = 'someone-else'`); n != 0 {
		t.Fatal("a handler wrote the ledger through InsertLater")
	}
	bad := []*ledger.Insert{{Table: "x; DROP TABLE balances", Columns: []string{"a"}}, {Table: "events"},
		{Table: "events", Columns: []string{"message_id"}, OnConflict: "DO NOTHING; DELETE FROM balances"}}
	for _, ins := range bad {
		rs := apply(t, st, func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
			return tx.InsertLater(ins, make([]any, len(ins.Columns))...)
		}, delivery("b-"+ins.Table, 9, "z"))
		if rs[0].Outcome != ledger.Failed {
			t.Fatalf("InsertLater(%+v) = %+v, want a failure", ins, rs[0])
		}
	}
}

// The watchdog ends a handler's statement when the batch's deadline passes
// even when the handler ran it under a context that never ends: the
// driver's own cancellation could not.
func TestWatchdogInterruptsPastTheDeadline(t *testing.T) {
	t.Parallel()
	st := openEventsStore(t, true)
	if !ledger.WatchdogArmed(st) {
		t.Fatal("the watchdog has no handle on the writer: the driver's conn changed shape")
	}
	endless := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		if d.MessageID != "endless" {
			return credit(ctx, tx, d)
		}
		_, err := tx.ExecContext(context.Background(), `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c)
			SELECT count(*) FROM c`)
		return err
	}
	type applied struct {
		rs  []ledger.Result
		err error
	}
	done := make(chan applied, 1)
	go func() {
		rs, err := st.ApplyBatch(context.Background(), []ledger.Delivery{delivery("m1", 1, "a"), delivery("endless", 2, "b"), delivery("m3", 3, "c")},
			endless, ledger.Budget{Work: 300 * time.Millisecond})
		done <- applied{rs, err}
	}()
	var rs []ledger.Result
	select {
	case a := <-done:
		if a.err != nil {
			t.Fatal(a.err)
		}
		rs = a.rs
	case <-time.After(30 * time.Second):
		t.Fatal("the statement was not interrupted 30s after its 300ms deadline")
	}
	if got := outcomes(rs); !equal(got, []ledger.Outcome{ledger.Applied, ledger.Failed, ledger.Failed}) || !errors.Is(rs[1].Err, context.DeadlineExceeded) {
		t.Fatalf("results = %+v", rs)
	}
	if b := balance(t, st); b != 1 {
		t.Fatalf("balance = %d, want 1 (m1 kept: the read left the transaction whole)", b)
	}
}

func TestTablesUsedSeesThroughTriggers(t *testing.T) {
	t.Parallel()
	st := openEventsStore(t, false)
	if _, err := st.DB().Exec(`CREATE TABLE audit (n INTEGER);
		CREATE TRIGGER b_audit AFTER UPDATE ON balances BEGIN INSERT INTO audit SELECT count(*) FROM events; END`); err != nil {
		t.Fatal(err)
	}
	tables, err := st.TablesUsed(context.Background(), []string{`UPDATE balances SET amount = amount + 1 WHERE account = :a`})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"balances", "audit", "events"} {
		if !tables[want] {
			t.Fatalf("tables = %v, want %s among them", tables, want)
		}
	}
}

// InsertLater's rows bind a column once when every row of a statement has
// the same value there: each row must still get its own values, whichever
// row differs (the first, the last, one between) and whatever the type.
func TestInsertLaterRowsKeepTheirOwnValues(t *testing.T) {
	t.Parallel()
	ins := &ledger.Insert{Table: "rows", Columns: []string{"id", "s", "n", "b", "f"}}
	for _, odd := range []int{-1, 0, 3, 7} { // the row whose s and n differ; -1: none
		st := openEventsStore(t, false)
		if _, err := st.DB().Exec(`CREATE TABLE rows (id TEXT PRIMARY KEY, s, n, b, f)`); err != nil {
			t.Fatal(err)
		}
		var batch []ledger.Delivery
		for i := range 8 {
			batch = append(batch, delivery(fmt.Sprint(i), uint64(i+1), "x"))
		}
		h := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
			s, n := any("same"), any(int64(7))
			if d.MessageID == fmt.Sprint(odd) {
				s, n = "odd", int64(8)
			}
			return tx.InsertLater(ins, d.MessageID, s, n, []byte("b"), 1.5)
		}
		apply(t, st, h, batch...)
		want := 8
		if odd >= 0 {
			want = 7
		}
		if got := count(t, st, `SELECT count(*) FROM rows WHERE s = 'same' AND n = 7 AND b = x'62' AND f = 1.5`); got != want {
			t.Fatalf("odd row %d: %d rows hold the shared values, want %d", odd, got, want)
		}
		if odd >= 0 {
			if got := count(t, st, `SELECT count(*) FROM rows WHERE id = ? AND s = 'odd' AND n = 8`, fmt.Sprint(odd)); got != 1 {
				t.Fatalf("odd row %d lost its own values", odd)
			}
		}
	}
}

// A batch of hashSeparately (64) or more has its payloads hashed on a
// goroutine of its own, which a pass waits for only once it has the writer
// and has looked the ids up. A batch that fails before that (the writer
// busy: ErrBusy) must still not return with the goroutine reading the
// caller's payloads: a caller that reuses its buffers after ApplyBatch
// returned would have its new bytes hashed (the race detector does not see
// it: SHA-256 is assembly).
func TestApplyBatchDoesNotReadPayloadsAfterItReturns(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	// Hold the writer's one connection: the batch cannot begin.
	conn, err := st.DB().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer func() {
		conn.ExecContext(ctx, "ROLLBACK") //nolint:errcheck // the test's own hold
		conn.Close()
	}()
	buf := make([]byte, 4<<20) // hashed 64 times: long enough to be seen running
	batch := make([]ledger.Delivery, 64)
	for i := range batch {
		batch[i] = ledger.Delivery{MessageID: fmt.Sprint("id-", i), Stream: "S", Sequence: uint64(i + 1), Subject: "ev", Data: buf}
	}
	if _, err := st.ApplyBatch(ctx, batch, credit, ledger.Budget{Work: 20 * time.Millisecond}); !errors.Is(err, ledger.ErrBusy) {
		t.Fatalf("ApplyBatch with the writer held = %v, want ErrBusy", err)
	}
	// The caller takes its deliveries back. Under the race detector a read
	// of them after the return is a race with these writes.
	for i := range batch {
		batch[i].Data = nil
	}
	// Without it: a goroutine still in SHA-256. Not just one named
	// hashPayloads: after it closed its done channel (what ApplyBatch
	// waits for) the goroutine lives a moment longer, done.
	stacks := make([]byte, 1<<20)
	stacks = stacks[:runtime.Stack(stacks, true)]
	for _, g := range strings.Split(string(stacks), "\n\n") {
		if strings.Contains(g, "ledger.hashPayloads") && strings.Contains(g, "crypto/sha256") {
			t.Errorf("ApplyBatch returned (ErrBusy) while a goroutine of its own still hashes the caller's payloads:\n%s", g)
		}
	}
}
