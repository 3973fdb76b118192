package prune

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jetledger/jetledger/consumer/jsretry"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/stream"
	"github.com/nats-io/nats.go/jetstream"
)

// Options reads, now, the bounds below which st's rows of stream may be
// pruned: the stream's first sequence and duplicate window, when the
// oldest message durable has not handled was stored, and for a copy of
// other streams (an edge's of the hub's) the floors to record first. The
// stream must be the instance the ledger served (stream.ErrNotTheInstance).
// Retention, OutboxRetention and Hold are left zero (the ledger's
// defaults) for the caller to set.
func Options(ctx context.Context, js jetstream.JetStream, st *ledger.Store, name, durable string) (ledger.PruneOptions, error) {
	return options(ctx, js, st, name, durable, nil)
}

// options is Options with the refusals' names (Pruner.Names).
func options(ctx context.Context, js jetstream.JetStream, st *ledger.Store, name, durable string, names map[string]string) (ledger.PruneOptions, error) {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return ledger.PruneOptions{}, fmt.Errorf("prune: stream %s: %w", name, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return ledger.PruneOptions{}, fmt.Errorf("prune: stream %s: %w", name, err)
	}
	if err := stream.CheckServed(ctx, st, name, info.Created, names); err != nil {
		return ledger.PruneOptions{}, fmt.Errorf("prune: %w", err)
	}
	// A copy of another stream records first where in the source its
	// pruned rows end: a copy made again starts there.
	first, floors, err := stream.PruneBound(ctx, s, info)
	if err != nil {
		return ledger.PruneOptions{}, fmt.Errorf("prune: %w", err)
	}
	o := ledger.PruneOptions{Stream: name, FirstSeq: first, Floors: floors, DuplicateWindow: info.Config.Duplicates}
	if o.Unconsumed, err = unconsumed(ctx, js, s, name, durable, info.State.LastSeq); err != nil {
		return ledger.PruneOptions{}, err
	}
	// The built-in handler's events rows, payloads included, follow the
	// ledger's retention.
	var n int
	if err := st.DB().QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'events'`).Scan(&n); err != nil {
		return ledger.PruneOptions{}, fmt.Errorf("prune: %w", err)
	}
	if n == 1 {
		o.AlsoFrom = []string{"events"}
	}
	return o, nil
}

// unconsumed is when the oldest message the durable has not handled was
// stored (zero when it has handled everything): a copy of an id there, a
// provider's late re-send say, must still meet its row. Only the durable's
// own subjects count: a partition's durable is never handed another
// partition's messages, and counting them held a drained partition's
// rows back behind the others'. Without the durable,
// a consumer made later starts at the stream's start.
func unconsumed(ctx context.Context, js jetstream.JetStream, s jetstream.Stream, name, durable string, lastSeq uint64) (time.Time, error) {
	var floor uint64
	filters := []string{">"}
	cons, err := js.Consumer(ctx, name, durable)
	switch {
	case err == nil:
		info := cons.CachedInfo()
		floor = info.AckFloor.Stream
		if f := info.Config.FilterSubjects; len(f) > 0 {
			filters = f
		} else if info.Config.FilterSubject != "" {
			filters = []string{info.Config.FilterSubject}
		}
	case !errors.Is(err, jetstream.ErrConsumerNotFound):
		return time.Time{}, fmt.Errorf("prune: durable %s: %w", durable, err)
	}
	if floor >= lastSeq {
		return time.Time{}, nil
	}
	var oldest time.Time
	for _, f := range filters {
		m, err := s.GetMsg(ctx, floor+1, jetstream.WithGetMsgSubject(f))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // none past the floor on f (or purged meanwhile)
		}
		if err != nil {
			return time.Time{}, fmt.Errorf("prune: first message of %s past the ack floor of %s: %w", f, durable, err)
		}
		if oldest.IsZero() || m.Time.Before(oldest) {
			oldest = m.Time
		}
	}
	return oldest, nil
}

// Pruner removes ledger rows that no redelivery or republish can meet, with
// the bounds read from the live stream each time (Options).
type Pruner struct {
	// Ledger pruned. Required.
	Ledger *ledger.Store
	// JetStream the stream is read from. Required.
	JetStream jetstream.JetStream
	// Stream whose rows are pruned. Required.
	Stream string
	// Durable is the consumer whose unhandled messages hold ids back.
	// Required.
	Durable string
	// Retention is the least time since a pruned row's id was last seen;
	// Check refuses one shorter than the stream's duplicate window
	// (ErrRetentionShort). Default 0: ledger.RetentionDefault (a week), in
	// Check's comparison and in every prune alike.
	Retention time.Duration
	// OutboxRetention is the least age of a pruned sent or cancelled outbox
	// row. Default 0: ledger.OutboxRetentionDefault (30 days).
	OutboxRetention time.Duration
	// Hold is the longest one prune step holds the writer (the plan's
	// PruneHold). Default 0: the ledger's.
	Hold time.Duration
	// Interval between prunes in Run. Required by Run (positive).
	Interval time.Duration
	// Logger receives what Run pruned and its failures. Default
	// slog.Default().
	Logger *slog.Logger
	// Names are what Check's refusal (*RetentionError) calls the settings,
	// by their field names ("Retention"): a command line gives its flags.
	// Default: the field names.
	Names map[string]string
}

func (p *Pruner) validate() error {
	switch {
	case p.Ledger == nil || p.JetStream == nil:
		return fmt.Errorf("%w: Ledger and JetStream are required", ErrInvalidConfig)
	case p.Stream == "" || p.Durable == "":
		return fmt.Errorf("%w: Stream and Durable are required", ErrInvalidConfig)
	case p.Retention < 0 || p.OutboxRetention < 0 || p.Hold < 0 || p.Interval < 0:
		return fmt.Errorf("%w: negative duration", ErrInvalidConfig)
	}
	return nil
}

// retentions are Retention and OutboxRetention with their defaults in place
// of zero: what Options gives every prune and what Check compares, so that
// the two never disagree about a zero.
func (p *Pruner) retentions() (processed, outbox time.Duration) {
	return cmp.Or(p.Retention, ledger.RetentionDefault), cmp.Or(p.OutboxRetention, ledger.OutboxRetentionDefault)
}

func (p *Pruner) logger() *slog.Logger {
	if p.Logger == nil {
		return slog.Default()
	}
	return p.Logger
}

// Options reads the bounds now (Options) and adds the Pruner's retentions,
// defaults in place of zeros.
func (p *Pruner) Options(ctx context.Context) (ledger.PruneOptions, error) {
	if err := p.validate(); err != nil {
		return ledger.PruneOptions{}, fmt.Errorf("prune: %w", err)
	}
	o, err := options(ctx, p.JetStream, p.Ledger, p.Stream, p.Durable, p.Names)
	if err != nil {
		return ledger.PruneOptions{}, err
	}
	o.Retention, o.OutboxRetention = p.retentions()
	o.Hold = p.Hold
	return o, nil
}

// Check refuses (*RetentionError, ErrRetentionShort) a Retention
// (ledger.RetentionDefault if zero) shorter than the stream's duplicate
// window, waiting out a cluster that cannot answer yet (Run needs no such
// wait: it tries again at its next tick). It returns the options read.
func (p *Pruner) Check(ctx context.Context) (ledger.PruneOptions, error) {
	o, err := jsretry.Call(ctx, p.logger(), "prune check of "+p.Stream+"/"+p.Durable, p.Options)
	if err != nil {
		return o, err
	}
	if o.Retention < o.DuplicateWindow {
		return o, &RetentionError{Stream: p.Stream, Retention: p.Retention, DuplicateWindow: o.DuplicateWindow, Names: p.Names}
	}
	return o, nil
}

// Once prunes once, with the bounds read now.
func (p *Pruner) Once(ctx context.Context) (ledger.PruneResult, error) {
	o, err := p.Options(ctx)
	if err != nil {
		return ledger.PruneResult{}, err
	}
	return p.Ledger.Prune(ctx, o)
}

// Run prunes every Interval until ctx ends; a failed prune is logged and
// tried again at the next tick.
func (p *Pruner) Run(ctx context.Context) error {
	if err := p.validate(); err != nil {
		return fmt.Errorf("prune: %w", err)
	}
	if p.Interval <= 0 {
		return fmt.Errorf("prune: %w: Interval %s: must be positive", ErrInvalidConfig, p.Interval)
	}
	log := p.logger()
	t := time.NewTicker(p.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		res, err := p.Once(ctx)
		if err != nil {
			if ctx.Err() == nil {
				log.WarnContext(ctx, "prune failed; will try again", "err", err)
			}
			continue
		}
		if res.Processed+res.Outbox > 0 {
			log.InfoContext(ctx, "pruned the ledger", "processed", res.Processed, "outbox", res.Outbox, "freed_pages", res.FreedPages,
				"steps", res.Steps, "held_writer", res.Held.Round(time.Millisecond))
		}
	}
}
