// Package consumer is jetledger's JetStream pull loop. It fetches a batch,
// applies it through the ledger in one transaction, and acks each message
// only after that commit. Handler failures are typed errors: Term for
// permanent ones (dead letter, then Term), RetryAfter for a chosen delay,
// anything else for exponential backoff until the consumer's MaxDeliver,
// when the message is dead-lettered.
//
//	st, _ := ledger.Open("app.db", ledger.Config{})
//	c, err := consumer.New(ctx, js, st, consumer.Config{
//		Stream:  "ORDERS",
//		Durable: "billing",
//		Plan:    ackwait.Plan{Deadline: 10 * time.Second, BatchSize: 100},
//		Handler: func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
//			_, err := tx.ExecContext(ctx, `INSERT INTO orders ...`, ...)
//			return err
//		},
//	})
//	if err != nil { ... } // ackwait.ErrAckWaitTooShort for an unsafe existing consumer
//	err = c.Run(ctx) // returns after draining the current batch when ctx ends
package consumer
