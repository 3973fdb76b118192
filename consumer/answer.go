package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

// answers are what a committed batch sends back for its messages.
type answers struct {
	acks  []item
	naks  []nak
	terms []deadLetter // conflicts: recorded by the ledger, terminated
	dead  []deadLetter // recorded as dead letters, then terminated
}

type nak struct {
	item
	delay time.Duration
}

// answer sends the acks of the committed messages first (whatever happens to
// the dead letters, their commit stands), records the dead letters, then
// sends the naks and terms.
func (c *Consumer) answer(ctx context.Context, b *batch, results []ledger.Result) error {
	a := c.sortResults(ctx, b, results)
	ackStart := time.Now()
	for _, it := range a.acks {
		if err := it.msg.Ack(); err != nil {
			c.log.WarnContext(ctx, "ack failed; the redelivery will be a no-op", "stream_seq", it.meta.Sequence.Stream, "err", err)
		}
	}
	if err := c.recordDead(ctx, a.dead); err != nil {
		if !errors.Is(err, ledger.ErrBusy) {
			return err
		}
		// Not recorded, so not terminated: they come back after AckWait and
		// are dead-lettered then.
		c.log.WarnContext(ctx, "ledger busy; dead letters left to redelivery", "messages", len(a.dead), "err", err)
		a.dead = nil
	}
	for _, n := range a.naks {
		c.n.naks.Add(1)
		if err := n.msg.NakWithDelay(n.delay); err != nil {
			c.log.WarnContext(ctx, "nak failed", "stream_seq", n.meta.Sequence.Stream, "err", err)
		}
	}
	for _, d := range append(a.terms, a.dead...) {
		c.n.terms.Add(1)
		if err := d.msg.TermWithReason(d.reason); err != nil {
			c.log.WarnContext(ctx, "term failed", "stream_seq", d.meta.Sequence.Stream, "err", err)
		}
	}
	c.reportAcks(b, ackStart, append(append([]item(nil), b.work...), itemsOf(a.dead)...))
	return nil
}

// sortResults decides each message's answer from its outcome.
func (c *Consumer) sortResults(ctx context.Context, b *batch, results []ledger.Result) answers {
	a := answers{dead: b.dead, acks: make([]item, 0, len(results))}
	for i, res := range results {
		it := b.work[i]
		switch res.Outcome {
		case ledger.Applied:
			c.n.applied.Add(1)
			a.acks = append(a.acks, it)
		case ledger.Duplicate:
			c.n.duplicates.Add(1)
			a.acks = append(a.acks, it)
		case ledger.Conflict:
			c.n.conflicts.Add(1)
			c.log.WarnContext(ctx, "conflict: message id reused with a different payload; recorded, not applied",
				"msg_id", b.deliveries[i].MessageID, "stream_seq", it.meta.Sequence.Stream)
			a.terms = append(a.terms, deadLetter{it, res.Err.Error()})
		case ledger.Failed:
			c.n.failed.Add(1)
			c.sortFailure(ctx, &a, it, b.deliveries[i].MessageID, res.Err)
		}
	}
	return a
}

// sortFailure: a Term error or the last allowed delivery is a dead letter;
// otherwise a nak after the handler's RetryAfter delay or the backoff.
func (c *Consumer) sortFailure(ctx context.Context, a *answers, it item, id string, err error) {
	var term *TermError
	var retry *RetryError
	delivered := it.meta.NumDelivered
	switch {
	case errors.As(err, &term):
		a.dead = append(a.dead, deadLetter{it, err.Error()})
	case c.maxDeliver > 0 && delivered >= uint64(c.maxDeliver):
		a.dead = append(a.dead, deadLetter{it, fmt.Sprintf("failed on delivery %d of %d: %v", delivered, c.maxDeliver, err)})
	case errors.As(err, &retry):
		a.naks = append(a.naks, nak{it, retry.Delay})
	default:
		a.naks = append(a.naks, nak{it, c.cfg.Backoff.Delay(int(min(delivered, 1<<20)))})
		c.log.WarnContext(ctx, "handler failed; will retry", "msg_id", id, "delivery", delivered, "err", err)
	}
}
