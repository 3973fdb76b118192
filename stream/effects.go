package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer/jsretry"
	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/nats-io/nats.go/jetstream"
)

// EffectsWindowMin is the shortest duplicate window of an effects stream
// EnsureEffects creates, as long as run gives a stream it creates.
const EffectsWindowMin = 2 * time.Minute

// Effects is the stream that captures the outbox's NATS sink subject.
type Effects struct {
	// Stream is the name of the stream created when no stream captures
	// Subject. Required.
	Stream string
	// Subject the sink publishes to: one subject, no wildcards. Required.
	Subject string
	// Timeout is how long one publish waits for the stream's
	// acknowledgement. Required (positive).
	Timeout time.Duration
	// MaxAttempts and Plan are the outbox's: the duplicate window covers
	// every retry of a row. MaxAttempts default 0: outbox's default.
	MaxAttempts int
	Plan        ackwait.Plan
	// Site, at an edge, is this site's name (its JetStream domain): the
	// stream gets the durable consumer HubEffectsConsumer, through which the
	// hub's effects stream sources it (HubEffectsSource; set up at the hub
	// by jetledger hub). Default "": none.
	Site string
	// LastSent, at a site, says the last sequence of Stream the ledger
	// recorded an effect at (ledger.Store.LastExternalSeq), asked only
	// when the stream is created (the store lost, or the stream deleted):
	// the new stream numbers from above it, since the hub's source takes a
	// source's messages in sequence order and would skip a new stream's
	// first ones as seen. Default nil: from 1.
	LastSent func(context.Context) (uint64, error)
	// Logger receives the waits. Default slog.Default().
	Logger *slog.Logger
	// Names are what the refusals call Effects' settings
	// (EffectsError.Names). Default: their paths.
	Names map[string]string
}

func (e Effects) validate() error {
	switch {
	case e.Stream == "" || e.Subject == "":
		return fmt.Errorf("%w: Effects needs Stream and Subject", ErrInvalidConfig)
	case !LiteralSubject(e.Subject):
		return fmt.Errorf("%w: Effects subject %q: want one subject without wildcards", ErrInvalidConfig, e.Subject)
	case e.Timeout <= 0:
		return fmt.Errorf("%w: Effects timeout %s: must be positive", ErrInvalidConfig, e.Timeout)
	}
	return nil
}

// Window is the duplicate window of the effects stream: long enough that
// every retry of an outbox row falls inside it, so the sink is idempotent.
func (e Effects) Window() time.Duration {
	h := outbox.Config{MaxAttempts: e.MaxAttempts, Lease: e.Plan.ClaimLease(e.Timeout), PollInterval: outbox.PollIntervalDefault,
		Backoff: ackwait.Backoff{Base: outbox.BackoffBaseDefault, Max: outbox.BackoffMaxDefault}}.Horizon()
	return max(EffectsWindowMin, 2*(h+e.Timeout))
}

// EnsureEffects creates e.Stream for e.Subject if no stream captures it; a
// stream other than e.Stream that captures it is refused (*SubjectTakenError),
// and JetStream's failure to answer is an *EffectsError.
func EnsureEffects(ctx context.Context, js jetstream.JetStream, e Effects) error {
	if err := e.validate(); err != nil {
		return fmt.Errorf("stream: ensure effects: %w", err)
	}
	log := e.Logger
	if log == nil {
		log = slog.Default()
	}
	name, err := jsretry.Call(ctx, log, "find the stream of effects subject "+e.Subject, func(ctx context.Context) (string, error) {
		return js.StreamNameBySubject(ctx, e.Subject)
	})
	switch {
	case err == nil && name != e.Stream:
		return &SubjectTakenError{Subject: e.Subject, By: name, Want: e.Stream}
	case err == nil:
		return e.ensureHubConsumer(ctx, js, log)
	case !errors.Is(err, jetstream.ErrStreamNotFound):
		return &EffectsError{Op: "find", Subject: e.Subject, Stream: e.Stream, Err: err, Names: e.Names}
	}
	window, first := e.Window(), uint64(1)
	if e.LastSent != nil {
		last, err := e.LastSent(ctx)
		if err != nil {
			return &EffectsError{Op: "create", Subject: e.Subject, Stream: e.Stream, Err: err, Names: e.Names}
		}
		first = last + 1
	}
	err = jsretry.Do(ctx, log, "create effects stream "+e.Stream, func(ctx context.Context) error {
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: e.Stream, Subjects: []string{e.Subject}, Storage: jetstream.FileStorage,
			Duplicates: window, Description: "jetledger outbox effects published to " + e.Subject, FirstSeq: first})
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return nil // made meanwhile, by a try whose answer was lost
		}
		return err
	})
	if err != nil {
		return &EffectsError{Op: "create", Subject: e.Subject, Stream: e.Stream, Err: err, Names: e.Names}
	}
	log.InfoContext(ctx, "created the effects stream", "stream", e.Stream, "subject", e.Subject, "duplicate_window", window, "first_seq", first)
	return e.ensureHubConsumer(ctx, js, log)
}

// ensureHubConsumer creates, at a site, the consumer the hub sources the
// effects through, if it is missing; it starts at the stream's start, so
// the hub takes every effect the stream holds. Local, it needs no link.
func (e Effects) ensureHubConsumer(ctx context.Context, js jetstream.JetStream, log *slog.Logger) error {
	if e.Site == "" {
		return nil
	}
	cfg := sourceConsumerConfig(HubEffectsSource(e.Site, e.Stream), "", 0, "the hub's effects stream")
	err := jsretry.Do(ctx, log, "create the consumer "+cfg.Durable+" of effects stream "+e.Stream, func(ctx context.Context) error {
		_, err := js.CreatePushConsumer(ctx, e.Stream, cfg)
		if errors.Is(err, jetstream.ErrConsumerExists) {
			return nil // made by an earlier run; it keeps where the hub got to
		}
		return err
	})
	if err != nil {
		return &EffectsError{Op: "consumer", Subject: e.Subject, Stream: e.Stream, Err: err, Names: e.Names}
	}
	return nil
}
