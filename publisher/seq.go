package publisher

import (
	"context"
	"fmt"
	"iter"
	"slices"
)

// PublishSeq publishes the messages of msgs as they come (ScanLines of a
// tail -f, say), as PublishBatch does: at most Config.Window in flight,
// each chunk what the sequence has ready once its first message is there,
// so that a message waits for no later one. It returns how many were
// acked (each told to OnAck in order) and, on an error of msgs, that
// error once every message before it is acked. The sequence is read in a
// goroutine of its own, which a read blocked in msgs outlives until the
// read returns.
func (p *Publisher) PublishSeq(ctx context.Context, msgs iter.Seq2[Message, error]) (int, error) {
	type item struct {
		m   Message
		err error
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan item, p.cfg.Window)
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
	n := 0
	for {
		var chunk []Message
		var readErr error
		more := true
		select {
		case it, ok := <-ch:
			more, readErr = ok, it.err
			if ok && it.err == nil {
				chunk = append(chunk, it.m)
			}
		case <-ctx.Done():
			return n, fmt.Errorf("publisher: publish: %w", ctx.Err())
		}
	ready:
		for more && readErr == nil && len(chunk) < p.cfg.Window {
			select {
			case it, ok := <-ch:
				more, readErr = ok, it.err
				if ok && it.err == nil {
					chunk = append(chunk, it.m)
				}
			default:
				break ready
			}
		}
		acks, err := p.PublishBatch(ctx, slices.Clip(chunk))
		n += len(acks)
		switch {
		case err != nil:
			return n, err
		case readErr != nil:
			return n, readErr
		case !more:
			return n, nil
		}
	}
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
