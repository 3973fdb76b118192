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

// pruner is the prune.Pruner of ledger prune's flags, which reads the
// bounds from the live stream each time; the durable's unhandled messages
// hold ids back.
func pruner(st *ledger.Store, js jetstream.JetStream, s streamFlags, r retentionFlags, log *slog.Logger) *prune.Pruner {
	return &prune.Pruner{Ledger: st, JetStream: js, Stream: s.Stream, Durable: s.Durable, Retention: r.Retention,
		OutboxRetention: r.OutboxRetention, Logger: log}
}

// checkRetention refuses a --retention shorter than the stream's duplicate
// window (prune.Pruner.Check).
func checkRetention(ctx context.Context, p *prune.Pruner) error {
	o, err := p.Check(ctx)
	if errors.Is(err, prune.ErrRetentionShort) {
		return retentionShort(p.Retention, p.Stream, o.DuplicateWindow)
	}
	return err
}

// retentionShort is the usage error of a --retention shorter than the
// stream's duplicate window, as ledger prune and run say it.
func retentionShort(retention time.Duration, stream string, window time.Duration) error {
	return usagef("--retention %s is shorter than stream %s's duplicate window %s: a republished id could be applied twice",
		retention, stream, window)
}
