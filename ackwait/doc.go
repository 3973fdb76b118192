// Package ackwait is jetledger's timing contract. A message must be
// acknowledged before the server's AckWait runs out, or the server hands it to
// someone else while the first worker still holds it. A Plan starts from the
// processing deadline of a batch and adds every other wait a message can meet
// (time in the client buffer, the commit, the ack) to derive the AckWait a
// consumer needs, the InProgress interval for long batches, and whether a
// buffered message is still safe to process.
//
//	p := ackwait.Plan{Deadline: 10 * time.Second, BatchSize: 100}
//	cfg := jetstream.ConsumerConfig{Durable: "app", AckPolicy: jetstream.AckExplicitPolicy, AckWait: p.AckWait()}
//	if err := p.Validate(info.Config); err != nil { // err wraps ErrAckWaitTooShort and names both durations
//		return err
//	}
package ackwait
