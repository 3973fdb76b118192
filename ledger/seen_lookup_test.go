package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jetledger/jetledger/ledger"
)

// A batch of more ids than one lookup binds (512), with ids stored by an
// earlier batch scattered across the chunks, copies of the batch's own ids
// on both sides of a chunk boundary, and conflicts: every stored id is a
// Duplicate or a Conflict, every new id applied exactly once.
func TestLookupAcrossChunks(t *testing.T) {
	inBothModes(t, func(t *testing.T, st *ledger.Store) {
		var first []ledger.Delivery
		for i := 0; i < 1300; i += 7 {
			first = append(first, delivery(fmt.Sprintf("id-%04d", i), uint64(i+1), fmt.Sprint(i)))
		}
		apply(t, st, credit, first...)
		base := balance(t, st)
		var batch []ledger.Delivery
		want := map[int]ledger.Outcome{}
		newIDs := 0
		for i := 0; i < 1300; i++ {
			data := fmt.Sprint(i)
			switch {
			case i%7 == 0 && i%3 == 0:
				data = "changed" // stored id, other payload
				want[len(batch)] = ledger.Conflict
			case i%7 == 0:
				want[len(batch)] = ledger.Duplicate
			default:
				want[len(batch)] = ledger.Applied
				newIDs++
			}
			batch = append(batch, delivery(fmt.Sprintf("id-%04d", i), uint64(2000+i), data))
		}
		// Copies of new ids far from their first copy: other chunks.
		for _, i := range []int{1, 511, 512, 513, 1024, 1299} {
			want[len(batch)] = ledger.Duplicate
			batch = append(batch, delivery(fmt.Sprintf("id-%04d", i), uint64(5000+i), fmt.Sprint(i)))
		}
		want[len(batch)] = ledger.Conflict
		batch = append(batch, delivery("id-0600", 9000, "different"))
		rs, err := st.ApplyBatch(context.Background(), batch, credit, ledger.Budget{})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rs {
			if r.Outcome != want[i] {
				t.Fatalf("result %d (%s) = %v, want %v", i, batch[i].MessageID, r, want[i])
			}
			if r.Outcome == ledger.Conflict && !errors.Is(r.Err, ledger.ErrConflict) {
				t.Fatalf("result %d: %v", i, r.Err)
			}
		}
		if b := balance(t, st); b != base+newIDs {
			t.Fatalf("balance = %d, want %d", b, base+newIDs)
		}
		if n := count(t, st, `SELECT count(*) FROM processed_messages`); n != 1300 {
			t.Fatalf("ledger rows = %d, want 1300", n)
		}
		if n := count(t, st, `SELECT last_seq FROM processed_messages WHERE message_id = 'id-0513'`); n != 5513 {
			t.Fatalf("last_seq of id-0513 = %d, want 5513", n)
		}
	})
}

// The same id three times in a batch with payloads x, y, x, the first copy
// failing: the second is the first applied copy (y), the third conflicts
// with it; nothing of the failed copy remains. And x, y, y with nothing
// failing: applied, conflict, conflict (two conflicts rows).
func TestThreeCopiesDifferentPayloads(t *testing.T) {
	inBothModes(t, func(t *testing.T, st *ledger.Store) {
		failSeq1 := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
			if err := recordEvent(ctx, tx, d); err != nil {
				return err
			}
			if d.Sequence == 1 {
				return errors.New("first copy fails")
			}
			return nil
		}
		rs := apply(t, st, failSeq1, delivery("m", 1, "x"), delivery("m", 2, "y"), delivery("m", 3, "x"))
		if got := outcomes(rs); !equal(got, []ledger.Outcome{ledger.Failed, ledger.Applied, ledger.Conflict}) {
			t.Fatalf("outcomes = %v", got)
		}
		if n := count(t, st, `SELECT count(*) FROM events WHERE message_id = 'm' AND CAST(data AS TEXT) = 'y'`); n != 1 || balance(t, st) != 1 {
			t.Fatalf("events y = %d, balance %d: want 1, 1", n, balance(t, st))
		}
		rs = apply(t, st, recordEvent, delivery("n", 4, "x"), delivery("n", 5, "y"), delivery("n", 6, "y"))
		if got := outcomes(rs); !equal(got, []ledger.Outcome{ledger.Applied, ledger.Conflict, ledger.Conflict}) {
			t.Fatalf("outcomes = %v", got)
		}
		if n := count(t, st, `SELECT count(*) FROM conflicts WHERE message_id IN ('m', 'n')`); n != 3 {
			t.Fatalf("conflicts rows = %d, want 3", n)
		}
		if b := balance(t, st); b != 2 {
			t.Fatalf("balance = %d, want 2", b)
		}
	})
}

// A batch's ledger rows are inserted sharing their stream and time; a batch
// of several streams (only the library can make one) and one of more rows
// than a statement takes are recorded row by row as they are, and the
// statements stay cached across batches.
func TestLedgerRowsAsRecorded(t *testing.T) {
	t.Parallel()
	st := openEventsStore(t, false)
	mixed := []ledger.Delivery{delivery("a", 1, "x"), delivery("b", 2, "y")}
	mixed[1].Stream, mixed[1].Subject = "T", "other"
	apply(t, st, credit, mixed...)
	var big []ledger.Delivery
	for i := 0; i < 300; i++ {
		big = append(big, delivery(fmt.Sprintf("m%03d", i), uint64(10+i), "z"))
	}
	apply(t, st, credit, big...)
	apply(t, st, credit, delivery("c", 400, "w"))
	for _, want := range []struct {
		id, stream, subject string
		seq                 int
	}{{"a", "S", "ev", 1}, {"b", "T", "other", 2}, {"m000", "S", "ev", 10}, {"m299", "S", "ev", 309}, {"c", "S", "ev", 400}} {
		var stream, subject string
		var seq, last int
		var sum []byte
		if err := st.DB().QueryRow(`SELECT stream, subject, stream_seq, last_seq, payload_sha256 FROM processed_messages WHERE message_id = ?`,
			want.id).Scan(&stream, &subject, &seq, &last, &sum); err != nil {
			t.Fatalf("%s: %v", want.id, err)
		}
		if stream != want.stream || subject != want.subject || seq != want.seq || last != want.seq || len(sum) != 32 {
			t.Fatalf("%s: stream %s subject %s seq %d last %d sum %d bytes; want %+v", want.id, stream, subject, seq, last, len(sum), want)
		}
	}
	if n := count(t, st, `SELECT count(*) FROM processed_messages WHERE processed_at <> last_seen_at OR processed_at = 0`); n != 0 {
		t.Fatalf("%d rows with processed_at unset or unlike last_seen_at", n)
	}
	if own, _ := ledger.CachedStatements(st); own == 0 {
		t.Fatal("no ledger statement is cached across batches")
	}
}
