package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

// A handler that overruns the batch deadline costs only itself and the
// messages whose turn never came (README: "a message that fails is rolled
// back alone ... and costs no other message of the batch"): a message
// applied before it is kept, and a redelivered duplicate before it is a
// Duplicate, acked. In an optimistic batch (no savepoints, the default
// once 16 batches in a row passed) the overrun takes the whole transaction
// and no time is left to redo it: both come back Failed, are nak'ed and
// count a delivery, and one on its last allowed delivery is dead-lettered
// (consumer.sortFailure) although it was applied, or is innocent.
func TestOverrunCostsOnlyItself(t *testing.T) {
	t.Parallel()
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			st := openEventsStore(t, true)
			apply(t, st, credit, delivery("dup", 1, "d"))
			ledger.UseSavepoints(st, m.savepoints)
			h := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
				if d.MessageID != "slow" {
					return recordEvent(ctx, tx, d)
				}
				// A read that never ends: only the watchdog stops it, and
				// an interrupted read leaves the transaction whole.
				_, err := tx.ExecContext(ctx, `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c`)
				return err
			}
			rs, err := st.ApplyBatch(context.Background(), []ledger.Delivery{delivery("dup", 1, "d"), delivery("m1", 2, "a"), delivery("slow", 3, "b")},
				h, ledger.Budget{Work: 2 * time.Second}) // ample for the two quick ones on a loaded machine (300 ms was not, under -race)
			if err != nil {
				t.Fatal(err)
			}
			if !errors.Is(rs[2].Err, context.DeadlineExceeded) {
				t.Fatalf("slow = %+v, want the deadline", rs[2])
			}
			if got := outcomes(rs); !equal(got, []ledger.Outcome{ledger.Duplicate, ledger.Applied, ledger.Failed}) {
				t.Fatalf("outcomes = %v (dup: %v, m1: %v): messages before the overrun paid for it", got, rs[0].Err, rs[1].Err)
			}
		})
	}
}

// A pipelined batch commits at synchronous=NORMAL on the writer's one
// connection; every way it ends (committed, redone after a failure,
// everything failed, refused as busy) must hand the connection back at
// FULL, or the next outbox claim, dead letter or prune commits unsynced.
func TestPipelinedLeavesTheWriterAtFull(t *testing.T) {
	t.Parallel()
	st := openEventsStore(t, false)
	syncLevel := func() int { return count(t, st, `PRAGMA synchronous`) }
	if syncLevel() != 2 {
		t.Fatalf("synchronous = %d at open", syncLevel())
	}
	fail := recordFailing("bad")
	for _, batch := range [][]ledger.Delivery{
		{delivery("a", 1, "x")},
		{delivery("b", 2, "x"), delivery("bad", 3, "x"), delivery("c", 4, "x")}, // optimistic, redone with savepoints
		{delivery("d", 5, "bad"), delivery("e", 6, "x")},                        // InsertLater flush fails, redone at once
		{delivery("bad", 7, "x")},
	} {
		rs, p, err := st.ApplyBatchPipelined(context.Background(), batch, fail, ledger.Budget{Work: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if got := syncLevel(); got != 2 {
			t.Fatalf("after %v: the writer is left at synchronous=%d", outcomes(rs), got)
		}
		if err := p.Durable(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// A batch that cannot get the writer in time.
	conn, err := st.DB().Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = st.ApplyBatchPipelined(context.Background(), []ledger.Delivery{delivery("f", 8, "x")}, fail, ledger.Budget{Work: 50 * time.Millisecond})
	conn.Close()
	if !errors.Is(err, ledger.ErrBusy) {
		t.Fatalf("err = %v, want ErrBusy", err)
	}
	if got := syncLevel(); got != 2 {
		t.Fatalf("after a busy batch the writer is at synchronous=%d", got)
	}
	if b := balance(t, st); b != 4 {
		t.Fatalf("balance = %d, want 4 (a, b, c, e)", b)
	}
}

// One failing message must cost only itself. An optimistic batch that
// meets a failure is rolled back and redone with savepoints, running every
// handler before the failure a second time under the same deadline: a
// batch whose work takes more than half its deadline then runs out of time
// in the redo, and the messages after the failure fail too ("the batch
// deadline passed before its turn"), nak'ed and counted a delivery -
// dead-lettered on their last. With savepoints the same batch fits.
func TestRedoMustNotCostOthersTheirTurn(t *testing.T) {
	inBothModes(t, func(t *testing.T, st *ledger.Store) {
		h := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
			if err := recordEvent(ctx, tx, d); err != nil {
				return err
			}
			select { // 50 ms of work (a call to a local service, say)
			case <-time.After(50 * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
			if d.MessageID == "m6" {
				return errors.New("m6 fails")
			}
			return nil
		}
		var batch []ledger.Delivery
		for i := range 10 {
			batch = append(batch, delivery(fmt.Sprintf("m%d", i), uint64(i+1), "x"))
		}
		// 10 × 50 ms = 500 ms of work within a 700 ms deadline.
		rs, err := st.ApplyBatch(context.Background(), batch, h, ledger.Budget{Work: 700 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rs {
			if want := map[bool]ledger.Outcome{true: ledger.Failed, false: ledger.Applied}[i == 6]; r.Outcome != want {
				t.Errorf("m%d = %v (%v), want %v", i, r.Outcome, r.Err, want)
			}
		}
	})
}
