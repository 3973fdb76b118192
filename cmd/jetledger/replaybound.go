package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// replayBound is where a replay stops, where run stands: every message up
// to its ack floor handled, none past the last it was delivered.
type replayBound struct {
	upTo, floor, delivered uint64
}

// replayEffects decides what becomes of a replayed message's outbox effect,
// so that a replay never swallows one that run has yet to send, nor sends
// twice one that run already has.
type replayEffects struct {
	replayBound
	sendAll bool // --send-effects: queue every effect for run to send
}

const reviewPastFloor = "replayed past run's ack floor: run had this message delivered and may have sent its effect; " +
	"check the destination for the idempotency key (the row id), then resolve the row"

// record settles the message's dead letter, if run gave up on it, and
// records its effect (for sink, when there is one): queued for run when run
// never handled the message (dead-lettered, or never delivered) or with
// --send-effects; suppressed when run did (up to its ack floor); in review
// when nobody can tell (delivered to run past its floor).
func (r *replayEffects) record(ctx context.Context, tx *ledger.Tx, d ledger.Delivery, sink string) error {
	dead, err := tx.ClearDeadLetter(ctx)
	if err != nil || sink == "" {
		return err
	}
	switch {
	case dead || d.Sequence > r.delivered || r.sendAll:
		_, err = tx.Enqueue(ctx, sink, d.Data)
	case d.Sequence <= r.floor:
		_, err = tx.EnqueueSuppressed(ctx, sink, d.Data)
	default:
		_, err = tx.EnqueueReview(ctx, sink, d.Data, reviewPastFloor)
	}
	return err
}

// boundReplay reads where run's durable stands: the replay goes up to the
// last message run was delivered (--to-seq moves it), since run may have
// acked messages past its ack floor, which it will never be given again.
// Without the durable, --to-seq says how far messages count as handled
// elsewhere.
func boundReplay(ctx context.Context, js jetstream.JetStream, stream, durable string, toSeq uint64) (replayBound, error) {
	cons, err := js.Consumer(ctx, stream, durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		if toSeq == 0 {
			return replayBound{}, usagef("stream %s has no durable %q, so replay cannot tell which messages run has yet to handle; "+
				"name run's durable with --durable, or give --to-seq N: messages up to N then count as handled elsewhere and their effects are suppressed",
				stream, durable)
		}
		return replayBound{upTo: toSeq, floor: toSeq, delivered: toSeq}, nil
	}
	if err != nil {
		return replayBound{}, fmt.Errorf("look up durable %s of stream %s: %w", durable, stream, err)
	}
	info := cons.CachedInfo()
	b := replayBound{floor: info.AckFloor.Stream, delivered: max(info.Delivered.Stream, info.AckFloor.Stream)}
	b.upTo = cmp.Or(toSeq, b.delivered)
	return b, nil
}

// checkEffectsDecided refuses a replay that would apply messages run has not
// handled (past its ack floor, or dead-lettered) without being told what run
// does with effects: applied without an outbox row, their effects would be
// lost, since run then meets them as duplicates.
func checkEffectsDecided(ctx context.Context, st *ledger.Store, stream string, b replayBound, s sink, noEffects bool) error {
	if s != nil || noEffects {
		return nil
	}
	if b.upTo > b.floor {
		return usagef("the replay goes past run's ack floor (seq %d, up to %d): give it run's --webhook or --effects-subject so their effects are recorded, or --no-effects if run has none",
			b.floor, b.upTo)
	}
	dls, err := st.DeadLetters(ctx, 0)
	if err != nil {
		return err
	}
	for _, dl := range dls {
		if dl.Stream == stream && dl.Sequence <= b.upTo {
			return usagef("the replay reaches dead letter %d (seq %d), which run never applied: give it run's --webhook or --effects-subject so its effect is recorded, or --no-effects if run has none",
				dl.ID, dl.Sequence)
		}
	}
	return nil
}
