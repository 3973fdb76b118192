package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

type item struct {
	msg  jetstream.Msg
	meta *jetstream.MsgMetadata
	id   string // its ledger id, from received
	// since is the earliest the server's AckWait for the message last
	// restarted: its pull request, or an InProgress before its batch began.
	since    time.Time
	received time.Time // its receipt
}

// batch is one fetched batch on its way through the ledger.
type batch struct {
	start      time.Time
	work       []item // to apply, in the order of deliveries
	deliveries []ledger.Delivery
	dead       []deadLetter // given up on before the ledger: no usable id
	refreshed  atomic.Int64 // unix nanoseconds of the last InProgress round
}

// process applies a fetched batch in one ledger transaction and hands it
// to the acker, which answers every message once the commit is on disk:
// ack, nak, or dead letter and term. The next batch runs meanwhile.
func (c *Consumer) process(ctx context.Context, msgs []received, acks *acker) error {
	b := c.admit(ctx, msgs)
	if len(b.work) == 0 {
		return acks.hand(committed{b: b, stop: func() {}})
	}
	// Until every answer is sent: dead letters wait for the writer too.
	stop := c.keepInProgress(b.work, &b.refreshed)
	faultStop("before-apply")
	// The plan's budget: a stop signal does not cut a batch short, its
	// deadline does.
	results, pending, err := c.ledger.ApplyBatchPipelined(context.WithoutCancel(ctx), b.deliveries, c.cfg.Handler,
		ledger.Budget{Work: c.plan.Deadline, Commit: c.plan.CommitTimeout()})
	if busy, fenced := errors.Is(err, ledger.ErrBusy), errors.Is(err, ledger.ErrFenced); busy || fenced {
		defer stop()
		// The writer was not free within the batch deadline (another process
		// holds it, and may be paused), or the run's lease was not held at
		// the commit (a pause past it: another run may hold the durable):
		// nothing was committed, so hand the batch back instead of exiting.
		c.sayHandedBack(ctx, fenced, len(b.work), err)
		ackStart := time.Now()
		for _, it := range b.work {
			_ = it.msg.NakWithDelay(c.cfg.Backoff.Base) // lost: AckWait brings it back
		}
		c.n.naks.Add(uint64(len(b.work)))
		c.reportAcks(b, ackStart, b.work)
		return nil
	}
	if err != nil {
		stop()
		// Nothing committed, nothing acked: AckWait brings the batch back
		// once the database is fixed.
		return fmt.Errorf("consumer: %w; nothing of this batch was acked", err)
	}
	c.n.batches.Add(1)
	c.fenced.Store(false)
	return acks.hand(committed{b: b, results: results, pending: pending, stop: stop, at: time.Now()})
}

// sayHandedBack logs a batch handed back. A fenced one is said at warn
// once until a batch commits again, then at debug: a lease that cannot be
// renewed through a failover hands back every batch (helper-29 counted
// 1 421 lines in a minute of node restarts).
func (c *Consumer) sayHandedBack(ctx context.Context, fenced bool, n int, err error) {
	switch {
	case !fenced:
		c.log.WarnContext(ctx, "ledger busy; batch handed back for redelivery", "messages", n, "err", err)
	case c.fenced.Swap(true):
		c.log.DebugContext(ctx, "the run's lease was not held at the commit; batch handed back for redelivery", "messages", n, "err", err)
	default:
		c.log.WarnContext(ctx, "the run's lease was not held at the commit; batches are handed back for redelivery until it is held again (said once)", "messages", n, "err", err)
	}
}

// committed is a batch on its way to its answers.
type committed struct {
	b       *batch
	results []ledger.Result // nil: nothing was applied (dead letters only)
	pending ledger.Pending
	stop    func()    // ends the batch's InProgress refreshes
	at      time.Time // when it committed
}

// acker answers committed batches in order on its own goroutine, each once
// its commit is on disk, so the disk's flush overlaps the next batch.
type acker struct {
	c       *Consumer
	ctx     context.Context
	in      chan committed // unbuffered: one batch being answered, one handed over
	done    chan struct{}
	failure chan struct{} // closed on the first failure
	mu      sync.Mutex
	err     error // the first failure; the batches after it are left unanswered
}

func (c *Consumer) startAcker(ctx context.Context) *acker {
	a := &acker{c: c, ctx: ctx, in: make(chan committed), done: make(chan struct{}), failure: make(chan struct{})}
	go a.loop()
	return a
}

func (a *acker) loop() {
	defer close(a.done)
	for cb := range a.in {
		if a.failed() == nil {
			a.fail(a.answer(cb))
		}
		cb.stop()
	}
}

