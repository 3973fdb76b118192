// Package ackwait is jetledger's timing contract, the one source of every
// duration. A message must be acknowledged before the server's AckWait runs
// out, or the server hands it to someone else while the first worker still
// holds it. A Plan starts from the deadline of a batch and adds every other
// wait a message can meet (time in the client buffer, the commit, the ack)
// to derive the AckWait a consumer needs; and from the same numbers the
// commit bound the ledger is given, the InProgress interval, the outbox
// claim lease, how long a prune may hold the writer, and whether a buffered
// message is still safe to process. Backoff spaces every retry. The package
// knows nothing of NATS: Validate takes a Durable, which the consumer
// package reads off a JetStream consumer.
//
//	p := ackwait.Plan{Deadline: 10 * time.Second, BatchSize: 100}
//	// create the consumer with AckWait: p.AckWait(); check one that exists:
//	if err := p.Validate(consumer.DurableOf(info.Config)); err != nil { // wraps ErrAckWaitTooShort, names both durations
//		return err
//	}
package ackwait
