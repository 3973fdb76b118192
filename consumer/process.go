package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

type item struct {
	msg  jetstream.Msg
	meta *jetstream.MsgMetadata
	// since is when the server's AckWait for the message last restarted:
	// its receipt, or an InProgress before its batch began.
	since time.Time
}

// batch is one fetched batch on its way through the ledger.
type batch struct {
	start      time.Time
	work       []item // to apply, in the order of deliveries
	deliveries []ledger.Delivery
	dead       []deadLetter // given up on before the ledger: no usable id
	refreshed  atomic.Int64 // unix nanoseconds of the last InProgress round
}

// process applies a fetched batch in one ledger transaction and answers
// every message: ack after the commit, nak, or dead letter and term.
func (c *Consumer) process(ctx context.Context, msgs []received) error {
	b := c.admit(ctx, msgs)
	if len(b.work) == 0 {
		return c.answer(ctx, b, nil)
	}
	// Until every answer is sent: dead letters wait for the writer too.
	stop := c.keepInProgress(b.work, &b.refreshed)
	defer stop()
	// The plan's budget: a stop signal does not cut a batch short, its
	// deadline does.
	results, err := c.ledger.ApplyBatch(context.WithoutCancel(ctx), b.deliveries, c.cfg.Handler,
		ledger.Budget{Work: c.plan.Deadline, Commit: c.plan.CommitTimeout()})
	elapsed := time.Since(b.start)
	if errors.Is(err, ledger.ErrBusy) {
		// The writer was not free within the batch deadline (another process
		// holds it, and may be paused): nothing was committed, so hand the
		// batch back for a later try instead of exiting.
		c.log.WarnContext(ctx, "ledger busy; batch handed back for redelivery", "messages", len(b.work), "err", err)
		ackStart := time.Now()
		for _, it := range b.work {
			_ = it.msg.NakWithDelay(c.cfg.Backoff.Base) // lost: AckWait brings it back
		}
		c.n.naks.Add(uint64(len(b.work)))
		c.reportAcks(b, ackStart, b.work)
		return nil
	}
	if err != nil {
		// Nothing committed, nothing acked: AckWait brings the batch back
		// once the database is fixed.
		return fmt.Errorf("consumer: %w; nothing of this batch was acked", err)
	}
	c.n.batches.Add(1)
	faultPoint("after-commit")
	if c.cfg.AfterCommit != nil {
		c.cfg.AfterCommit(BatchReport{Deliveries: b.deliveries, Results: results, Elapsed: elapsed})
	}
	return c.answer(ctx, b, results)
}

// admit turns fetched messages into deliveries: one past a replay's bound
// is left alone, one that waited past its AckWait budget is left to
// redelivery, one that waited long is refreshed, one without a usable id is
// a dead letter.
func (c *Consumer) admit(ctx context.Context, msgs []received) *batch {
	b := &batch{start: time.Now()}
	for _, r := range msgs {
		meta, err := r.msg.Metadata()
		if err != nil {
			// Not a JetStream delivery; nothing to ack against.
			c.log.ErrorContext(ctx, "message without JetStream metadata", "subject", r.msg.Subject(), "err", err)
			continue
		}
		if rp := c.cfg.Replay; rp != nil && rp.UpTo > 0 && meta.Sequence.Stream > rp.UpTo {
			// Past the replay's bound: the live consumer's to apply, with its
			// effects. Terminating it ends it for this replay consumer only.
			c.n.beyond.Add(1)
			_ = r.msg.Term()
			continue
		}
		it := item{msg: r.msg, meta: meta, since: r.at}
		switch c.plan.Admit(b.start.Sub(r.at)) {
		case ackwait.Skip:
			c.n.stale.Add(1)
			c.log.WarnContext(ctx, "message waited past its AckWait budget; leaving it to redelivery",
				"stream_seq", meta.Sequence.Stream, "waited", b.start.Sub(r.at))
			continue
		case ackwait.Refresh:
			_ = r.msg.InProgress() // resets AckWait; if lost, the ledger still dedupes
			it.since = b.start
		}
		c.addDelivery(ctx, b, it)
	}
	return b
}

func (c *Consumer) addDelivery(ctx context.Context, b *batch, it item) {
	h := it.msg.Headers()
	id, err := MessageID(h, it.meta.Stream, c.created, it.meta.Sequence.Stream, c.cfg.AllowSequenceIDs)
	if err != nil {
		b.dead = append(b.dead, deadLetter{it, err.Error()})
		return
	}
	if h.Get(jetstream.MsgIDHeader) == "" {
		c.warnSeqIDs.Do(func() {
			c.log.WarnContext(ctx, "messages without Nats-Msg-Id get stream/sequence ids; publisher retries will not be caught",
				"stream", it.meta.Stream)
		})
	}
	b.work = append(b.work, it)
	b.deliveries = append(b.deliveries, ledger.Delivery{
		MessageID: id, Stream: it.meta.Stream, Sequence: it.meta.Sequence.Stream,
		Subject: it.msg.Subject(), Data: it.msg.Data(), Delivered: it.meta.NumDelivered,
	})
}
