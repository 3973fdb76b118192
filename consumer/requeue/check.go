package requeue

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/publisher"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// sameInstance refuses a stream that provably is not the one the dead
// letter came from: another server's of the same name, or one created
// since, never reached its sequence or holds another message there. Where
// the copy is gone (a work queue, an age limit) nothing more can be proved
// than the name. It returns the stream's message at the dead letter's
// sequence, nil when gone.
func sameInstance(ctx context.Context, s jetstream.Stream, d ledger.DeadLetter) (*jetstream.RawStreamMsg, error) {
	if last := s.CachedInfo().State.LastSeq; last < d.Sequence {
		return nil, fmt.Errorf("%w: stream %s on the server reached has never stored seq %d (its last is %d), so it is another server's or was created since",
			ErrWrongStream, d.Stream, d.Sequence, last)
	}
	raw, err := s.GetMsg(ctx, d.Sequence)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("stream %s seq %d: %w", d.Stream, d.Sequence, err)
	case raw.Subject != d.Subject || raw.Header.Get(jetstream.MsgIDHeader) != d.MessageID:
		return nil, fmt.Errorf("%w: stream %s on the server reached holds another message at seq %d (id %q on %s), so it is another server's or was created since",
			ErrWrongStream, d.Stream, d.Sequence, raw.Header.Get(jetstream.MsgIDHeader), raw.Subject)
	}
	return raw, nil
}

// storedAs proves that the copy the dead letter's stream acknowledged is
// stored as the subject run consumed the original on (a partition's
// mapping may have changed since the subject was worked out). A copy gone
// already was stored and taken out by the stream's retention, except in an
// interest stream without consumers: it acknowledges a publish no consumer
// is interested in, and stores nothing.
func storedAs(ctx context.Context, s jetstream.Stream, d ledger.DeadLetter, ack publisher.Ack) error {
	raw, err := s.GetMsg(ctx, ack.Sequence)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		info, err := s.Info(ctx)
		if err != nil {
			return fmt.Errorf("requeue dead letter %d: %s acknowledged the copy as seq %d, which it no longer holds, and its info failed: %w; it is kept: check that run's consumer got it, then discard the dead letter",
				d.ID, ack.Stream, ack.Sequence, err)
		}
		if info.Config.Retention == jetstream.InterestPolicy && info.State.Consumers == 0 {
			return fmt.Errorf("requeue dead letter %d: %w: %s is an interest stream without consumers, so it acknowledged the copy as seq %d and stored nothing; it is kept: start run (its durable consumer) first, then requeue again once the duplicate window has passed",
				d.ID, ErrNotArrived, ack.Stream, ack.Sequence)
		}
		return nil
	case err != nil:
		return fmt.Errorf("requeue dead letter %d: %s stored the copy as seq %d, but reading it back failed: %w; it is kept: check it with 'nats stream get %s %d', then discard the dead letter",
			d.ID, ack.Stream, ack.Sequence, err, ack.Stream, ack.Sequence)
	case raw.Subject != d.Subject || raw.Header.Get(jetstream.MsgIDHeader) != d.MessageID:
		return fmt.Errorf("requeue dead letter %d: %w: %s stored the copy as seq %d on %s (id %q), not on %s, so run may not consume it; it is kept: check the stream's subject transform",
			d.ID, ErrNotArrived, ack.Stream, ack.Sequence, raw.Subject, raw.Header.Get(jetstream.MsgIDHeader), d.Subject)
	}
	return nil
}

// Headers is the dead letter's headers h a copy is published with: without
// those that belonged to its first publish or to the server. The
// expectations (last sequence, last id) held for that moment, a rollup
// would now purge what came since, and the server refuses a publish
// carrying its own (the source header a sourced copy has at an edge, a
// marker).
func Headers(h map[string][]string) nats.Header {
	out := nats.Header{}
	for k, v := range h {
		if !serverOrFirstPublish(k) {
			out[k] = v
		}
	}
	return out
}

func serverOrFirstPublish(key string) bool {
	const expected = "Nats-Expected-"
	if len(key) >= len(expected) && strings.EqualFold(key[:len(expected)], expected) {
		return true
	}
	for _, k := range []string{"Nats-Stream-Source", "Nats-Rollup", "Nats-Marker-Reason"} {
		if strings.EqualFold(key, k) {
			return true
		}
	}
	return false
}
