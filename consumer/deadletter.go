package consumer

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jetledger/jetledger/ledger"
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

// onMaxDeliveries records a dead letter for a message the server stopped
// delivering, unless the consumer dead-lettered it itself.
func (c *Consumer) onMaxDeliveries(ctx context.Context, data []byte) {
	defer c.n.advisories.Add(1)
	var adv struct {
		Stream     string `json:"stream"`
		StreamSeq  uint64 `json:"stream_seq"`
		Deliveries uint64 `json:"deliveries"`
	}
	if err := json.Unmarshal(data, &adv); err != nil || adv.StreamSeq == 0 {
		c.log.WarnContext(ctx, "unreadable max-deliveries advisory", "err", err)
		return
	}
	// Recording it is a write like a dead letter's: the plan's commit bound.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.plan.CommitTimeout())
	defer cancel()
	if seen, err := c.ledger.HasDeadLetter(ctx, adv.Stream, c.instance(), adv.StreamSeq); err == nil && seen {
		return
	}
	dl := ledger.DeadLetter{Stream: adv.Stream, Instance: c.instance(), Sequence: adv.StreamSeq, Deliveries: adv.Deliveries,
		Reason: fmt.Sprintf("the server stopped delivering after %d deliveries (max-deliveries advisory); the last one never completed", adv.Deliveries)}
	if done := c.settledUnseen(ctx, &dl); done {
		return
	}
	if err := c.ledger.RecordDeadLetters(ctx, []ledger.DeadLetter{dl}); err != nil {
		c.log.ErrorContext(ctx, "cannot record dead letter from advisory", "stream_seq", adv.StreamSeq, "err", err)
		return
	}
	c.n.deadLetters.Add(1)
	c.log.WarnContext(ctx, "dead letter", "msg_id", dl.MessageID, "stream_seq", dl.Sequence, "reason", dl.Reason)
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
