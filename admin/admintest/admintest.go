// Package admintest helps tests of the admin API and of what calls it (the
// console): a ledger's outbox rows made as a handler makes them, and a
// Canceller that deletes through a real sink.
package admintest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/ledger"
)

// Enqueue puts one outbox row per payload in st, each from its own message
// of stream S (its id m-<hash of the payload>: distinct payloads, distinct
// messages, and no payload in an id), as a handler does; it returns the
// rows' ids.
func Enqueue(tb testing.TB, st *ledger.Store, payloads ...string) []string {
	tb.Helper()
	var ids []string
	for i, p := range payloads {
		sum := sha256.Sum256([]byte(p))
		d := ledger.Delivery{MessageID: fmt.Sprintf("m-%x", sum[:6]), Stream: "S", Sequence: uint64(i + 1), Subject: "ev", Data: []byte(p), Delivered: 1}
		_, err := st.ApplyBatch(context.Background(), []ledger.Delivery{d}, func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
			id, err := tx.Enqueue(ctx, "webhook", d.Data)
			ids = append(ids, id)
			return err
		}, ledger.Budget{})
		if err != nil {
			tb.Fatal(err)
		}
	}
	return ids
}

// SinkCanceller cancels through a webhook sink, as a run's dispatcher does
// (admin.Config.Canceller).
type SinkCanceller struct {
	Store *ledger.Store
	Sink  *webhook.Sink
}

// CancelAs implements admin.Canceller.
func (c SinkCanceller) CancelAs(ctx context.Context, id string, p ledger.Params) (outbox.CancelOutcome, error) {
	return outbox.CancelAs(ctx, c.Store, c.Sink, id, p)
}
