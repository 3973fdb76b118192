package main

import (
	"context"
	"errors"

	"github.com/jetledger/jetledger/consumer/replay"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// replayBound is where a replay stops (replay.Bounds).
type replayBound struct {
	upTo, floor, delivered uint64
}

func (b replayBound) bounds() replay.Bounds {
	return replay.Bounds{UpTo: b.upTo, Floor: b.floor, Delivered: b.delivered}
}

// boundReplay reads where run's durable stands (replay.ReadBounds), with
// --to-seq.
func boundReplay(ctx context.Context, js jetstream.JetStream, stream, durable string, toSeq uint64) (replayBound, error) {
	b, err := replay.ReadBounds(ctx, js, stream, durable, toSeq)
	if errors.Is(err, replay.ErrNoDurable) {
		return replayBound{}, usagef("stream %s has no durable %q, so replay cannot tell which messages run has yet to handle; "+
			"name run's durable with --durable, or give --to-seq N: messages up to N then count as handled elsewhere and their effects are suppressed",
			stream, durable)
	}
	return replayBound{upTo: b.UpTo, floor: b.Floor, delivered: b.Delivered}, err
}

// checkEffectsDecided refuses a replay that would apply messages run has not
// handled without being told what run does with effects
// (replay.CheckEffects), with the flags that decide it.
func checkEffectsDecided(ctx context.Context, st *ledger.Store, stream string, b replayBound, s sink, noEffects bool) error {
	err := replay.CheckEffects(ctx, st, stream, b.bounds(), s != nil || noEffects)
	var u *replay.UndecidedError
	switch {
	case !errors.As(err, &u):
		return err
	case u.DeadLetter != 0:
		return usagef("the replay reaches dead letter %d (seq %d), which run never applied: give it run's --webhook or --effects-subject so its effect is recorded, or --no-effects if run has none",
			u.DeadLetter, u.Sequence)
	}
	return usagef("the replay goes past run's ack floor (seq %d, up to %d): give it run's --webhook or --effects-subject so their effects are recorded, or --no-effects if run has none",
		u.Floor, u.UpTo)
}
