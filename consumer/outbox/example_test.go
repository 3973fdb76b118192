package outbox_test

import (
	"context"
	"errors"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/ledger"
)

// The README's outbox quick start, compiled here so it keeps working as
// written. (No Output: it needs a destination.)
func ExampleNew() {
	ctx := context.Background()
	run := func(st *ledger.Store, hookURL, secret, id string) error {
		plan := ackwait.Plan{Deadline: 10 * time.Second, BatchSize: 100} // the consumer's plan
		// DeleteURL names the receiver's route that deletes an item and answers 2xx. A 404 is also
		// what a server without that route answers, so it cancels nothing until proved: LookupURL
		// not finding the item either, or (Dispatcher.Cancel) this URL having deleted another item.
		sink, _ := webhook.New(webhook.Config{URL: hookURL, Secret: secret, DeleteURL: "https://api.example.com/items/{external_id}"})
		d, err := outbox.New(st, outbox.Config{Sink: sink, Lease: plan.ClaimLease(sink.Timeout())}) // refuses a lease shorter than the sink timeout
		if err != nil {
			return err
		}
		go d.Run(ctx)
		_, err = outbox.Cancel(ctx, st, sink, id)
		if errors.Is(err, outbox.ErrStillAtDestination) { // not provably deleted: the row is unchanged
			return err
		}
		return err
	}
	_ = run
}
