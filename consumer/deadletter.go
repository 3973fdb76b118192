package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

type deadLetter struct {
	item
	reason string
}

// instance names the stream instance the consumer reads: its dead letters
// and deliveries carry it (a stream made again counts from 1 again).
func (c *Consumer) instance() string { return c.streamInstance }

// recordDead stores dead letters before their Term, so a message the server
// stops delivering is never lost without a record.
func (c *Consumer) recordDead(ctx context.Context, dead []deadLetter) error {
	if len(dead) == 0 {
		return nil
	}
	dls := make([]ledger.DeadLetter, len(dead))
	for i, d := range dead {
		dls[i] = ledger.DeadLetter{
			MessageID: d.msg.Headers().Get(jetstream.MsgIDHeader), Stream: d.meta.Stream, Instance: c.instance(),
			Sequence: d.meta.Sequence.Stream, Subject: d.msg.Subject(), Headers: d.msg.Headers(),
			Payload: d.msg.Data(), Reason: d.reason, Deliveries: d.meta.NumDelivered,
		}
		c.log.WarnContext(ctx, "dead letter", "msg_id", dls[i].MessageID, "stream_seq", dls[i].Sequence, "reason", d.reason)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.plan.CommitTimeout())
	defer cancel()
	if err := c.ledger.RecordDeadLetters(ctx, dls); err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	c.n.deadLetters.Add(uint64(len(dls)))
	return nil
}

