// Package requeue puts a dead letter back into the stream it came from.
//
// Requeue publishes the dead letter's payload and headers with its original
// Nats-Msg-Id, so that the consumer applies it exactly once, into the dead
// letter's own stream and no other (publisher.Message.ExpectStream): a
// server whose stream of that name is another instance (it never reached
// the dead letter's sequence, or holds another message there) is refused
// with ErrWrongStream. The copy is published on the subject the stream's
// partition mapping turns into the stored one (partition.PublishSubject),
// without the first publish's expectation headers and the server's own
// (Nats-Stream-Source, a rollup, a marker).
//
// At an edge the dead letter's stream captures no subject: it sources the
// hub's. The copy then goes into the hub's stream, under the subject the
// hub's mapping stores as the edge's, once the edge's own duplicate window
// no longer holds the id (else ErrStillInWindow, a *WindowError saying
// until when); Requeue then reads the edge's stream until the copy has
// arrived (Config.Wait, else ErrNotArrived as a *NotArrivedError). Only a
// copy proven to be in the dead letter's stream deletes the dead letter;
// every other error keeps it. A refusal the caller can act on is an *Error
// whose Remedy says what to do, for a CLI to say with its own flags.
//
//	d, err := st.DeadLetter(ctx, id)
//	if err != nil { ... }
//	res, err := requeue.Requeue(ctx, js, st, d, requeue.Config{Wait: time.Minute, Logger: log})
//	switch {
//	case errors.Is(err, requeue.ErrStillInWindow): // try again later
//	case err != nil: // the dead letter is kept
//	default:
//		fmt.Println("requeued as", res.Via.Stream, res.Via.Sequence)
//	}
package requeue
