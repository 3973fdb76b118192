package ledger_test

import (
	"context"
	"testing"

	"github.com/jetledger/jetledger/ledger"
)

// Ids are any bytes (consumer.MessageID: "the ledger compares ids
// exactly"): one applied in one batch must be a Duplicate in the next, not
// re-applied, and must not fail the whole batch.
func TestOddBytesIDsDedupeAcrossBatches(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"a\x00b", "\xff\xfe\xfd", "x' OR 1=1 --", "ends-with-space ", "é", "e\u0301"} {
		for _, m := range modes {
			t.Run(m.name+"/"+id, func(t *testing.T) {
				t.Parallel()
				st := openEventsStore(t, m.savepoints)
				rs := apply(t, st, credit, delivery(id, 1, "x"))
				if rs[0].Outcome != ledger.Applied {
					t.Fatalf("first = %+v", rs[0])
				}
				rs, err := st.ApplyBatch(context.Background(), []ledger.Delivery{delivery(id, 1, "x"), delivery("other", 2, "y")}, credit, ledger.Budget{})
				if err != nil {
					t.Fatalf("redelivery of id %q fails the whole batch (nothing acked, forever): %v", id, err)
				}
				if got := outcomes(rs); !equal(got, []ledger.Outcome{ledger.Duplicate, ledger.Applied}) {
					t.Fatalf("redelivery outcomes = %v (%+v)", got, rs)
				}
				if b := balance(t, st); b != 2 {
					t.Fatalf("balance = %d, want 2", b)
				}
			})
		}
	}
}

// A batch looks up only the ids at or below the ledger's greatest (ids above
// it cannot be there): the comparison must be SQLite's order of the primary
// key, bytewise, or a redelivered id would be taken for new. The ids here
// arrive out of order and sort differently by runes, by length and by bytes.
func TestIDsAtOrBelowTheGreatestAreLookedUp(t *testing.T) {
	t.Parallel()
	first := []string{"m", "\xff\xfe", "a\x00b", "é", "zz", "01J0000000000000000000000Z"}
	again := []string{"a", "a\x00b", "zz", "é", "\xff\xfe", "\xff\xff", "01J0000000000000000000000Z", "01J00000000000000000000000"}
	want := []ledger.Outcome{ledger.Applied, ledger.Duplicate, ledger.Duplicate, ledger.Duplicate, ledger.Duplicate,
		ledger.Applied, ledger.Duplicate, ledger.Applied}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			st := openEventsStore(t, m.savepoints)
			var batch []ledger.Delivery
			for i, id := range first {
				batch = append(batch, delivery(id, uint64(i+1), "x"))
			}
			apply(t, st, credit, batch...)
			batch = batch[:0]
			for i, id := range again {
				batch = append(batch, delivery(id, uint64(len(first)+i+1), "x"))
			}
			if got := outcomes(apply(t, st, credit, batch...)); !equal(got, want) {
				t.Fatalf("outcomes = %v, want %v", got, want)
			}
			if b := balance(t, st); b != len(first)+3 {
				t.Fatalf("balance = %d, want %d", b, len(first)+3)
			}
		})
	}
}
