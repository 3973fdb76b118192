package replay

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// Bounds are where a replay stops, where the durable's consumer stands:
// every message up to its ack floor handled, none past the last it was
// delivered.
type Bounds struct {
	UpTo      uint64 // the last sequence replayed
	Floor     uint64 // the durable's ack floor: handled up to here
	Delivered uint64 // the last sequence the durable was delivered
}

// ReadBounds reads where durable stands: the replay goes up to the last
// message it was delivered (toSeq, when not 0, moves it), since its
// consumer may have acked messages past its ack floor, which it will never
// be given again. Without the durable, toSeq says how far messages count as
// handled elsewhere; with neither, *NoDurableError (ErrNoDurable).
func ReadBounds(ctx context.Context, js jetstream.JetStream, stream, durable string, toSeq uint64) (Bounds, error) {
	cons, err := js.Consumer(ctx, stream, durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		if toSeq == 0 {
			return Bounds{}, &NoDurableError{Stream: stream, Durable: durable}
		}
		return Bounds{UpTo: toSeq, Floor: toSeq, Delivered: toSeq}, nil
	}
	if err != nil {
		return Bounds{}, fmt.Errorf("look up durable %s of stream %s: %w", durable, stream, err)
	}
	info := cons.CachedInfo()
	b := Bounds{Floor: info.AckFloor.Stream, Delivered: max(info.Delivered.Stream, info.AckFloor.Stream)}
	b.UpTo = cmp.Or(toSeq, b.Delivered)
	return b, nil
}

// CheckEffects refuses (*UndecidedError) a replay within b that would apply
// messages the durable has not handled (past its ack floor, or
// dead-lettered in st) when decided is false, that is without a sink for
// their effects nor being told there are none: applied without an outbox
// row, their effects would be lost, since the durable's consumer then meets
// them as duplicates.
func CheckEffects(ctx context.Context, st *ledger.Store, stream string, b Bounds, decided bool) error {
	if decided {
		return nil
	}
	if b.UpTo > b.Floor {
		return &UndecidedError{Floor: b.Floor, UpTo: b.UpTo}
	}
	dls, err := st.DeadLetters(ctx, 0)
	if err != nil {
		return fmt.Errorf("replay: check effects: %w", err)
	}
	for _, dl := range dls {
		if dl.Stream == stream && dl.Sequence <= b.UpTo {
			return &UndecidedError{Floor: b.Floor, UpTo: b.UpTo, DeadLetter: dl.ID, Sequence: dl.Sequence}
		}
	}
	return nil
}

// ReviewPastFloor is the review reason of an effect replayed past the
// durable's ack floor.
const ReviewPastFloor = "replayed past run's ack floor: run had this message delivered and may have sent its effect; " +
	"check the destination for the idempotency key (the row id), then resolve the row"

// Effects decides what becomes of a replayed message's outbox effect, so
// that a replay never swallows one that the durable's consumer has yet to
// send, nor sends twice one that it already has.
type Effects struct {
	Bounds
	// SendAll queues every effect for the consumer to send. Default false.
	SendAll bool
}

// Record settles the message's dead letter, if one was recorded, and
// records its effect (for sink, when there is one): queued when the
// durable never handled the message (dead-lettered, or never delivered) or
// with SendAll; suppressed when it did (up to its ack floor); in review
// when nobody can tell (delivered past its floor).
func (e Effects) Record(ctx context.Context, tx *ledger.Tx, d ledger.Delivery, sink string) error {
	dead, err := tx.ClearDeadLetter(ctx)
	if err != nil || sink == "" {
		return err
	}
	switch {
	case dead || d.Sequence > e.Delivered || e.SendAll:
		_, err = tx.Enqueue(ctx, sink, d.Data)
	case d.Sequence <= e.Floor:
		_, err = tx.EnqueueSuppressed(ctx, sink, d.Data)
	default:
		_, err = tx.EnqueueReview(ctx, sink, d.Data, ReviewPastFloor)
	}
	return err
}
