package main

import (
	"context"
	"log/slog"

	"github.com/jetledger/jetledger/consumer/prune"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// pruneNames are what the pruner's refusal calls its settings.
var pruneNames = map[string]string{"Retention": "--retention", "NATS": "--nats", "Run": "run"}

// pruner is the prune.Pruner of ledger prune's flags, which reads the
// bounds from the live stream each time; the durable's unhandled messages
// hold ids back.
func pruner(st *ledger.Store, js jetstream.JetStream, s streamFlags, r retentionFlags, log *slog.Logger) *prune.Pruner {
	return &prune.Pruner{Ledger: st, JetStream: js, Stream: s.Stream, Durable: s.Durable, Retention: r.Retention,
		OutboxRetention: r.OutboxRetention, Logger: log, Names: pruneNames}
}

// checkRetention refuses a --retention shorter than the stream's duplicate
// window (prune.Pruner.Check) as a usage error.
func checkRetention(ctx context.Context, p *prune.Pruner) error {
	_, err := p.Check(ctx)
	return configUsage(err)
}
