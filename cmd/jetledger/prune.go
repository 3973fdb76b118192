package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jetledger/jetledger/consumer/prune"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// pruner maps run's and ledger prune's flags to a prune.Pruner, which reads
// the bounds from the live stream each time.
type pruner struct {
	st          *ledger.Store
	js          jetstream.JetStream
	streamFlags // the durable: what it has not handled yet holds ids back
	retentionFlags
	hold time.Duration // the plan's PruneHold: a batch waits this long at most
	log  *slog.Logger
}

func (p *pruner) lib(every time.Duration) *prune.Pruner {
	return &prune.Pruner{Ledger: p.st, JetStream: p.js, Stream: p.Stream, Durable: p.Durable, Retention: p.Retention,
		OutboxRetention: p.OutboxRetention, Hold: p.hold, Interval: every, Logger: p.log}
}

// options reads the stream's bounds now (prune.Pruner.Options).
func (p *pruner) options(ctx context.Context) (ledger.PruneOptions, error) {
	return p.lib(0).Options(ctx)
}

// check refuses a --retention shorter than the stream's duplicate window.
func (p *pruner) check(ctx context.Context) error {
	o, err := p.lib(0).Check(ctx)
	if errors.Is(err, prune.ErrRetentionShort) {
		return usagef("--retention %s is shorter than stream %s's duplicate window %s: a republished id could be applied twice",
			p.Retention, p.Stream, o.DuplicateWindow)
	}
	return err
}

func (p *pruner) once(ctx context.Context) (ledger.PruneResult, error) {
	return p.lib(0).Once(ctx)
}
