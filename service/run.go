package service

import (
	"cmp"
	"context"
	"errors"
	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/natsconn"
	"sync"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/consumer/outbox/natssink"
	"github.com/jetledger/jetledger/consumer/prune"
	"github.com/jetledger/jetledger/internal/say"
	"github.com/jetledger/jetledger/metrics"
	"github.com/jetledger/jetledger/stream"
	"github.com/nats-io/nats.go/jetstream"
)

// Run starts the service (Start), consumes until ctx ends, and closes it.
// Its errors are said in cfg.Names' words (Config.Say).
func Run(ctx context.Context, cfg Config) error {
	switch {
	case cfg.Owner != nil:
		return runOwned(ctx, cfg)
	case cfg.NATS != nil && !cfg.leaseHeld && cfg.Shared == nil:
		return runLeased(ctx, cfg)
	}
	s, err := Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	return s.Run(ctx)
}

// Run consumes until ctx ends (nil, after draining) or a part fails. The
// consumer, the dispatcher, the pruner, the metrics and the embedded
// node's store watch stop together: the consumer, the dispatcher or the
// watch failing stops all. Its errors are said in the Config's Names'
// words (Config.Say).
func (s *Service) Run(ctx context.Context) error {
	return s.cfg.Say(s.run(ctx))
}

func (s *Service) run(ctx context.Context) error {
	c := &s.cfg
	var batches *metrics.Batches
	if c.Metrics != nil {
		batches = metrics.NewBatches()
	}
	d, err := s.dispatcher(ctx, batches)
	if err != nil {
		return err
	}
	// No timeout: on a cluster electing a leader, Run waits (each call
	// retried under its own timeout, and logged) until it is answered or
	// stopped.
	cons, err := consumer.New(ctx, s.js, s.st, c.Consumer)
	if err != nil {
		return step(StepConsumer, err)
	}
	if err := s.remember(ctx); err != nil {
		return step(StepLedger, err)
	}
	plan := c.Consumer.Plan.WithDefaults() // what the consumer runs with
	attrs := append([]any{"stream", c.Stream.Name, "durable", c.Consumer.Durable, "db", c.DB,
		"batch", plan.BatchSize, "deadline", plan.Deadline, "ack_wait_needed", plan.AckWait()}, c.StartAttrs...)
	s.log.InfoContext(ctx, "consuming", attrs...)
	return s.consume(ctx, batches, cons, d)
}

// dispatcher makes the NATS sink if there is one, tells the embedded
// node's watch which streams the run depends on, and makes the dispatcher
// (nil without a sink) and the hooks that wake it and feed the metrics.
func (s *Service) dispatcher(ctx context.Context, batches *metrics.Batches) (*outbox.Dispatcher, error) {
	c := &s.cfg
	snk := c.Sink
	if c.Effects != nil {
		ns, err := s.natsSink(ctx)
		if err != nil {
			return nil, step(StepEffects, err)
		}
		snk, s.fx.sink = ns, ns.Name()
	}
	if s.node != nil {
		s.node.DependOn(c.Stream.Name)
		if ns, ok := snk.(interface{ Stream() string }); ok {
			s.node.DependOn(ns.Stream())
		}
	}
	var d *outbox.Dispatcher
	if snk != nil {
		var err error
		d, err = outbox.New(s.st, outbox.Config{Sink: snk, Workers: c.Outbox.Workers, MaxAttempts: c.Outbox.MaxAttempts,
			Backoff: c.Outbox.Backoff, Lease: c.Consumer.Plan.ClaimLease(snk.Timeout()), Logger: s.log})
		if errors.Is(err, outbox.ErrInvalidConfig) {
			return nil, step(StepOutbox, &ConfigError{Reason: err.Error(), Err: err})
		} else if err != nil {
			return nil, step(StepOutbox, err)
		}
	}
	if batches != nil {
		c.Consumer.AfterAcks = batches.AfterAcks
	}
	c.Consumer.AfterCommit = func(r consumer.BatchReport) {
		if d != nil {
			d.Notify()
		}
		if batches != nil {
			batches.AfterCommit(r)
		}
	}
	return d, nil
}

// natsSink builds the NATS sink of Effects on the connection consumed
// with, creating Effects.Stream if no stream captures the subject.
func (s *Service) natsSink(ctx context.Context) (*natssink.Sink, error) {
	e := *s.cfg.Effects
	// stream.EnsureEffects needs the timeout the sink will use, the default
	// included, to size the effects stream's duplicate window.
	e.Timeout = cmp.Or(e.Timeout, natssink.TimeoutDefault)
	if e.Stream != "" {
		fx := stream.Effects{Stream: e.Stream, Subject: e.Subject, Timeout: e.Timeout, MaxAttempts: s.cfg.Outbox.MaxAttempts,
			Plan: s.cfg.Consumer.Plan, Site: s.cfg.site(), Logger: s.log, Names: say.Under(s.cfg.Names.Settings, "Effects")}
		if fx.Site != "" {
			fx.LastSent = func(ctx context.Context) (uint64, error) { return s.st.LastExternalSeq(ctx, e.Stream) }
		}
		err := stream.EnsureEffects(ctx, s.js, fx)
		if err != nil {
			return nil, err
		}
	}
	ns, err := natssink.New(ctx, s.js, s.nc, natssink.Config{Subject: e.Subject, Timeout: e.Timeout, Logger: s.log, Ledger: s.st})
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, errors.Join(ErrNoEffectsStream, err)
	}
	return ns, err
}

