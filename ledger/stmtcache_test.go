package ledger_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jetledger/jetledger/ledger"
)

// The authorizer refuses a handler's write to the ledger's tables when the
// statement is compiled inside the handler's window. The statement cache
// (tx.go) prepares the queries a batch noted *before the next batch*,
// outside any handler, where the authorizer lets everything through; a
// statement compiled there carries whatever triggers the schema has then,
// and runs in the next handler without being compiled again. A trigger
// added between two batches (a migration run on DB() by the application,
// say) on a table the handler writes then deletes ledger rows from inside
// the handler: the deleted id is applied a second time on redelivery.
func TestCachedStatementSkipsTheAuthorizer(t *testing.T) {
	t.Parallel()
	st := openEventsStore(t, true)
	if _, err := st.DB().Exec(`CREATE TABLE t (x TEXT)`); err != nil {
		t.Fatal(err)
	}
	h := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO t (x) VALUES (?)`, d.MessageID); err != nil {
			return err
		}
		return credit(ctx, tx, d)
	}
	if rs := apply(t, st, h, delivery("m1", 1, "a")); rs[0].Outcome != ledger.Applied {
		t.Fatalf("m1: %+v", rs[0])
	}
	// Between batches: a trigger on the handler's table that writes the ledger.
	if _, err := st.DB().Exec(`CREATE TRIGGER t_forge AFTER INSERT ON t BEGIN DELETE FROM processed_messages; END`); err != nil {
		t.Fatal(err)
	}
	rs := apply(t, st, h, delivery("m2", 2, "b"))
	if rs[0].Outcome != ledger.Failed || !errors.Is(rs[0].Err, ledger.ErrTransactionControl) {
		t.Errorf("m2 with a trigger writing the ledger = %+v, want Failed wrapping ErrTransactionControl", rs[0])
	}
	if n := count(t, st, `SELECT count(*) FROM processed_messages WHERE message_id = 'm1'`); n != 1 {
		t.Errorf("m1's ledger row was deleted by a handler's statement (rows = %d)", n)
	}
	// What that costs: the redelivery of m1 is applied again.
	rs = apply(t, st, credit, delivery("m1", 1, "a"))
	if rs[0].Outcome != ledger.Duplicate {
		t.Errorf("redelivered m1 = %v, want Duplicate: applied twice", rs[0].Outcome)
	}
	// Without the cache (a query never run before) the same trigger is refused.
	rs = apply(t, st, func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO t (x) VALUES (? || '')`, d.MessageID)
		return err
	}, delivery("m3", 3, "c"))
	if rs[0].Outcome != ledger.Failed || !errors.Is(rs[0].Err, ledger.ErrTransactionControl) {
		t.Fatalf("control: uncached statement = %+v, want refused", rs[0])
	}
}

// A batch's processed_messages rows are written after its handlers (one
// multi-row insert), so a handler sees the ledger as it was before the
// batch: not its own row, nor those of the messages before it in the
// batch. Handler's documentation and the README say so; this keeps it true
// in both modes, so that a change is a decision, not an accident.
func TestHandlerSeesTheLedgerAsOfTheBatchStart(t *testing.T) {
	inBothModes(t, func(t *testing.T, st *ledger.Store) {
		seen := map[string]int{}
		h := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM processed_messages WHERE message_id IN ('a', ?)`, d.MessageID).Scan(&n); err != nil {
				return err
			}
			seen[d.MessageID] = n
			return nil
		}
		apply(t, st, h, delivery("a", 1, "x"), delivery("b", 2, "y"))
		if seen["a"] != 0 || seen["b"] != 0 {
			t.Fatalf("ledger rows visible to the handler: a saw %d, b saw %d; want 0 and 0 (the ledger as of the batch's start)", seen["a"], seen["b"])
		}
		apply(t, st, h, delivery("c", 3, "z"))
		if seen["c"] != 1 {
			t.Fatalf("c saw %d rows of an earlier batch, want 1 (a)", seen["c"])
		}
	})
}
