package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/publisher"
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

type runFlags struct {
	db, stream, subjects, durable, apply, schema, listen, storeDir string
	embeddedToken                                                  string
	maxDeliver                                                     int
	dbMaxSize                                                      int64
	dupWindow                                                      time.Duration
	allowSeqIDs                                                    bool
	nats                                                           natsFlags
	plan                                                           planFlags
	webhook                                                        webhookFlags
	outboxWorkers, outboxAttempts                                  int
	log                                                            logFlags
	// run only
	retention, outboxRetention, pruneInterval time.Duration
	metricsAddr                               string
	// replay only
	replay      bool
	fromSeq     uint64
	toSeq       uint64
	since       string
	sendEffects bool
	noEffects   bool
	asJSON      bool
}

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	err := consume(ctx, args, stdout, stderr, false)
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		// SIGINT/SIGTERM while starting: nothing was consumed, a clean stop.
		fmt.Fprintln(stderr, "jetledger run: stopped while starting; nothing was consumed")
		return nil
	}
	return err
}

// consume is run, and with replay set the replay command: the same ledger
// path, from a chosen position, to the end of the stream.
func consume(ctx context.Context, args []string, stdout, stderr io.Writer, replay bool) error {
	f := runFlags{replay: replay}
	fs := newFlags("run", "run [flags]", runHelp, stdout)
	if replay {
		fs = newFlags("replay", "replay [--from-seq N | --since DURATION|TIME] [flags]", replayHelp, stdout)
		fs.Uint64Var(&f.fromSeq, "from-seq", 0, "replay from this stream sequence (default: the stream's start)")
		fs.Uint64Var(&f.toSeq, "to-seq", 0, "replay up to this stream sequence (default: the last one delivered to --durable, where run stands); effects of messages run was never delivered are queued for run")
		fs.StringVar(&f.since, "since", "", "replay messages stored since this long ago (1h) or this time (RFC 3339)")
		fs.BoolVar(&f.sendEffects, "send-effects", false, "queue the outbox effects of every replayed message for run to send (default: suppressed up to run's ack floor)")
		fs.BoolVar(&f.noEffects, "no-effects", false, "run has no outbox effects (no --webhook): replay past its ack floor without recording any")
		fs.BoolVar(&f.asJSON, "json", false, "print the summary as JSON")
	} else {
		fs.DurationVar(&f.retention, "retention", ledger.RetentionDefault, "keep processed_messages rows at least this long; older rows of messages gone from the stream are pruned")
		fs.DurationVar(&f.outboxRetention, "outbox-retention", ledger.OutboxRetentionDefault, "keep sent and cancelled outbox rows at least this long")
		fs.DurationVar(&f.pruneInterval, "prune-interval", time.Hour, "how often to prune the ledger while running (0: never)")
		fs.StringVar(&f.metricsAddr, "metrics", "", "serve Prometheus /metrics and /healthz on this address (127.0.0.1:9464, say)")
	}
	fs.StringVar(&f.db, "db", "jetledger.db", "SQLite ledger file (created with mode 0600)")
	f.nats.register(fs, "NATS server URL; empty starts an embedded JetStream server")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:4222", "embedded server's listen address (without --nats)")
	fs.StringVar(&f.embeddedToken, "embedded-token", "", "require this token of every client of the embedded server (clients pass --nats-token)")
	fs.StringVar(&f.storeDir, "store-dir", "", "embedded server's JetStream store (default: <db>.nats beside the database)")
	syncEvery := syncIntervalFlag(fs)
	fs.StringVar(&f.stream, "stream", "EVENTS", "stream to consume")
	fs.StringVar(&f.subjects, "subjects", "", "comma-separated subjects; creates the stream with them if it does not exist")
	fs.DurationVar(&f.dupWindow, "duplicate-window", 2*time.Minute, "duplicate window of a stream created by --subjects")
	durableUsage := "durable pull consumer name"
	if replay {
		durableUsage = "the live durable consumer of run: the replay stops at the last message it was delivered and leaves the rest, with its effects, to run"
	}
	fs.StringVar(&f.durable, "durable", consumer.DurableDefault, durableUsage)
	fs.IntVar(&f.maxDeliver, "max-deliver", consumer.MaxDeliverDefault, "deliveries before a failing message is dead-lettered, enforced by jetledger (-1 unlimited); consumers are created with no server-side limit")
	fs.Int64Var(&f.dbMaxSize, "db-max-size", 0, "cap the database at this many bytes; past it run stops with 'database or disk is full' (0: no cap)")
	fs.StringVar(&f.apply, "apply", "", "SQL run per message in its transaction, with :msg_id :subject :seq :data")
	fs.StringVar(&f.schema, "schema", "", "SQL file run at start to create your tables")
	fs.BoolVar(&f.allowSeqIDs, "allow-seq-ids", false, "give messages without Nats-Msg-Id the id <stream>@<created>/<seq> (the stream instance and the sequence) instead of dead-lettering them (cannot catch publisher retries)")
	f.plan.register(fs)
	f.webhook.register(fs)
	fs.IntVar(&f.outboxWorkers, "outbox-workers", consumer.WorkersDefault, "concurrent outbox sends")
	fs.IntVar(&f.outboxAttempts, "outbox-max-attempts", consumer.MaxAttemptsDefault, "sends of an outbox row on retryable failures (429, 5xx) before it is failed")
	f.log.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	plan, err := f.plan.plan()
	if err != nil {
		return err
	}
	var from consumer.ReplayFrom
	if replay {
		if from, err = f.replayFrom(); err != nil {
			return err
		}
	}
	if f.maxDeliver == 0 || f.maxDeliver < -1 {
		return usagef("--max-deliver %d: want a positive number or -1", f.maxDeliver)
	}
	log, err := f.log.logger(stderr)
	if err != nil {
		return err
	}
	if f.webhook.url == "" && f.webhook.deleteURL != "" {
		return usagef("--webhook-delete-url needs --webhook")
	}
	sink, err := f.webhook.sink()
	if err != nil {
		return err
	}
	if f.outboxWorkers < 1 || f.outboxAttempts < 1 {
		return usagef("--outbox-workers and --outbox-max-attempts must be at least 1")
	}

	if f.dbMaxSize < 0 {
		return usagef("--db-max-size %d: want 0 or more bytes", f.dbMaxSize)
	}
	// The embedded server's store lock comes first: a second owner is
	// refused before it touches anything.
	conn := f.nats
	if conn.url == "" {
		dir := f.storeDir
		if dir == "" {
			dir = f.db + ".nats"
		}
		srv, err := startEmbedded(embeddedConfig{Listen: f.listen, StoreDir: dir, Token: f.embeddedToken, Sync: syncEvery.interval}, log)
		if err != nil {
			return err
		}
		defer srv.Close()
		conn = natsFlags{url: srv.URL(), token: f.embeddedToken}
	} else if f.embeddedToken != "" {
		return usagef("--embedded-token is for the embedded server; with --nats use --nats-token")
	} else if syncEvery.set {
		return usagef("--sync-interval is for the embedded server; the server at --nats syncs as its own sync_interval says")
	}
	st, err := ledger.Open(f.db, ledger.Config{Logger: log, MaxSizeBytes: f.dbMaxSize})
	if err != nil {
		return err
	}
	defer st.Close()
	h, err := newEventsHandler(ctx, st, f.schema, f.apply)
	if err != nil {
		return err
	}
	if sink != nil {
		h.sink = sink.Name()
	}
	var dispatcher *consumer.Dispatcher
	if sink != nil && !replay { // a replay's effects are run's to send
		dispatcher, err = consumer.NewDispatcher(st, consumer.DispatcherConfig{Sink: sink, Workers: f.outboxWorkers,
			MaxAttempts: f.outboxAttempts, Lease: plan.ClaimLease(sink.Timeout()), Logger: log})
		if err != nil {
			return usageError{err}
		}
	}

	nc, js, err := connect(ctx, conn, log)
	if err != nil {
		return err
	}
	defer nc.Close()

	setupCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	info, err := ensureStream(setupCtx, js, f.stream, splitList(f.subjects), f.dupWindow, log)
	if err != nil {
		return err
	}
	warnDuplicateWindow(ctx, log, info.Config.Duplicates)
	cfg := consumer.Config{
		Stream: f.stream, Durable: f.durable, Plan: plan, Handler: h.handle,
		MaxDeliver: f.maxDeliver, AllowSequenceIDs: f.allowSeqIDs, Logger: log,
	}
	var bound replayBound
	if replay {
		b, err := boundReplay(setupCtx, js, f.stream, f.durable, f.toSeq)
		if err != nil {
			return err
		}
		if b.upTo == 0 || b.upTo < from.Seq {
			fmt.Fprintf(stderr, "jetledger replay: nothing to replay: durable %s was delivered nothing from there\n", f.durable)
			return replaySummary(ctx, st, nil, time.Now(), b, f.asJSON, stdout)
		}
		if err := checkEffectsDecided(setupCtx, st, f.stream, b, sink, f.noEffects); err != nil {
			return err
		}
		from.UpTo = b.upTo
		h.replay = &replayEffects{replayBound: b, sendAll: f.sendEffects}
		cfg.Replay = &from
		bound = b
	}
	var m *metrics
	if f.metricsAddr != "" {
		m = newMetrics()
		cfg.AfterAcks = m.afterAcks
	}
	cfg.AfterCommit = func(r consumer.BatchReport) {
		if dispatcher != nil {
			dispatcher.Notify()
		}
		if m != nil {
			m.afterCommit(r)
		}
	}
	c, err := consumer.New(setupCtx, js, st, cfg)
	if err != nil {
		return err
	}
	if !replay {
		log.InfoContext(ctx, "consuming", "stream", f.stream, "durable", f.durable, "db", f.db,
			"batch", plan.BatchSize, "deadline", plan.Deadline, "ack_wait_needed", plan.AckWait(), "webhook", f.webhook.url)
	}

	// The consumer, the dispatcher and the pruner stop together: either of
	// the first two failing stops all.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	if replay {
		started := time.Now()
		progressDone := make(chan error, 1)
		go func() { progressDone <- followReplay(runCtx, c, stderr, stop) }()
		runErr := c.Run(runCtx)
		stop()
		if perr := <-progressDone; runErr == nil {
			runErr = perr
		}
		if runErr != nil {
			return runErr
		}
		return replaySummary(ctx, st, c, started, bound, f.asJSON, stdout)
	}
	if m != nil {
		if err := serveMetrics(runCtx, f.metricsAddr, m, c, dispatcher, st, nc, log); err != nil {
			return err
		}
	}
	if f.pruneInterval > 0 {
		pruner := &pruner{st: st, js: js, stream: f.stream, durable: f.durable, retention: f.retention, outboxRetention: f.outboxRetention,
			hold: plan.PruneHold(), log: log}
		if err := pruner.check(setupCtx); err != nil {
			return err
		}
		go pruner.loop(runCtx, f.pruneInterval)
	}
	dispatchErr := make(chan error, 1)
	if dispatcher != nil {
		go func() {
			err := dispatcher.Run(runCtx)
			stop()
			dispatchErr <- err
		}()
	} else {
		dispatchErr <- nil
	}
	runErr := c.Run(runCtx)
	stop()
	runErr = errors.Join(runErr, <-dispatchErr)
	counts := c.Counts()
	attrs := []any{"applied", counts.Applied, "duplicates", counts.Duplicates,
		"conflicts", counts.Conflicts, "failed", counts.Failed, "naks", counts.Naks,
		"terms", counts.Terms, "dead_letters", counts.DeadLetters, "stale", counts.Stale, "batches", counts.Batches}
	if dispatcher != nil {
		dc := dispatcher.Counts()
		attrs = append(attrs, "sent", dc.Sent, "send_failed", dc.Failed, "send_retried", dc.Retried,
			"review", dc.Review, "deleted", dc.Deleted)
	}
	log.Info("consumer stopped", attrs...)
	return runErr
}

// warnDuplicateWindow warns when the stream forgets ids before a default
// publisher stops retrying.
func warnDuplicateWindow(ctx context.Context, log *slog.Logger, window time.Duration) {
	p, err := publisher.New(nil, publisher.Config{})
	if err != nil {
		return
	}
	if err := p.CheckDuplicateWindow(window); err != nil {
		log.WarnContext(ctx, "stream duplicate window is short", "err", err)
	}
}
