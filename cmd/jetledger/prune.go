package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jetledger/jetledger/consumer/jsretry"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// pruner removes ledger rows that no redelivery or republish can meet, with
// the bounds read from the live stream each time.
type pruner struct {
	st          *ledger.Store
	js          jetstream.JetStream
	streamFlags // the durable: what it has not handled yet holds ids back
	retentionFlags
	hold time.Duration // the plan's PruneHold: a batch waits this long at most
	log  *slog.Logger
}

// options reads the stream's first sequence and duplicate window now.
func (p *pruner) options(ctx context.Context) (ledger.PruneOptions, error) {
	s, err := p.js.Stream(ctx, p.Stream)
	if err != nil {
		return ledger.PruneOptions{}, fmt.Errorf("prune: stream %s: %w", p.Stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return ledger.PruneOptions{}, fmt.Errorf("prune: stream %s: %w", p.Stream, err)
	}
	if err := checkServedInstance(ctx, p.st, p.Stream, info.Created); err != nil {
		return ledger.PruneOptions{}, fmt.Errorf("prune: %w", err)
	}
	// A copy of another stream (an edge's of the hub's) records first where
	// in the source its pruned rows end: a copy made again starts there.
	first, floors, err := pruneBound(ctx, s, info)
	if err != nil {
		return ledger.PruneOptions{}, err
	}
	o := ledger.PruneOptions{Stream: p.Stream, FirstSeq: first, Floors: floors, DuplicateWindow: info.Config.Duplicates,
		Retention: p.Retention, OutboxRetention: p.OutboxRetention, Hold: p.hold}
	if o.Unconsumed, err = p.unconsumed(ctx, s, info.State.LastSeq); err != nil {
		return ledger.PruneOptions{}, err
	}
	// The built-in handler's events rows, payloads included, follow the
	// ledger's retention.
	var n int
	if err := p.st.DB().QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'events'`).Scan(&n); err != nil {
		return ledger.PruneOptions{}, fmt.Errorf("prune: %w", err)
	}
	if n == 1 {
		o.AlsoFrom = []string{"events"}
	}
	return o, nil
}

// unconsumed is when the oldest message the durable has not handled was
// stored (zero when it has handled everything): a copy of an id there, a
// provider's late re-send say, must still meet its row. Without the durable,
// a consumer made later starts at the stream's start.
func (p *pruner) unconsumed(ctx context.Context, s jetstream.Stream, lastSeq uint64) (time.Time, error) {
	var floor uint64
	cons, err := p.js.Consumer(ctx, p.Stream, p.Durable)
	switch {
	case err == nil:
		floor = cons.CachedInfo().AckFloor.Stream
	case !errors.Is(err, jetstream.ErrConsumerNotFound):
		return time.Time{}, fmt.Errorf("prune: durable %s: %w", p.Durable, err)
	}
	if floor >= lastSeq {
		return time.Time{}, nil
	}
	m, err := s.GetMsg(ctx, floor+1, jetstream.WithGetMsgSubject(">"))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return time.Time{}, nil // purged meanwhile
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("prune: first message past the ack floor of %s: %w", p.Durable, err)
	}
	return m.Time, nil
}

// check refuses a retention shorter than the stream's duplicate window at
// start, waiting out a cluster that cannot answer yet (the loop needs no
// such wait: it tries again at its next tick).
func (p *pruner) check(ctx context.Context) error {
	o, err := jsretry.Call(ctx, p.log, "prune check of "+p.Stream+"/"+p.Durable, p.options)
	if err != nil {
		return err
	}
	if p.Retention < o.DuplicateWindow {
		return usagef("--retention %s is shorter than stream %s's duplicate window %s: a republished id could be applied twice",
			p.Retention, p.Stream, o.DuplicateWindow)
	}
	return nil
}

func (p *pruner) once(ctx context.Context) (ledger.PruneResult, error) {
	o, err := p.options(ctx)
	if err != nil {
		return ledger.PruneResult{}, err
	}
	return p.st.Prune(ctx, o)
}

func (p *pruner) loop(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		res, err := p.once(ctx)
		if err != nil {
			if ctx.Err() == nil {
				p.log.WarnContext(ctx, "prune failed; will try again", "err", err)
			}
			continue
		}
		if res.Processed+res.Outbox > 0 {
			p.log.InfoContext(ctx, "pruned the ledger", "processed", res.Processed, "outbox", res.Outbox, "freed_pages", res.FreedPages)
		}
	}
}
