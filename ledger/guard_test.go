package ledger_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/jetledger/jetledger/ledger"
)

// SQLite ends the whole transaction on a conflict resolved by ROLLBACK (a
// column declared ON CONFLICT ROLLBACK, INSERT OR ROLLBACK, RAISE(ROLLBACK)
// in a trigger) without a statement the authorizer could see. A handler
// using the usual "insert, and on a unique violation update instead" pattern
// must not then commit its UPDATE and outbox row on their own, without the
// message's ledger row, once per redelivery: the commit hook refuses them
// and the batch is redone without the message.
func TestConflictRollbackCannotEndTheBatch(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	if _, err := st.DB().Exec(`CREATE TABLE counters (k TEXT PRIMARY KEY ON CONFLICT ROLLBACK, n INTEGER NOT NULL);
		INSERT INTO counters VALUES ('hits', 0)`); err != nil {
		t.Fatal(err)
	}
	upsert := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO counters (k, n) VALUES ('hits', 1)`); err != nil {
			// Already there: count it instead (the classic upsert by hand).
			if _, err := tx.ExecContext(ctx, `UPDATE counters SET n = n + 1 WHERE k = 'hits'`); err != nil {
				return err
			}
		}
		_, err := tx.Enqueue(ctx, "webhook", d.Data)
		return err
	}
	for attempt := 1; attempt <= 3; attempt++ { // the first delivery, then two redeliveries
		_, err := st.ApplyBatch(ctx, []ledger.Delivery{delivery("m1", 1, `{"x":1}`)}, upsert, ledger.Budget{})
		t.Logf("delivery %d: ApplyBatch err = %v", attempt, err)
		if err == nil {
			break
		}
	}
	var hits, rows, outbox int
	if err := st.DB().QueryRow(`SELECT n FROM counters WHERE k = 'hits'`).Scan(&hits); err != nil {
		t.Fatal(err)
	}
	if err := st.DB().QueryRow(`SELECT count(*) FROM processed_messages`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if err := st.DB().QueryRow(`SELECT count(*) FROM outbox WHERE message_id = 'm1'`).Scan(&outbox); err != nil {
		t.Fatal(err)
	}
	// Exactly once means: hits and the outbox row commit with the ledger row
	// (hits 1, one row each), or not at all (hits 0, no rows).
	if !(hits == 1 && rows == 1 && outbox == 1) && !(hits == 0 && rows == 0 && outbox == 0) {
		t.Fatalf("after 3 deliveries of one message: counter = %d, ledger rows = %d, outbox rows for m1 = %d; "+
			"the handler's work and effect were committed without the ledger row", hits, rows, outbox)
	}
}

// A handler (or an --apply typo such as a missing WHERE) cannot re-queue
// sent outbox rows, which would be sent again, or forget ledger rows: writes
// to the ledger's own tables are the ledger's.
func TestHandlerCannotWriteTheLedgersTables(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	enqueue := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		_, err := tx.Enqueue(ctx, "webhook", d.Data)
		return err
	}
	if _, err := st.ApplyBatch(ctx, []ledger.Delivery{delivery("m1", 1, "a")}, enqueue, ledger.Budget{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().Exec(`UPDATE outbox SET status = 'sent', external_id = 'x'`); err != nil {
		t.Fatal(err)
	}
	meddle := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		if _, err := tx.ExecContext(ctx, `UPDATE outbox SET status = 'queued', external_id = NULL`); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM processed_messages WHERE message_id = 'm1'`)
		return err
	}
	rs, err := st.ApplyBatch(ctx, []ledger.Delivery{delivery("m2", 2, "b")}, meddle, ledger.Budget{})
	if err != nil {
		t.Fatal(err)
	}
	var queued, rows int
	st.DB().QueryRow(`SELECT count(*) FROM outbox WHERE status = 'queued'`).Scan(&queued)
	st.DB().QueryRow(`SELECT count(*) FROM processed_messages WHERE message_id = 'm1'`).Scan(&rows)
	if rs[0].Outcome == ledger.Applied && (queued > 0 || rows == 0) {
		t.Fatalf("a handler re-queued %d sent outbox row(s) and deleted m1's ledger row (%d left): the guard does not cover the ledger's tables", queued, rows)
	}
}

