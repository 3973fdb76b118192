package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jetledger/jetledger/consumer"
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
	Delete webhookDelete `embed:"" group:"webhook"`
	Send   webhookSend   `embed:"" group:"webhook"`
	retentionFlags
	PruneInterval time.Duration `name:"prune-interval" default:"1h" help:"how often to prune the ledger while running (0: never)"`
	Metrics       string        `name:"metrics" placeholder:"ADDR" help:"serve Prometheus /metrics and /healthz on this address (127.0.0.1:9464, say)"`
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

// run consumes until ctx ends. The consumer, the dispatcher and the pruner
// stop together: either of the first two failing stops all.
func (c *runCmd) run(inv *invocation) error {
	ctx := inv.ctx
	snk, err := c.prepare()
	if err != nil {
		return err
	}
	var m *metrics
	if c.Metrics != "" {
		// Taken first: a port in use stops run before it creates anything.
		if m, err = listenMetrics(c.Metrics); err != nil {
			return err
		}
		defer m.listener.Close()
	}
	s, err := c.setup(ctx, inv.stderr, snk)
	if err != nil {
		return err
	}
	defer s.Close()
	var d *dispatcher
	if s.sink != nil {
		if d, err = newDispatcher(s.st, s.sink, s.plan, c.Send.OutboxWorkers, c.Send.OutboxMaxAttempts, s.log); err != nil {
			return err
		}
	}
	if m != nil {
		s.cfg.AfterAcks = m.afterAcks
	}
	s.cfg.AfterCommit = func(r consumer.BatchReport) {
		if d != nil {
			d.Notify()
		}
		if m != nil {
			m.afterCommit(r)
		}
	}
	setupCtx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	cons, err := consumer.New(setupCtx, s.js, s.st, s.cfg)
	if err != nil {
		return refusal(c.Stream, c.Durable, s.plan.BatchSize, err)
	}
	s.log.InfoContext(ctx, "consuming", "stream", c.Stream, "durable", c.Durable, "db", c.DB,
		"batch", s.plan.BatchSize, "deadline", s.plan.Deadline, "ack_wait_needed", s.plan.AckWait(), "webhook", c.Webhook.URL)

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	if m != nil {
		serveMetrics(runCtx, m, cons, d, s.st, s.nc, s.log)
	}
	if c.PruneInterval > 0 {
		p := &pruner{st: s.st, js: s.js, streamFlags: c.streamFlags, retentionFlags: c.retentionFlags, hold: s.plan.PruneHold(), log: s.log}
		if err := p.check(setupCtx); err != nil {
			return err
		}
		go p.loop(runCtx, c.PruneInterval)
	}
	err = runTogether(runCtx, stop, cons, d)
	logTotals(s.log, cons, d)
	return err
}

// prepare checks every flag (setup checks the shared ones again, without
// cost) and builds the sink, before the metrics port or anything else is
// taken.
func (c *runCmd) prepare() (sink, error) {
	_, err := c.consumeFlags.validate()
	if err == nil {
		err = firstError(c.retentionFlags.validate(), checkDurations(durationFlag{"--prune-interval", c.PruneInterval}))
	}
	if err == nil && c.Metrics != "" {
		_, _, err = hostPort("--metrics", c.Metrics)
	}
	if err != nil {
		return nil, err
	}
	return runSink(c.Webhook, c.Delete, c.Send)
}

// runTogether runs the consumer and, if there is one, the dispatcher until
// ctx ends or either fails, which stops the other.
func runTogether(ctx context.Context, stop func(), cons *consumer.Consumer, d *dispatcher) error {
	dispatchErr := make(chan error, 1)
	if d != nil {
		go func() {
			err := d.Run(ctx)
			stop()
			dispatchErr <- err
		}()
	} else {
		dispatchErr <- nil
	}
	err := cons.Run(ctx)
	stop()
	return errors.Join(err, <-dispatchErr)
}

// logTotals logs what the consumer and the dispatcher did, on a clean stop
// as on a failure.
func logTotals(log *slog.Logger, cons *consumer.Consumer, d *dispatcher) {
	n := cons.Counts()
	attrs := []any{"applied", n.Applied, "duplicates", n.Duplicates,
		"conflicts", n.Conflicts, "failed", n.Failed, "naks", n.Naks,
		"terms", n.Terms, "dead_letters", n.DeadLetters, "stale", n.Stale, "batches", n.Batches}
	if d != nil {
		dc := d.Counts()
		attrs = append(attrs, "sent", dc.Sent, "send_failed", dc.Failed, "send_retried", dc.Retried,
			"review", dc.Review, "deleted", dc.Deleted)
	}
	log.Info("consumer stopped", attrs...)
}