// remember records in the ledger the stream (its instance too) and durable
// the run has bound, for the commands that read the ledger later; a ledger
// that has served others too is said at start, since those will ask which.
func (s *Service) remember(ctx context.Context) error {
	name, durable := s.cfg.Stream.Name, s.cfg.Consumer.Durable
	stream.WarnNewInstance(ctx, s.log, s.st, name, s.info.Created)
	if err := s.st.RememberConsumer(ctx, name, durable, consumer.StreamInstance(name, s.info.Created)); err != nil {
		return err
	}
	if url := s.serverURL(); url != "" {
		if err := s.st.RecordServer(ctx, name, durable, url); err != nil {
			return err
		}
	}
	all, err := s.st.Consumers(ctx)
	if err != nil {
		return err
	}
	if len(all) > 1 {
		others := make([]string, 0, len(all)-1)
		for _, o := range all {
			if o.Stream != name || o.Durable != durable {
				others = append(others, o.Stream+"/"+o.Durable)
			}
		}
		s.log.WarnContext(ctx, "this ledger has served other consumers too: status, replay and ledger prune will need "+s.cfg.Names.Say("Stream.Name")+" to say which",
			"stream", name, "durable", durable, "others", others)
	}
	return nil
}

// serverURL is where clients reach the run's stream, as the ledger
// records it (without credentials): the servers given, or the embedded
// server's listen address.
func (s *Service) serverURL() string {
	switch {
	case s.cfg.NATS != nil && s.cfg.NATS.URL != "":
		return natsconn.BareURL(s.cfg.NATS.URL)
	case s.node != nil:
		return s.node.ClientURL()
	case s.cfg.Shared != nil:
		return s.cfg.Shared.ClientURL()
	}
	return ""
}

// consume runs the consumer, the dispatcher, the metrics, the pruner, the
// summary and the store's watch until ctx ends or one of them fails.
func (s *Service) consume(ctx context.Context, batches *metrics.Batches, cons *consumer.Consumer, d *outbox.Dispatcher) error {
	c := &s.cfg
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup // the pruner and the metrics server, waited for on return
	defer wg.Wait()
	defer stop()
	// The admin API before /healthz: a request sent the moment it
	// answers 200 (ready) must find the endpoints.
	if stopAdmin := s.serveAdmin(d, cons); stopAdmin != nil {
		defer stopAdmin()
	}
	if c.Metrics != nil {
		store := s.node
		if store == nil {
			store = c.Shared // a partition's: RunPartitions watches it
		}
		if err := s.serveMetrics(runCtx, &wg, batches, cons, d, store); err != nil {
			return step(StepMetrics, err)
		}
	}
	if c.Prune.Interval > 0 {
		p := &prune.Pruner{Ledger: s.st, JetStream: s.js, Stream: c.Stream.Name, Durable: c.Consumer.Durable, Retention: c.Prune.Retention,
			OutboxRetention: c.Prune.OutboxRetention, Hold: c.Consumer.Plan.PruneHold(), Interval: c.Prune.Interval, Logger: s.log,
			Names: c.servedNames(map[string]string{"Retention": c.Names.Say("Prune.Retention")})}
		if _, err := p.Check(ctx); errors.Is(err, prune.ErrRetentionShort) {
			return step(StepPrune, err) // a *prune.RetentionError, said in Names' words
		} else if err != nil {
			return step(StepPrune, err)
		}
		wg.Go(func() { _ = p.Run(runCtx) }) // checked above
	}
	if c.site() != "" && s.node != nil {
		// A copy made while the hub was away gets its consumer there once
		// the link is up; never in the way of processing.
		wg.Go(func() { stream.KeepHubConsumer(runCtx, s.js, s.info, s.log) })
		wg.Go(func() { s.reportToHub(runCtx) })
	}
	summaryDone := make(chan struct{})
	go func() {
		defer close(summaryDone)
		summarize(runCtx, c.SummaryInterval, s.log, s.st, cons, d)
	}()
	watched := watchStore(runCtx, stop, s.node, s.log, s.cfg.Names.Program)
	err := runTogether(runCtx, stop, cons, d)
	<-summaryDone // runTogether stopped runCtx
	logTotals(s.log, cons, d)
	return step(StepRun, errors.Join(<-watched, err))
}

// serveAdmin serves the run's admin API (package admin) while it
// consumes, and returns what stops it: nil, said at warn, if it cannot (the
// API is an aid to people; the run consumes without it). On an embedded
// server it has a connection of its own that answers only to inboxes
// (node.Node.AdminConn); on another, the run's.
func (s *Service) serveAdmin(d *outbox.Dispatcher, cons *consumer.Consumer) func() {
	c := &s.cfg
	nc, closeConn := s.nc, func() {}
	if n := cmp.Or(s.node, c.Shared); n != nil {
		own, err := n.AdminConn()
		if err != nil {
			s.log.Warn("the admin API is not served: the run consumes without it", "err", err)
			return nil
		}
		nc, closeConn = own, own.Close
	}
	cfg := admin.Config{Conn: nc, Store: s.st, JetStream: s.js, Logger: s.log, Version: c.Stream.Version,
		Address: admin.Address{Site: c.site(), Stream: c.Stream.Name, Durable: c.Consumer.Durable},
		Applied: func() uint64 { return cons.Counts().Applied },
		Pending: func(ctx context.Context) (uint64, error) {
			info, err := cons.Info(ctx)
			if err != nil {
				return 0, err
			}
			return info.NumPending, nil
		}}
	if d != nil {
		cfg.Canceller = d // its sink deletes what was sent
	}
	adm, err := admin.Serve(cfg)
	if err != nil {
		closeConn()
		s.log.Warn("the admin API is not served: the run consumes without it", "err", err)
		return nil
	}
	return func() {
		adm.Stop() //nolint:errcheck // stopping
		closeConn()
	}
}
