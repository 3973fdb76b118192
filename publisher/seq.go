package publisher

import (
	"context"
	"fmt"
	"iter"
)

// readAhead is how many messages PublishSeq reads while one is being
// published: reading the input is not sending it.
const readAhead = 64

// PublishSeq publishes the messages of msgs in order as they come
// (ScanLines of a tail -f, say), each sent only once the one before it is
// acked, so that a failure leaves nothing after it stored: a window of
// messages in flight would have the stream store the ones after a message
// it refused. It returns how many were acked (each told to OnAck in order)
// and, on failure, a *PublishError naming the message it stopped at, or
// msgs' own error once every message before it is acked. Use PublishBatch
// for throughput when a failure may leave later messages stored.
//
// The sequence is read in a goroutine of its own, so that a cancelled ctx
// stops PublishSeq while a read is blocked (tail -f); that goroutine
// outlives it until the read returns.
func (p *Publisher) PublishSeq(ctx context.Context, msgs iter.Seq2[Message, error]) (int, error) {
	type item struct {
		m   Message
		err error
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan item, readAhead)
	go func() {
		defer close(ch)
		for m, err := range msgs {
			select {
			case ch <- item{m, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for n := 0; ; n++ {
		var it item
		var ok bool
		select {
		case it, ok = <-ch:
		case <-ctx.Done():
			return n, fmt.Errorf("publisher: publish: %w", ctx.Err())
		}
		switch {
		case !ok:
			return n, nil
		case it.err != nil:
			return n, it.err
		case ctx.Err() != nil: // both were ready: send nothing more
			return n, fmt.Errorf("publisher: publish: %w", ctx.Err())
		}
		if err := p.publishNext(ctx, it.m, n); err != nil {
			return n, err
		}
	}
}

// publishNext publishes m, the message after the published ones, and tells
// OnAck of its ack; its failure is a *PublishError.
func (p *Publisher) publishNext(ctx context.Context, m Message, published int) error {
	if m.ID == "" {
		m.ID = p.NewID() // made here, so that the error can name it
	}
	msg, id, err := p.natsMsg(m)
	if err == nil {
		var a Ack
		if a, err = p.publish(ctx, msg, id); err == nil {
			p.acked(a)
			return nil
		}
	}
	return &PublishError{Published: published, Line: m.Line, ID: m.ID, Size: len(m.Data), MaybeStored: !refusal(err), Err: err}
}

// All is msgs as a sequence, for PublishSeq.
func All(msgs []Message) iter.Seq2[Message, error] {
	return func(yield func(Message, error) bool) {
		for _, m := range msgs {
			if !yield(m, nil) {
				return
			}
		}
	}
}
