// Package stream provisions the JetStream streams jetledger consumes and
// writes to, and names their instances. Ensure creates a stream that is
// missing (file storage, the limits asked, jetledger's metadata) and never
// edits one that exists: limits that differ are warned about, with the
// command that applies them. EnsureSourced makes an edge's copy of a hub's
// stream that, made again, starts where the ledger's pruned rows end (the
// source floors recorded in the ledger), and refuses a copy made by hand
// from below them (ErrBelowFloor) or one the ledger cannot place
// (ErrNoFloor). EnsureEffects makes the stream of the outbox's NATS sink,
// its duplicate window covering every retry. CheckServed refuses a stream
// of the right name that is another instance than the one the ledger served
// (ErrNotTheInstance), and PruneBound reads the sequence below which rows
// may be pruned and the floors to record first.
//
// The ledger knows nothing of NATS: this package reads and records what it
// needs through *ledger.Store.
//
//	info, err := stream.Ensure(ctx, js, stream.Config{
//		Name:       "ORDERS",
//		Subjects:   []string{"orders.>"},
//		Duplicates: 2 * time.Minute,
//		Limits:     stream.Limits{MaxAge: 7 * 24 * time.Hour},
//		Logger:     log,
//	})
//	if errors.Is(err, stream.ErrNotFound) { ... } // no subjects, no stream
//
// At an edge, with the ledger that records the floors:
//
//	info, err := stream.EnsureSourced(ctx, js, stream.Sourced{
//		Stream: stream.Config{Name: "ORDERS", Duplicates: 2 * time.Minute},
//		Hub:    "ORDERS", Filter: "orders.site1.>", Domain: "hub",
//		Ledger: st,
//	})
package stream
