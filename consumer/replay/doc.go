// Package replay decides the bounds of a replay and what becomes of a
// replayed message's outbox effect, from where the durable's consumer
// stands: a replay goes up to the last message the durable was delivered,
// queues the effects of messages it never handled, suppresses those of
// messages up to its ack floor, and puts the rest (delivered past the
// floor, maybe sent) in review.
//
//	from, err := replay.Start{Since: "24h", Names: names}.From(time.Now()) // *ConfigError in names' words
//	b, err := replay.ReadBounds(ctx, js, "ORDERS", "billing", 0)
//	if errors.Is(err, replay.ErrNoDurable) { ... } // give a bound
//	if err := replay.CheckEffects(ctx, st, "ORDERS", b, haveSink); err != nil { ... }
//	effects := replay.Effects{Bounds: b}
//	// in the replay's handler:
//	err = effects.Record(ctx, tx, d, sinkName)
package replay
