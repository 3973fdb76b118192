package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/node"
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
	Metrics       string        `name:"metrics" placeholder:"ADDR" help:"serve Prometheus /metrics and /healthz on this address (127.0.0.1:9464, say)"`
	// A summary line, so that a run with nothing to do is seen alive.
	SummaryInterval time.Duration `name:"summary-interval" default:"1m" help:"log a summary at info this often: messages applied, duplicates, conflicts and dead letters since the start; with --webhook, outbox rows sent, queued and in review (0: never)"`

	shared *node.Node // set by runPartitions: the embedded server the partitions share
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
	if c.Partitions > 0 || len(c.Partition) > 0 {
		return c.runPartitions(inv)
	}
	var m *metricsListener
	if c.Metrics != "" {
		// Taken first: a port in use stops run before it creates anything.
		if m, err = listenMetrics(c.Metrics); err != nil {
			return err
		}
		defer m.listener.Close()
	}
	// Left out, the stream and durable are the ones this ledger served.
	if err := c.resolveFrom(ctx, c.dbFlag); err != nil {
		return err
	}
	s, err := c.setup(ctx, inv.stderr, snk)
	if err != nil {
		return err
	}
	defer s.Close()
	d, err := c.effects(ctx, s, m)
	if err != nil {
		return err
	}
	// No timeout: on a cluster electing a leader, run waits (each call
	// retried under its own timeout, and logged) until it is answered or
	// stopped.
	cons, err := consumer.New(ctx, s.js, s.st, s.cfg)
	if err != nil {
		return refusal(c.Stream, c.Durable, s.plan.BatchSize, err)
	}
	if err := c.remember(ctx, s); err != nil {
		return err
	}
	s.log.InfoContext(ctx, "consuming", "stream", c.Stream, "durable", c.Durable, "names_from", c.from, "db", c.DB,
		"batch", s.plan.BatchSize, "deadline", s.plan.Deadline, "ack_wait_needed", s.plan.AckWait(), "webhook", c.Webhook.URL)

	return c.consume(ctx, s, m, cons, d)
}

// effects makes the NATS sink if run has one, tells the embedded server's
// watch which streams run depends on, and makes the dispatcher (nil
// without a sink) and the hooks that wake it and feed the metrics.
func (c *runCmd) effects(ctx context.Context, s *consumption, m *metricsListener) (*dispatcher, error) {
	var err error
	if c.Effects.Subject != "" {
		// The NATS sink needs the connection setup made.
		if s.sink, err = c.Effects.natsSink(ctx, s.js, s.nc, s.st, s.plan, c.Send.OutboxMaxAttempts, s.log); err != nil {
			return nil, err
		}
		s.fx.sink = s.sink.Name()
	}
	if s.store != nil {
		s.store.DependOn(c.Stream)
		if ns, ok := s.sink.(interface{ Stream() string }); ok {
			s.store.DependOn(ns.Stream())
		}
	}
	var d *dispatcher
	if s.sink != nil {
		if d, err = newDispatcher(s.st, s.sink, s.plan, c.Send.OutboxWorkers, c.Send.OutboxMaxAttempts, s.log); err != nil {
			return nil, err
		}
	}
	if m != nil {
		s.cfg.AfterAcks = m.AfterAcks
	}
	s.cfg.AfterCommit = func(r consumer.BatchReport) {
		if d != nil {
			d.Notify()
		}
		if m != nil {
			m.AfterCommit(r)
		}
	}
	return d, nil
}

// consume runs the consumer, the dispatcher, the metrics, the pruner, the
// summary and the store's watch until ctx ends or one of them fails.
func (c *runCmd) consume(ctx context.Context, s *consumption, m *metricsListener, cons *consumer.Consumer, d *dispatcher) error {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	store := s.store
	if store == nil {
		store = c.shared // a partition's: runPartitions watches it
	}
	if m != nil {
		if err := serveMetrics(runCtx, m, cons, d, s.st, s.nc, store, s.log); err != nil {
			return err
		}
	}
	if c.PruneInterval > 0 {
		p := &pruner{st: s.st, js: s.js, streamFlags: c.streamFlags, retentionFlags: c.retentionFlags, hold: s.plan.PruneHold(), log: s.log}
		if err := p.check(ctx); err != nil {
			return err
		}
		go p.loop(runCtx, c.PruneInterval)
	}
	summaryDone := make(chan struct{})
	go func() {
		defer close(summaryDone)
		summarize(runCtx, c.SummaryInterval, s.log, s.st, cons, d)
	}()
	watched := watchStore(runCtx, stop, s.store, s.log)
	err := runTogether(runCtx, stop, cons, d)
	<-summaryDone // runTogether stopped runCtx
	logTotals(s.log, cons, d)
	return explainRunError(errors.Join(<-watched, err), c.DBMaxSize)
}

// remember records in the ledger the stream (its instance too) and durable
// run has bound, for the commands that read the ledger later; a ledger that has served others
// too is said at start, since those commands will ask which.
func (c *runCmd) remember(ctx context.Context, s *consumption) error {
	warnNewInstance(ctx, s.log, s.st, c.Stream, s.stream.Created)
	if err := s.st.RememberConsumer(ctx, c.Stream, c.Durable, consumer.StreamInstance(c.Stream, s.stream.Created)); err != nil {
		return err
	}
	all, err := s.st.Consumers(ctx)
	if err != nil {
		return err
	}
	if len(all) > 1 {
		others := make([]string, 0, len(all)-1)
		for _, o := range all {
			if o.Stream != c.Stream || o.Durable != c.Durable {
				others = append(others, o.Stream+"/"+o.Durable)
			}
		}
		s.log.WarnContext(ctx, "this ledger has served other consumers too: status, replay and ledger prune will need --stream to say which",
			"stream", c.Stream, "durable", c.Durable, "others", others)
	}
	return nil
}

// prepare checks every flag (setup checks the shared ones again, without
// cost) and builds the sink, before the metrics port or anything else is
// taken.
func (c *runCmd) prepare() (sink, error) {
	_, err := c.consumeFlags.validate()
	if err == nil {
		err = firstError(c.retentionFlags.validate(), checkDurations(durationFlag{"--prune-interval", c.PruneInterval},
			durationFlag{"--summary-interval", c.SummaryInterval}))
	}
	if err == nil && c.Metrics != "" {
		_, _, err = hostPort("--metrics", c.Metrics)
	}
	if err == nil {
		err = firstError(c.Effects.validate(c.Webhook.URL), c.partitionFlags.validate(c.Subjects), c.partitionsAlone())
	}
	if err != nil {
		return nil, err
	}
	return runSink(c.Webhook, c.Delete, c.Send)
}