// maxDeliveries is the server's max-deliveries advisory: it stopped
// delivering the message at StreamSeq after Deliveries deliveries.
type maxDeliveries struct {
	Stream     string `json:"stream"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// advisoryBackoff spaces the tries to record an advisory's dead letter while
// the ledger refuses it. The advisory is not sent again, so it is tried
// until it is recorded or the consumer stops.
var advisoryBackoff = ackwait.Backoff{Base: 100 * time.Millisecond, Max: 10 * time.Second}

// advisoryWarnings is how many failed tries are warnings (a busy writer
// clears); the later ones, and any that needs a person (a read-only or full
// disk), are errors.
const advisoryWarnings = 2

// watchAdvisories records the dead letters of the messages the server gives
// up on (its max-deliveries advisories) until stop, which waits for it. The
// NATS callback only queues an advisory: waiting for the ledger there would
// hold the ones after it in the subscription, which drops them when it
// closes or overflows.
func (c *Consumer) watchAdvisories(ctx context.Context) (stop func(), err error) {
	q := &advisories{ready: make(chan struct{}, 1)}
	rctx, cancel := context.WithCancel(ctx)
	sub, err := c.js.Conn().Subscribe(fmt.Sprintf("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.%s.%s", c.cfg.Stream, c.cfg.Durable),
		func(m *nats.Msg) {
			var adv maxDeliveries
			if err := json.Unmarshal(m.Data, &adv); err != nil || adv.StreamSeq == 0 {
				c.n.advisories.Add(1)
				c.log.WarnContext(ctx, "unreadable max-deliveries advisory", "err", err)
				return
			}
			if !q.push(adv) { // heard after the stop
				c.n.advisories.Add(1)
				c.lostDeadLetter(ctx, adv, 0, nil)
			}
		})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("consumer: subscribe to max-deliveries advisories: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.recordAdvisories(rctx, q)
	}()
	return func() {
		sub.Unsubscribe() //nolint:errcheck // the connection may be closing
		cancel()
		<-done
	}, nil
}

// advisories are the advisories heard and not yet handled.
type advisories struct {
	mu     sync.Mutex
	queue  []maxDeliveries
	closed bool          // the recorder has returned: nothing pushed now is handled
	ready  chan struct{} // capacity 1: something was pushed
}

// push queues adv; false: the recorder has returned.
func (q *advisories) push(adv maxDeliveries) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	q.queue = append(q.queue, adv)
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return true
}

// next waits for an advisory. Once ctx ends it gives those still queued,
// then closes the queue and reports false.
func (q *advisories) next(ctx context.Context) (maxDeliveries, bool) {
	for {
		q.mu.Lock()
		if len(q.queue) > 0 {
			adv := q.queue[0]
			q.queue = q.queue[1:]
			q.mu.Unlock()
			return adv, true
		}
		if ctx.Err() != nil {
			q.closed = true
			q.mu.Unlock()
			return maxDeliveries{}, false
		}
		q.mu.Unlock()
		select {
		case <-q.ready:
		case <-ctx.Done():
		}
	}
}

// recordAdvisories handles the queued advisories in order. After the stop,
// those still queued get one try each until one fails: the ledger is
// failing, and the rest are named as lost without waiting for it again.
func (c *Consumer) recordAdvisories(ctx context.Context, q *advisories) {
	failing := false
	for {
		adv, ok := q.next(ctx)
		switch {
		case !ok:
			return
		case failing:
			c.n.advisories.Add(1)
			c.lostDeadLetter(ctx, adv, 0, nil)
		default:
			failing = !c.onMaxDeliveries(ctx, adv)
		}
	}
}

// onMaxDeliveries records a dead letter for a message the server stopped
// delivering, unless it is settled already. The advisory is its only trace,
// so a failed write is tried again, with a growing pause, until it is
// recorded or ctx ends; a stop cuts the pause short for one last try. It
// reports false when the consumer stopped first, which it logs as an error.
func (c *Consumer) onMaxDeliveries(ctx context.Context, adv maxDeliveries) bool {
	defer c.n.advisories.Add(1)
	for try := 1; ; try++ {
		err := c.settleAdvisory(ctx, adv)
		switch {
		case err == nil:
			return true
		case ctx.Err() != nil:
			c.lostDeadLetter(ctx, adv, try, err)
			return false
		}
		level := slog.LevelWarn
		if try > advisoryWarnings || errors.Is(err, ledger.ErrReadOnly) || errors.Is(err, ledger.ErrFull) || errors.Is(err, ledger.ErrIO) {
			level = slog.LevelError
		}
		c.log.Log(ctx, level, "cannot record dead letter from advisory; trying again until it is recorded or the consumer stops",
			"stream", adv.Stream, "stream_seq", adv.StreamSeq, "try", try, "retry_in", advisoryBackoff.Delay(try), "err", err)
		advisoryBackoff.Wait(ctx, try)
	}
}

// settleAdvisory records the dead letter of adv's message, unless the
// consumer dead-lettered it itself or the ledger settles it.
func (c *Consumer) settleAdvisory(ctx context.Context, adv maxDeliveries) error {
	// Recording it is a write like a dead letter's: the plan's commit bound.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.plan.CommitTimeout())
	defer cancel()
	if seen, err := c.ledger.HasDeadLetter(ctx, adv.Stream, c.instance(), adv.StreamSeq); err == nil && seen {
		return nil
	}
	dl := ledger.DeadLetter{Stream: adv.Stream, Instance: c.instance(), Sequence: adv.StreamSeq, Deliveries: adv.Deliveries,
		Reason: fmt.Sprintf("the server stopped delivering after %d deliveries (max-deliveries advisory); the last one never completed", adv.Deliveries)}
	if done := c.settledUnseen(ctx, &dl); done {
		return nil
	}
	if err := c.ledger.RecordDeadLetters(ctx, []ledger.DeadLetter{dl}); err != nil {
		return fmt.Errorf("consumer: dead letter of %s/%d: %w", adv.Stream, adv.StreamSeq, err)
	}
	c.n.deadLetters.Add(1)
	c.log.WarnContext(ctx, "dead letter", "msg_id", dl.MessageID, "stream_seq", dl.Sequence, "reason", dl.Reason)
	return nil
}

// lostDeadLetter says which message has no dead letter because the consumer
// stopped before the ledger took it (err, its last refusal, if it tried).
// Neither the advisory nor the message comes again: this record is what is
// left of it.
func (c *Consumer) lostDeadLetter(ctx context.Context, adv maxDeliveries, tries int, err error) {
	args := []any{"stream", adv.Stream, "stream_seq", adv.StreamSeq, "deliveries", adv.Deliveries, "tries", tries}
	if err != nil && !errors.Is(err, context.Canceled) {
		args = append(args, "err", err)
	}
	c.log.ErrorContext(ctx, "no dead letter recorded for a message the server stopped delivering (max-deliveries advisory): "+
		"the consumer stopped first; this durable will not deliver the message again, and the stream keeps it only as its limits and retention allow", args...)
}

// settledUnseen reads the message the server gave up on into dl and tells
// whether the ledger already settles it: applied (its last delivery's ack
// was lost: an applied message is never a dead letter), or a conflict with
// an applied one (recorded as such). If the ledger cannot say, the dead
// letter is recorded: one too many beats a message dropped without a trace.
func (c *Consumer) settledUnseen(ctx context.Context, dl *ledger.DeadLetter) bool {
	s, err := c.js.Stream(ctx, dl.Stream)
	var m *jetstream.RawStreamMsg
	if err == nil {
		m, err = s.GetMsg(ctx, dl.Sequence)
	}
	if err != nil {
		// The message is gone: the ledger can only be asked by sequence.
		done, err := c.ledger.HasProcessed(ctx, dl.Stream, dl.Sequence, "")
		if err != nil {
			c.log.WarnContext(ctx, "cannot check the ledger for a max-deliveries advisory; recording the dead letter", "stream_seq", dl.Sequence, "err", err)
		}
		return done
	}
	dl.MessageID, dl.Subject, dl.Headers, dl.Payload = m.Header.Get(jetstream.MsgIDHeader), m.Subject, m.Header, m.Data
	id, err := MessageID(m.Header, dl.Stream, c.created, dl.Sequence, c.cfg.AllowSequenceIDs)
	if err != nil {
		return false // no usable id: a dead letter, as a delivery would be
	}
	outcome, err := c.ledger.ClassifyUnseen(ctx, ledger.Delivery{MessageID: id, Stream: dl.Stream, Instance: dl.Instance, Sequence: dl.Sequence,
		Subject: m.Subject, Data: m.Data, Delivered: dl.Deliveries})
	switch {
	case err != nil:
		c.log.WarnContext(ctx, "cannot check the ledger for a max-deliveries advisory; recording the dead letter", "stream_seq", dl.Sequence, "err", err)
		return false
	case outcome == ledger.Conflict:
		c.n.conflicts.Add(1)
		c.log.WarnContext(ctx, "conflict: message id reused with a different payload; recorded, not applied",
			"msg_id", id, "stream_seq", dl.Sequence)
	}
	return outcome == ledger.Duplicate || outcome == ledger.Conflict
}
