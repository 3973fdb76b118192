// Package outbox sends jetledger's outbox rows to their destinations: it
// claims a row (queued → sending, a guarded change that one worker wins),
// sends it through a Sink with the row's id as the idempotency key, turns
// what the sink answered into the row's next change (classify), writes it
// back only if the row is still the worker's, expires the leases of
// vanished workers, and cancels rows, deleting at the destination what was
// already sent. The legal changes themselves are ledger.Transition's table.
//
// A Sink sends one item and says what its failure means (ErrRejected,
// ErrRetryable, ErrAmbiguous); it may also delete (Deleter). Sinks live
// beneath this package (webhook) and import neither nats.go nor the pull
// loop.
//
//	sink, _ := webhook.New(webhook.Config{URL: hookURL})
//	d, err := outbox.New(store, outbox.Config{Sink: sink, Lease: plan.ClaimLease(sink.Timeout())})
//	if err != nil { ... }
//	go d.Run(ctx)
//	outcome, err := outbox.Cancel(ctx, store, sink, rowID) // deletes at the destination if it was sent
package outbox
