package ledger_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

// gatedLog is memLog whose pipelined entries (AppendAs) wait for gate
// before they are appended, then fail with fail if it is set.
type gatedLog struct {
	memLog
	gate chan struct{}
	fail error
}

func (l *gatedLog) AppendAs(ctx context.Context, after uint64, _ string, parts [][]byte) error {
	<-l.gate
	if l.fail != nil {
		return l.fail
	}
	return l.Append(ctx, after, parts)
}

// A write after a pipelined batch waits for that batch's entry before its
// own: the log gets them in order, though the first was still on its way
// when the second began. When the first's entry fails, its Durable says
// so (ErrNotChangelogOwner: none of it is acknowledged), the write after
// it fails too, and the store writes nothing more; the batch stays in the
// file, named by Unlogged, until SettleUnlogged undoes it, after which
// the file is as before the batch and the store takes the log over again.
func TestAWriteAfterAPipelinedBatchWaitsForItsEntry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	budget := ledger.Budget{Work: time.Minute}
	for _, fail := range []bool{false, true} {
		log := &gatedLog{memLog: memLog{max: 1 << 20}, gate: make(chan struct{})}
		if fail {
			log.fail = errors.New("fenced: another owner wrote the entry's place")
		}
		st := openWithLog(t, filepath.Join(t.TempDir(), "a.db"), log)
		if err := st.TakeOver(ctx, "log1", "a", 0, 0); err != nil {
			t.Fatal(err)
		}
		before := dump(t, st)
		_, first, err := st.ApplyBatchPipelined(ctx, batchOf(0, 5, 0), creditAndNote, budget)
		if err != nil {
			t.Fatal(err)
		}
		opens := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
			close(log.gate) // the first batch's entry goes now, while this one works
			return creditAndNote(ctx, tx, d)
		}
		_, nextErr := st.ApplyBatch(ctx, batchOf(5, 1, 0), opens, budget)
		durable := first.Durable(ctx)
		if !fail {
			if nextErr != nil || durable != nil {
				t.Fatalf("the batch after a pipelined one: %v; the pipelined one's Durable: %v", nextErr, durable)
			}
			if pos, err := st.LoggedPosition(ctx); err != nil || pos.Seq != 3 {
				t.Fatalf("LoggedPosition = %+v, %v; want entry 3", pos, err)
			}
			if n := len(log.entries); n != 3 {
				t.Fatalf("the log holds %d entries, want the take-over's and the two batches' in order", n)
			}
			continue
		}
		if !errors.Is(durable, ledger.ErrNotChangelogOwner) || !errors.Is(nextErr, ledger.ErrNotChangelogOwner) {
			t.Fatalf("the pipelined batch's entry failed: its Durable %v, the batch after %v; want ErrNotChangelogOwner for both", durable, nextErr)
		}
		if n := count(t, st, `SELECT count(*) FROM processed_messages`); n != 5 {
			t.Fatalf("the file holds %d rows, want the pipelined batch's 5 (committed, its entry failed) and not the one after", n)
		}
		if _, err := st.LoggedPosition(ctx); !errors.Is(err, ledger.ErrNotChangelogOwner) {
			t.Fatalf("LoggedPosition of a file holding the batch whose entry failed: %v, want ErrNotChangelogOwner (an owner never says it holds it)", err)
		}
		u, ok, err := st.Unlogged(ctx)
		if err != nil || !ok || u.Log != "log1" || u.Seq != 2 {
			t.Fatalf("Unlogged = %+v, %v, %v; want entry 2 of log1", u, ok, err)
		}
		last := uint64(len(log.entries))
		if err := st.TakeOver(ctx, "log1", "a", last, last); !errors.Is(err, ledger.ErrChangesDoNotFit) {
			t.Fatalf("a take-over before the batch is settled: %v, want ErrChangesDoNotFit", err)
		}
		if err := st.SettleUnlogged(ctx, u, true); err != nil {
			t.Fatal(err)
		}
		if after := dump(t, st); after != before {
			t.Fatalf("the file after the batch was undone:\n%s\nwant as before it:\n%s", after, before)
		}
		if err := st.TakeOver(ctx, "log1", "a", last, last); err != nil {
			t.Fatal(err)
		}
		if rs := apply(t, st, creditAndNote, batchOf(0, 6, 0)...); rs[0].Outcome != ledger.Applied || rs[5].Outcome != ledger.Applied {
			t.Fatalf("the undone batch's messages delivered again: %v, want applied", rs)
		}
	}
}
