// Package jsretry retries the JetStream API calls a program makes before it
// consumes (looking up or creating a stream or a consumer) while nobody can
// answer them yet: a cluster electing a stream or consumer leader, a server
// restarting, a client reconnecting to another server. A definite answer
// (not found, refused, not allowed) is returned at once; a transient one is
// retried with the package's backoff until ctx ends, each try under its own
// short timeout, and the wait is logged at warn (once, then every so often)
// and its end at info.
//
//	s, err := jsretry.Call(ctx, log, "look up stream ORDERS", func(ctx context.Context) (jetstream.Stream, error) {
//		return js.Stream(ctx, "ORDERS")
//	})
//	if err != nil { ... } // "look up stream ORDERS: nats: stream not found", or ctx's end after n tries
package jsretry