// A Tx is the message's while its handler runs: a goroutine that outlives
// the handler cannot write through it afterwards.
func TestTxIsDoneWhenTheHandlerReturns(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	var kept *ledger.Tx
	keep := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		kept = tx
		return nil
	}
	if _, err := st.ApplyBatch(ctx, []ledger.Delivery{delivery("m1", 1, "a"), delivery("m2", 2, "b")}, keep, ledger.Budget{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kept.ExecContext(ctx, `INSERT INTO balances VALUES ('late', 1)`); !errors.Is(err, ledger.ErrTxDone) {
		t.Fatalf("Exec after the handler returned: err = %v, want ErrTxDone", err)
	}
	if _, err := kept.Enqueue(ctx, "webhook", nil); !errors.Is(err, ledger.ErrTxDone) {
		t.Fatalf("Enqueue after the handler returned: err = %v, want ErrTxDone", err)
	}
}

// The stream and durable run recorded are the ledger's too: a handler that
// deletes them would send status and prune to another stream.
func TestHandlerCannotWriteTheRecordedConsumers(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	if err := st.RememberConsumer(ctx, "S", "d", ""); err != nil {
		t.Fatal(err)
	}
	forget := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM jetledger_consumers`)
		return err
	}
	rs, err := st.ApplyBatch(ctx, []ledger.Delivery{delivery("m1", 1, "a")}, forget, ledger.Budget{})
	if err != nil {
		t.Fatal(err)
	}
	if cs, err := st.Consumers(ctx); err != nil || len(cs) != 1 || rs[0].Outcome == ledger.Applied {
		t.Fatalf("a handler's delete of the recorded consumers: outcome %v, %d left (%v)", rs[0].Outcome, len(cs), err)
	}
}

// A TEMP table of a ledger table's name would take the ledger's own
// unqualified statements (SQLite resolves temp first): the ledger rows
// would go to a table of the writer's connection, gone when the process
// ends, and every message since would be applied again when redelivered
// after a restart. The guard refuses it, to handlers and to a --schema.
func TestTempTableCannotShadowTheLedger(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ledger.db")
	open := func() *ledger.Store {
		st, err := ledger.Open(path, ledger.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.DB().Exec(`CREATE TABLE IF NOT EXISTS balances (account TEXT PRIMARY KEY, amount INTEGER NOT NULL)`); err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := open()
	h := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		if d.MessageID == "shadow" {
			if _, err := tx.ExecContext(ctx, `CREATE TEMP TABLE processed_messages (message_id TEXT NOT NULL PRIMARY KEY,
				stream TEXT NOT NULL, stream_seq INTEGER NOT NULL, subject TEXT NOT NULL, payload_sha256 BLOB NOT NULL,
				processed_at INTEGER NOT NULL, last_seq INTEGER NOT NULL DEFAULT 0, last_seen_at INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID`); err != nil {
				return err
			}
		}
		return credit(ctx, tx, d)
	}
	rs, err := st.ApplyBatch(context.Background(), []ledger.Delivery{delivery("shadow", 1, "x"), delivery("m1", 2, "y")}, h, ledger.Budget{})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Outcome == ledger.Failed && errors.Is(rs[0].Err, ledger.ErrTransactionControl) {
		return // refused: the ledger's tables stay the ledger's
	}
	st = open()
	defer st.Close()
	rs, err = st.ApplyBatch(context.Background(), []ledger.Delivery{delivery("shadow", 1, "x"), delivery("m1", 2, "y")}, credit, ledger.Budget{})
	if err != nil {
		t.Fatal(err)
	}
	if got := outcomes(rs); !equal(got, []ledger.Outcome{ledger.Duplicate, ledger.Duplicate}) {
		t.Fatalf("redelivered after a restart: %v, want [duplicate duplicate]; balance %d: applied twice", got, balance(t, st))
	}
}

// Nor outside a batch, as a --schema runs: a temp table, view or virtual
// table of a ledger table's name is refused, whatever its case.
func TestSchemaCannotShadowTheLedger(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	for _, q := range []string{
		`CREATE TEMP TABLE processed_messages (message_id TEXT PRIMARY KEY)`,
		`CREATE TABLE temp.Outbox (id TEXT)`,
		`CREATE TEMP VIEW conflicts AS SELECT 1`,
		`CREATE VIRTUAL TABLE temp.dead_letters USING json_each('[]')`,
	} {
		if _, err := st.Exec(context.Background(), q); !errors.Is(err, ledger.ErrTransactionControl) {
			t.Errorf("%s: err = %v, want ErrTransactionControl", q, err)
		}
	}
	if _, err := st.Exec(context.Background(), `CREATE TEMP TABLE scratch (x)`); err != nil {
		t.Errorf("a temp table of another name: %v", err)
	}
}

// The source floors are the ledger's too: a handler that lowers one would
// let a stream made again copy back messages whose rows were pruned.
func TestHandlerCannotWriteTheSourceFloors(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	lower := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO jetledger_source_floors VALUES ('S', 'HUB', '', 1, 0)`)
		return err
	}
	rs, err := st.ApplyBatch(ctx, []ledger.Delivery{delivery("m1", 1, "a")}, lower, ledger.Budget{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ferr := st.SourceFloor(ctx, "S", "HUB"); !errors.Is(ferr, ledger.ErrNotFound) || rs[0].Outcome == ledger.Applied || !errors.Is(rs[0].Err, ledger.ErrTransactionControl) {
		t.Fatalf("a handler's write of the source floors: outcome %v (%v), floor err %v", rs[0].Outcome, rs[0].Err, ferr)
	}
}
