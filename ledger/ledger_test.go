package ledger_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

func openStore(tb testing.TB) *ledger.Store {
	tb.Helper()
	st, err := ledger.Open(filepath.Join(tb.TempDir(), "ledger.db"), ledger.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	if _, err := st.DB().Exec(`CREATE TABLE balances (account TEXT PRIMARY KEY, amount INTEGER NOT NULL)`); err != nil {
		tb.Fatal(err)
	}
	return st
}

// credit adds 1 to account "a" for every message it applies.
func credit(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO balances VALUES ('a', 1)
		ON CONFLICT (account) DO UPDATE SET amount = amount + 1`)
	return err
}

func balance(tb testing.TB, st *ledger.Store) int {
	tb.Helper()
	var n int
	err := st.DB().QueryRow(`SELECT amount FROM balances WHERE account = 'a'`).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0
	}
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

func delivery(id string, seq uint64, data string) ledger.Delivery {
	return ledger.Delivery{MessageID: id, Stream: "S", Sequence: seq, Subject: "ev", Data: []byte(data), Delivered: 1}
}

func outcomes(rs []ledger.Result) []ledger.Outcome {
	out := make([]ledger.Outcome, len(rs))
	for i, r := range rs {
		out[i] = r.Outcome
	}
	return out
}

func TestApplyBatchOutcomes(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	boom := errors.New("boom")
	failOn := func(id string) ledger.Handler {
		return func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
			if err := credit(ctx, tx, d); err != nil {
				return err
			}
			if d.MessageID == id {
				return boom // after writing: the savepoint must undo the write
			}
			return nil
		}
	}
	rs, err := st.ApplyBatch(ctx, []ledger.Delivery{
		delivery("m1", 1, "a"), delivery("m2", 2, "b"), delivery("m3", 3, "c"), delivery("m1", 4, "a"),
	}, failOn("m2"), ledger.Budget{})
	if err != nil {
		t.Fatal(err)
	}
	want := []ledger.Outcome{ledger.Applied, ledger.Failed, ledger.Applied, ledger.Duplicate}
	if got := outcomes(rs); !equal(got, want) {
		t.Fatalf("outcomes = %v, want %v", got, want)
	}
	if !errors.Is(rs[1].Err, boom) {
		t.Fatalf("failed result err = %v, want boom", rs[1].Err)
	}
	if got := balance(t, st); got != 2 {
		t.Fatalf("balance = %d, want 2", got)
	}

	// Redelivery: m2 now succeeds, m1 is a duplicate, m3 with another payload conflicts.
	rs, err = st.ApplyBatch(ctx, []ledger.Delivery{
		delivery("m1", 1, "a"), delivery("m2", 2, "b"), delivery("m3", 5, "other"),
	}, credit, ledger.Budget{})
	if err != nil {
		t.Fatal(err)
	}
	want = []ledger.Outcome{ledger.Duplicate, ledger.Applied, ledger.Conflict}
	if got := outcomes(rs); !equal(got, want) {
		t.Fatalf("outcomes = %v, want %v", got, want)
	}
	var ce *ledger.ConflictError
	if !errors.Is(rs[2].Err, ledger.ErrConflict) || !errors.As(rs[2].Err, &ce) || ce.MessageID != "m3" {
		t.Fatalf("conflict err = %v", rs[2].Err)
	}
	if got := balance(t, st); got != 3 {
		t.Fatalf("balance = %d, want 3", got)
	}
	stats, err := st.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Processed != 3 || stats.Conflicts != 1 || stats.SchemaVersion != ledger.SchemaVersion() {
		t.Fatalf("stats = %+v", stats)
	}
	cs, err := st.Conflicts(ctx, 0)
	if err != nil || len(cs) != 1 || cs[0].Sequence != 5 {
		t.Fatalf("conflicts = %+v, %v", cs, err)
	}
}

func TestApplyBatchEmptyID(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	rs, err := st.ApplyBatch(context.Background(), []ledger.Delivery{delivery("", 1, "x")}, credit, ledger.Budget{})
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Outcome != ledger.Failed || !errors.Is(rs[0].Err, ledger.ErrEmptyMessageID) {
		t.Fatalf("result = %+v", rs[0])
	}
}

// A handler whose statement is interrupted by its deadline makes SQLite roll
// back the whole transaction. Nothing of the batch may survive half-done, and
// a retry with time to spare applies every message once.
func TestApplyBatchOverrunIsRolledBackAndRetried(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	slow := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		if err := credit(ctx, tx, d); err != nil {
			return err
		}
		if d.MessageID != "slow" {
			return nil
		}
		// An endless write, stopped only by the context's interrupt.
		_, err := tx.ExecContext(ctx, `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c)
			INSERT INTO balances SELECT 'x' || x, x FROM c WHERE x < 0`)
		return err
	}
	batch := []ledger.Delivery{delivery("m1", 1, "a"), delivery("slow", 2, "b"), delivery("m3", 3, "c")}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	rs, err := st.ApplyBatch(ctx, batch, slow, ledger.Budget{})
	if err != nil {
		t.Fatal(err)
	}
	if got := outcomes(rs); !equal(got, []ledger.Outcome{ledger.Failed, ledger.Failed, ledger.Failed}) {
		t.Fatalf("outcomes = %v", got)
	}
	if !errors.Is(rs[1].Err, context.DeadlineExceeded) {
		t.Fatalf("slow err = %v", rs[1].Err)
	}
	if got := balance(t, st); got != 0 {
		t.Fatalf("balance = %d, want 0", got)
	}
	if stats, _ := st.Stats(context.Background()); stats.Processed != 0 {
		t.Fatalf("processed = %d, want 0", stats.Processed)
	}
	rs, err = st.ApplyBatch(context.Background(), batch, credit, ledger.Budget{})
	if err != nil {
		t.Fatal(err)
	}
	if got := outcomes(rs); !equal(got, []ledger.Outcome{ledger.Applied, ledger.Applied, ledger.Applied}) {
		t.Fatalf("outcomes = %v", got)
	}
	if got := balance(t, st); got != 3 {
		t.Fatalf("balance = %d, want 3", got)
	}
}

// A failure that takes the whole transaction with it while time is left:
// the batch is redone without the culprit, so the others still commit.
func TestApplyBatchLostTransactionRedoneWithoutCulprit(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	poison := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		if err := credit(ctx, tx, d); err != nil {
			return err
		}
		if d.MessageID == "poison" {
			// ROLLBACK ends the transaction itself, as SQLITE_FULL would.
			_, err := tx.ExecContext(ctx, "ROLLBACK")
			if err == nil {
				err = errors.New("poisoned")
			}
			return err
		}
		return nil
	}
	rs, err := st.ApplyBatch(context.Background(), []ledger.Delivery{
		delivery("m1", 1, "a"), delivery("poison", 2, "b"), delivery("m3", 3, "c"),
	}, poison, ledger.Budget{})
	if err != nil {
		t.Fatal(err)
	}
	if got := outcomes(rs); !equal(got, []ledger.Outcome{ledger.Applied, ledger.Failed, ledger.Applied}) {
		t.Fatalf("outcomes = %v", got)
	}
	if got := balance(t, st); got != 2 {
		t.Fatalf("balance = %d, want 2", got)
	}
}

// A handler that ignores its context and returns nil after the deadline is
// rolled back all the same.
func TestApplyBatchLateSuccessIsRolledBack(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	late := func(hctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		if err := credit(hctx, tx, d); err != nil {
			return err
		}
		cancel() // the deadline passes while the handler is still at work
		return nil
	}
	rs, err := st.ApplyBatch(ctx, []ledger.Delivery{delivery("m1", 1, "a")}, late, ledger.Budget{})
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Outcome != ledger.Failed || !errors.Is(rs[0].Err, context.Canceled) {
		t.Fatalf("result = %+v", rs[0])
	}
	if got := balance(t, st); got != 0 {
		t.Fatalf("balance = %d, want 0", got)
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ledger.db")
	st, err := ledger.Open(path, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	// A newer jetledger wrote it (the ledger's own writer refuses to).
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec("PRAGMA user_version = 999"); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	_, err = ledger.Open(path, ledger.Config{})
	if !errors.Is(err, ledger.ErrSchemaTooNew) {
		t.Fatalf("err = %v, want ErrSchemaTooNew", err)
	}
}

func TestOpenConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name    string
		path    string
		cfg     ledger.Config
		wantErr error
	}{
		{name: "defaults", path: filepath.Join(dir, "a.db")},
		{name: "empty path", path: "", wantErr: ledger.ErrInvalidConfig},
		{name: "query in path", path: filepath.Join(dir, "b.db?x=1"), wantErr: ledger.ErrInvalidConfig},
		{name: "bad synchronous", path: filepath.Join(dir, "c.db"), cfg: ledger.Config{Synchronous: "sometimes"}, wantErr: ledger.ErrInvalidConfig},
		{name: "reopen", path: filepath.Join(dir, "a.db")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := ledger.Open(tt.path, tt.cfg)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if st != nil {
				st.Close()
			}
		})
	}
}

func TestDeadLetters(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	dl := ledger.DeadLetter{MessageID: "m1", Stream: "S", Sequence: 7, Subject: "ev",
		Headers: map[string][]string{"Nats-Msg-Id": {"m1"}}, Payload: []byte("{"), Reason: "first", Deliveries: 1}
	if err := st.RecordDeadLetters(ctx, []ledger.DeadLetter{dl}); err != nil {
		t.Fatal(err)
	}
	dl.Reason, dl.Deliveries = "second", 2
	if err := st.RecordDeadLetters(ctx, []ledger.DeadLetter{dl}); err != nil {
		t.Fatal(err)
	}
	got, err := st.DeadLetters(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Reason != "second" || got[0].Deliveries != 2 || got[0].Headers["Nats-Msg-Id"][0] != "m1" || string(got[0].Payload) != "{" {
		t.Fatalf("dead letters = %+v", got)
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A handler failing because the database is full fails the batch, not the
// message: a resource fault must never walk a message toward a dead letter.
func TestApplyBatchDatabaseFullFailsTheBatch(t *testing.T) {
	t.Parallel()
	st, err := ledger.Open(filepath.Join(t.TempDir(), "full.db"), ledger.Config{MaxSizeBytes: 200_000})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.DB().Exec(`CREATE TABLE blobs (b BLOB)`); err != nil {
		t.Fatal(err)
	}
	fill := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO blobs VALUES (zeroblob(50000))`)
		return err
	}
	ctx := context.Background()
	for i := 0; ; i++ {
		rs, err := st.ApplyBatch(ctx, []ledger.Delivery{delivery(fmt.Sprint("m", i), uint64(i+1), "x")}, fill, ledger.Budget{})
		if err != nil {
			if !errors.Is(err, ledger.ErrFull) {
				t.Fatalf("err = %v, want ErrFull", err)
			}
			return
		}
		if rs[0].Outcome != ledger.Applied {
			t.Fatalf("message %d: %v (%v); a full database must fail the batch", i, rs[0].Outcome, rs[0].Err)
		}
		if i > 100 {
			t.Fatal("the database never filled up")
		}
	}
}

