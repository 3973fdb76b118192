// Package ledgertest makes ledgers in given states for tests and
// benchmarks.
package ledgertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

// ReviewRows adds n outbox rows of sink "webhook" to st, each applied from
// a message of stream S and left in review as a send whose outcome is
// unknown; it returns their ids.
func ReviewRows(t testing.TB, st *ledger.Store, n int) []string {
	t.Helper()
	ctx := context.Background()
	var ids []string
	batch := make([]ledger.Delivery, 0, 500)
	for i := range n {
		batch = append(batch, ledger.Delivery{MessageID: fmt.Sprint("m", i), Stream: "S", Sequence: uint64(i + 1), Subject: "ev", Data: []byte(`{"n":1}`), Delivered: 1})
		if len(batch) < cap(batch) && i < n-1 {
			continue
		}
		if _, err := st.ApplyBatch(ctx, batch, func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
			id, err := tx.Enqueue(ctx, "webhook", d.Data)
			ids = append(ids, id)
			return err
		}, ledger.Budget{}); err != nil {
			t.Fatal(err)
		}
		batch = batch[:0]
	}
	for _, id := range ids {
		if _, err := st.Transition(ctx, id, ledger.Claim, ledger.Params{Worker: "w", Lease: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Transition(ctx, id, ledger.Review, ledger.Params{Worker: "w", Reason: "timed out"}); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}