// answer waits for the batch's commit to reach the disk, then answers it.
func (a *acker) answer(cb committed) error {
	c := a.c
	if cb.results != nil {
		if err := cb.pending.Durable(context.WithoutCancel(a.ctx)); err != nil {
			// Committed but perhaps not on disk: acking would be a lie.
			// AckWait brings the batch back; the ledger dedupes what stuck.
			return fmt.Errorf("consumer: %w; nothing of this batch was acked", err)
		}
		faultPoint("after-commit")
		if c.cfg.AfterCommit != nil {
			c.cfg.AfterCommit(cb.report(time.Now()))
		}
	}
	return c.answer(a.ctx, cb.b, cb.results)
}

// report is cb's BatchReport, its commit on disk at durable.
func (cb committed) report(durable time.Time) BatchReport {
	received := make([]time.Time, len(cb.b.work))
	for i, it := range cb.b.work {
		received[i] = it.received
	}
	return BatchReport{Deliveries: cb.b.deliveries, Results: cb.results, Elapsed: durable.Sub(cb.b.start),
		Received: received, Started: cb.b.start, Committed: cb.at, Durable: durable}
}

// hand gives the acker a batch, or returns its failure.
func (a *acker) hand(cb committed) error {
	if err := a.failed(); err != nil {
		cb.stop()
		return err
	}
	a.in <- cb
	return nil
}

func (a *acker) fail(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err == nil && err != nil {
		a.err = err
		close(a.failure)
	}
}

func (a *acker) failed() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// close waits for the batches handed over to be answered and returns err
// with the acker's own failure.
func (a *acker) close(err error) error {
	close(a.in)
	<-a.done
	switch aerr := a.failed(); {
	case aerr == nil || aerr == err:
		return err
	case err == nil:
		return aerr
	default:
		return errors.Join(err, aerr)
	}
}

// admit turns fetched messages into deliveries: one past a replay's bound
// is left alone, one that waited past its AckWait budget is left to
// redelivery, one that waited long is refreshed, one without a usable id is
// a dead letter.
func (c *Consumer) admit(ctx context.Context, msgs []received) *batch {
	b := &batch{start: time.Now(), work: make([]item, 0, len(msgs)), deliveries: make([]ledger.Delivery, 0, len(msgs))}
	for _, r := range msgs {
		meta := r.meta
		if r.metaErr != nil {
			// Not a JetStream delivery; nothing to ack against.
			c.log.ErrorContext(ctx, "message without JetStream metadata", "subject", r.msg.Subject(), "err", r.metaErr)
			continue
		}
		if rp := c.cfg.Replay; rp != nil && rp.UpTo > 0 && meta.Sequence.Stream > rp.UpTo {
			// Past the replay's bound: the live consumer's to apply, with its
			// effects. Terminating it ends it for this replay consumer only.
			c.n.beyond.Add(1)
			_ = r.msg.Term()
			continue
		}
		// Its age counts from its request: a pause before its receipt counts.
		it := item{msg: r.msg, meta: meta, id: r.id, since: r.asked, received: r.at}
		switch c.plan.Admit(b.start.Sub(r.asked)) {
		case ackwait.Skip:
			c.n.stale.Add(1)
			c.log.WarnContext(ctx, "message waited past its AckWait budget; leaving it to redelivery",
				"stream_seq", meta.Sequence.Stream, "waited", b.start.Sub(r.asked))
			continue
		case ackwait.Refresh:
			_ = r.msg.InProgress() // resets AckWait; if lost, the ledger still dedupes
			it.since = b.start
		}
		c.addDelivery(ctx, b, it, r.idErr)
	}
	return b
}

func (c *Consumer) addDelivery(ctx context.Context, b *batch, it item, idErr error) {
	if idErr != nil {
		b.dead = append(b.dead, deadLetter{it, idErr.Error()})
		return
	}
	if c.cfg.AllowSequenceIDs && it.msg.Headers().Get(jetstream.MsgIDHeader) == "" {
		c.warnSeqIDs.Do(func() {
			c.log.WarnContext(ctx, "messages without Nats-Msg-Id get stream/sequence ids; publisher retries will not be caught",
				"stream", it.meta.Stream)
		})
	}
	b.work = append(b.work, it)
	b.deliveries = append(b.deliveries, ledger.Delivery{
		MessageID: it.id, Stream: it.meta.Stream, Instance: c.streamInstance, Sequence: it.meta.Sequence.Stream,
		Subject: it.msg.Subject(), Data: it.msg.Data(), Delivered: it.meta.NumDelivered, Header: ledger.Header(it.msg.Headers()),
	})
}