// A handler cannot end or split the batch transaction: transaction control
// through its Tx is refused (SQLite's authorizer sees it, so a comment in
// front does not hide it), and the message that tried fails alone.
func TestHandlerCannotControlTheTransaction(t *testing.T) {
	t.Parallel()
	for _, stmt := range []string{
		"COMMIT", "ROLLBACK", "RELEASE msg", "SAVEPOINT mine", "BEGIN", "END",
		"/* hidden */ COMMIT", "-- hidden\nROLLBACK TO msg",
		"ATTACH DATABASE ':memory:' AS other", "DETACH DATABASE main", "PRAGMA synchronous = OFF", "PRAGMA main.journal_mode = DELETE",
	} {
		t.Run(stmt, func(t *testing.T) {
			st := openStore(t)
			ctx := context.Background()
			var execErr error
			h := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
				if err := credit(ctx, tx, d); err != nil {
					return err
				}
				if d.MessageID != "m2" {
					return nil
				}
				_, execErr = tx.ExecContext(ctx, stmt)
				return errors.New("m2 fails after its statement")
			}
			rs, err := st.ApplyBatch(ctx, []ledger.Delivery{delivery("m1", 1, "a"), delivery("m2", 2, "b"), delivery("m3", 3, "c")}, h, ledger.Budget{})
			if err != nil {
				t.Fatal(err)
			}
			if got := outcomes(rs); !equal(got, []ledger.Outcome{ledger.Applied, ledger.Failed, ledger.Applied}) {
				t.Fatalf("outcomes %v", got)
			}
			if !errors.Is(execErr, ledger.ErrTransactionControl) && !errors.Is(execErr, ledger.ErrFixedSetting) {
				t.Fatalf("Exec(%q) err = %v, want ErrTransactionControl or ErrFixedSetting", stmt, execErr)
			}
			var rows int
			if err := st.DB().QueryRow(`SELECT count(*) FROM processed_messages`).Scan(&rows); err != nil {
				t.Fatal(err)
			}
			if b := balance(t, st); b != 2 || rows != 2 {
				t.Fatalf("balance %d, ledger rows %d; want 2 and 2 (m2 rolled back, m1 and m3 kept)", b, rows)
			}
		})
	}
}

