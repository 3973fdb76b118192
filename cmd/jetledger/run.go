package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/service"
)

const runHelp = `
Consume a JetStream stream with exactly-once effects. Each fetched batch is
applied in one SQLite transaction: per message, its Nats-Msg-Id goes into the
ledger (processed_messages) together with the built-in handler's change, and
the message is acked only after the commit. A redelivered message whose id is
already in the ledger is acked without running the handler again.

The built-in handler records each message in the events table and, with
--apply, runs your SQL in the same transaction with the named parameters
:msg_id :subject :seq :data (read JSON fields with json_extract(:data, '$.f')).
--schema runs a SQL file at start (use CREATE TABLE IF NOT EXISTS).

Without --nats, run starts an embedded JetStream server on --listen with its
store beside the database, so one binary is a whole edge node; with
--subjects the stream is created if missing.

Without --stream, run consumes the stream and durable it recorded in the
ledger when it last ran (EVENTS and jetledger for a new ledger); it records
the ones it consumes at each start, so that status, replay and ledger prune
need no --stream either. A ledger that served several asks for --stream
(exit 2).

Every --summary-interval run logs, at info, the messages applied, duplicates,
conflicts and dead letters since it started, and with --webhook the outbox
rows sent and those queued and in review now: a quiet run is seen alive. Each
failed send is logged at warn with its outbox id, sink, attempt and error.

AckWait: a consumer created by run gets AckWait = buffer-wait + deadline +
commit-margin + batch x 1ms + ack-margin. An existing consumer with a shorter
AckWait is refused (exit 1) with both values named; see 'jetledger check'.

SIGINT/SIGTERM: stop fetching, finish and commit the batch in hand, ack it,
exit 0.

Example:

    jetledger run --stream PAYMENTS --subjects 'payments.>' --schema schema.sql \
      --apply "INSERT INTO balances(account, amount) VALUES (json_extract(:data,'$.account'), json_extract(:data,'$.amount'))
               ON CONFLICT(account) DO UPDATE SET amount = amount + excluded.amount"`

// runCmd is `jetledger run`.
type runCmd struct {
	consumeFlags
	Delete         webhookDelete `embed:"" group:"webhook"`
	Send           webhookSend   `embed:"" group:"webhook"`
	Effects        effectsFlags  `embed:"" group:"effects"`
	partitionFlags `group:"partitions"`
	retentionFlags
	PruneInterval time.Duration `name:"prune-interval" default:"1h" help:"how often to prune the ledger while running (0: never)"`
	Metrics       string        `name:"metrics" placeholder:"ADDR" help:"serve Prometheus /metrics and /healthz on this address (127.0.0.1:9464, say); one that is not loopback is warned of"`
	MetricsCert   string        `name:"metrics-tls-cert" placeholder:"FILE" help:"serve --metrics with TLS: the certificate (PEM), with --metrics-tls-key"`
	MetricsKey    string        `name:"metrics-tls-key" placeholder:"FILE" help:"the key of --metrics-tls-cert (PEM)"`
	// A summary line, so that a run with nothing to do is seen alive.
	SummaryInterval time.Duration `name:"summary-interval" default:"1m" help:"log a summary at info this often: messages applied, duplicates, conflicts and dead letters since the start; with --webhook, outbox rows sent, queued and in review (0: never)"`
}

func (runCmd) Help() string { return runHelp }

func (c *runCmd) Run(inv *invocation) error {
	err := c.run(inv)
	if errors.Is(err, context.Canceled) && inv.ctx.Err() != nil {
		// SIGINT/SIGTERM while starting: nothing was consumed, a clean stop.
		fmt.Fprintln(inv.stderr, "jetledger run: stopped while starting; nothing was consumed")
		return nil
	}
	return err
}

// run consumes until ctx ends (service.Run, or service.RunPartitions),
// with the flags mapped to its config, which names them in its refusals.
// Every flag is checked before the --metrics port is taken or the ledger
// read.
func (c *runCmd) run(inv *invocation) error {
	ctx := inv.ctx
	hook, err := c.prepare()
	if err != nil {
		return err
	}
	log, err := c.Log.logger(inv.stderr)
	if err != nil {
		return err
	}
	if c.partitioned() {
		return c.runPartitions(ctx, c.config(log, hook), c.parts())
	}
	var l net.Listener
	if c.Metrics != "" {
		// Taken first: a port in use stops run before it creates anything.
		if l, err = net.Listen("tcp", c.Metrics); err != nil {
			return fmt.Errorf("--metrics %s: %w", c.Metrics, err)
		}
		defer l.Close()
	}
	// Left out, the stream and durable are the ones this ledger served.
	if err := c.resolveFrom(ctx, c.dbFlag); err != nil {
		return err
	}
	cfg := c.config(log, hook)
	cfg.Metrics = l
	return advise(service.Run(ctx, cfg))
}

// prepare checks every flag, before the metrics port or anything else is
// taken: the webhook's flags, then the config's (check,
// service.Partitions.Validate).
func (c *runCmd) prepare() (*webhook.Config, error) {
	hook, err := c.webhook()
	if err != nil {
		return nil, err
	}
	cfg := c.config(quiet, hook)
	if err = cmp.Or(c.checkGroup(cfg), c.check(cfg)); err == nil && c.partitioned() {
		err = configUsage(c.parts().Validate(cfg))
	}
	return hook, err
}

// config is the consuming flags' config with run's own.
func (c *runCmd) config(log *slog.Logger, hook *webhook.Config) service.Config {
	cfg := c.consumeFlags.config(log, nil)
	cfg.Webhook = hook
	cfg.Effects = c.Effects.effects()
	cfg.SummaryInterval, cfg.MetricsAddr, cfg.MetricsCert, cfg.MetricsKey = c.SummaryInterval, c.Metrics, c.MetricsCert, c.MetricsKey
	cfg.Outbox = service.Outbox{Workers: c.Send.OutboxWorkers, MaxAttempts: c.Send.OutboxMaxAttempts}
	cfg.Prune = service.Prune{Interval: c.PruneInterval, Retention: c.Retention, OutboxRetention: c.OutboxRetention}
	if c.Changelog || c.Standby || c.Group != "" {
		cfg.Owner = &service.Owner{Standby: c.Standby || c.Group != "", Replicas: c.Replicas}
	}
	cfg.Ledger.LeaveChangelog = c.Leave
	cfg.StartAttrs = append(cfg.StartAttrs, "webhook", webhook.RedactURL(c.Webhook.URL))
	return cfg
}
