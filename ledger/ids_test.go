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
