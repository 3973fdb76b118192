// Package service assembles a whole consumer the way `jetledger run` does,
// so that a Go program embeds the same thing the binary runs: an embedded
// JetStream node (standalone, or a leaf of a hub whose stream it sources)
// or an external NATS server; the stream ensured with its limits; the
// ledger with the built-in SQL handler (sqlhandler); the consumer; the
// outbox dispatcher with a webhook or NATS sink; the pruner, whose safe
// bounds consumer/prune derives from the live stream; Prometheus /metrics
// and /healthz; a periodic summary log; and the watch of the embedded
// node's store, whose write failure stops the run for its supervisor to
// restart.
//
// Config reuses the packages' own configs (node.Config, stream.Config,
// consumer.Config, sqlhandler.Config, ...); its zero value with DB and
// Stream.Name set consumes an existing stream through an embedded node
// beside the database. Start checks it before any I/O and starts in the
// order that leaves nothing behind on a refusal: the SQL on a scratch copy
// of the ledger's schema, the node's store lock, the connection, and only
// then the ledger and the stream. Run consumes until ctx ends, draining
// the batch in hand, and returns nil; a part that fails stops the others.
// RunPartitions runs one such consumer per partition of a partitioned
// stream over one server.
//
// Every error of Start and Run is a *StepError naming the step it came
// from, its text the step's own, so that a caller can say it in its own
// terms (the binary names its flags) by errors.As rather than by text.
//
//	err := service.Run(ctx, service.Config{
//		DB:     "ledger.db",
//		Node:   node.Config{Listen: "127.0.0.1:4222"},
//		Stream: stream.Config{Name: "ORDERS", Subjects: []string{"orders.>"}, Limits: stream.Limits{MaxAge: 7 * ackwait.Day}},
//		Consumer: consumer.Config{Durable: "jetledger", Plan: ackwait.Plan{Deadline: 10 * time.Second, BatchSize: 100}},
//		SQL: sqlhandler.Config{
//			Schema: `CREATE TABLE IF NOT EXISTS totals (customer TEXT PRIMARY KEY, amount INTEGER NOT NULL)`,
//			Apply: `INSERT INTO totals VALUES (json_extract(:data, '$.customer'), json_extract(:data, '$.amount'))
//				ON CONFLICT (customer) DO UPDATE SET amount = amount + excluded.amount`,
//		},
//		Prune: service.Prune{Interval: time.Hour, Retention: 7 * ackwait.Day},
//	})
package service