// Opening a ledger and reading it never waits for the write lock: a
// `jetledger status` or a batch's new connection must not stall behind
// another process's long transaction.
func TestOpenAndReadDoNotWaitForTheWriteLock(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "l.db")
	st := openAt(t, path)
	st.Close()
	other, err := sql.Open("sqlite", path+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.Begin() // another process holds the write lock throughout
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	began := time.Now()
	st2 := openAt(t, path)
	if _, err := st2.Stats(ctx); err != nil {
		t.Fatalf("stats while another process writes: %v", err)
	}
	if took := time.Since(began); took > time.Second {
		t.Fatalf("open and stats took %s behind another writer", took)
	}
}

func openAt(tb testing.TB, path string) *ledger.Store {
	tb.Helper()
	st, err := ledger.Open(path, ledger.Config{BusyTimeout: 5 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}

// Two processes opening a new ledger at once both succeed: each migration
// reads the schema version inside its own write transaction.
func TestConcurrentOpenOfNewLedger(t *testing.T) {
	t.Parallel()
	for i := range 20 {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("l%d.db", i))
		errs := make(chan error, 2)
		for range 2 {
			go func() {
				st, err := ledger.Open(path, ledger.Config{})
				if err == nil {
					err = st.Close()
				}
				errs <- err
			}()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
		}
	}
}

// The ledger rows of a batch bind the stream and the time once per
// statement: a batch mixing streams and subjects must still record each
// message's own, in every size of statement.
func TestApplyBatchRecordsEachMessagesOwnRow(t *testing.T) {
	t.Parallel()
	at := time.UnixMilli(1_700_000_000_123)
	st, err := ledger.Open(filepath.Join(t.TempDir(), "ledger.db"), ledger.Config{Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var batch []ledger.Delivery
	for i := range 300 { // runs of 1, 2, 37 and 260 rows: several statement shapes
		stream := "S"
		switch {
		case i == 1, i == 2:
			stream = "T"
		case i >= 3 && i < 40:
			stream = "U"
		}
		batch = append(batch, ledger.Delivery{MessageID: fmt.Sprintf("m%03d", i), Stream: stream, Sequence: uint64(1000 + i),
			Subject: fmt.Sprintf("ev.%d", i%7), Data: []byte(fmt.Sprint(i)), Delivered: 1})
	}
	if _, err := st.ApplyBatch(context.Background(), batch, func(context.Context, *ledger.Tx, ledger.Delivery) error { return nil }, ledger.Budget{}); err != nil {
		t.Fatal(err)
	}
	rows, err := st.DB().Query(`SELECT message_id, stream, stream_seq, last_seq, subject, processed_at, last_seen_at FROM processed_messages ORDER BY message_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for ; rows.Next(); n++ {
		var id, stream, subject string
		var seq, last, processed, seen int64
		if err := rows.Scan(&id, &stream, &seq, &last, &subject, &processed, &seen); err != nil {
			t.Fatal(err)
		}
		d := batch[n]
		if id != d.MessageID || stream != d.Stream || seq != int64(d.Sequence) || last != seq || subject != d.Subject ||
			processed != at.UnixMilli() || seen != at.UnixMilli() {
			t.Fatalf("row %d = %s %s seq %d last %d %s at %d/%d, want %s %s seq %d %s at %d", n, id, stream, seq, last, subject, processed, seen,
				d.MessageID, d.Stream, d.Sequence, d.Subject, at.UnixMilli())
		}
	}
	if n != len(batch) {
		t.Fatalf("%d rows, want %d", n, len(batch))
	}
}
