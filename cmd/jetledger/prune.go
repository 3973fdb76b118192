package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// pruner removes ledger rows that no redelivery or republish can meet, with
// the bounds read from the live stream each time.
type pruner struct {
	st                         *ledger.Store
	js                         jetstream.JetStream
	stream                     string
	retention, outboxRetention time.Duration
	hold                       time.Duration // the plan's PruneHold: a batch waits this long at most
	log                        *slog.Logger
}

// options reads the stream's first sequence and duplicate window now.
func (p *pruner) options(ctx context.Context) (ledger.PruneOptions, error) {
	s, err := p.js.Stream(ctx, p.stream)
	if err != nil {
		return ledger.PruneOptions{}, fmt.Errorf("prune: stream %s: %w", p.stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return ledger.PruneOptions{}, fmt.Errorf("prune: stream %s: %w", p.stream, err)
	}
	o := ledger.PruneOptions{Stream: p.stream, FirstSeq: info.State.FirstSeq, DuplicateWindow: info.Config.Duplicates,
		Retention: p.retention, OutboxRetention: p.outboxRetention, Hold: p.hold}
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

// check refuses a retention shorter than the stream's duplicate window at start.
func (p *pruner) check(ctx context.Context) error {
	o, err := p.options(ctx)
	if err != nil {
		return err
	}
	if p.retention < o.DuplicateWindow {
		return usagef("--retention %s is shorter than stream %s's duplicate window %s: a republished id could be applied twice",
			p.retention, p.stream, o.DuplicateWindow)
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
