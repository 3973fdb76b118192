// Package prune removes ledger rows that no redelivery or republish can
// meet, reading every bound from the live stream itself: the stream's first
// sequence (and, for a copy of other streams, the source floors to record
// first), its duplicate window, and when the oldest message the durable has
// not handled was stored. It refuses a stream that is another instance than
// the one the ledger served (stream.ErrNotTheInstance).
//
//	p := &prune.Pruner{
//		Ledger: st, JetStream: js,
//		Stream: "ORDERS", Durable: "billing",
//		Retention: 7 * 24 * time.Hour,
//		Interval:  time.Hour,
//		Logger:    log,
//	}
//	if _, err := p.Check(ctx); err != nil { ... } // prune.ErrRetentionShort
//	go p.Run(ctx) // prunes every Interval until ctx ends
//
// A zero Retention is ledger.RetentionDefault (a week), both in Check's
// comparison with the duplicate window and in every prune.
//
// Options reads the bounds alone, for one prune through ledger.Store.Prune.
package prune
