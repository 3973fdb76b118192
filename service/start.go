package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/consumer/partition"
	"github.com/jetledger/jetledger/consumer/replay"
	"github.com/jetledger/jetledger/internal/say"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/natsconn"
	"github.com/jetledger/jetledger/node"
	"github.com/jetledger/jetledger/publisher"
	"github.com/jetledger/jetledger/sqlhandler"
	"github.com/jetledger/jetledger/stream"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Service is a started run: the embedded node if any, the connection, the
// ledger with the SQL handler, and the stream. Run consumes; Close
// releases.
type Service struct {
	cfg     Config
	log     *slog.Logger
	node    *node.Node // nil with NATS
	nc      *nats.Conn
	js      jetstream.JetStream
	st      *ledger.Store
	h       *sqlhandler.Handler
	info    *jetstream.StreamInfo
	fx      effects
	closers []func()
}

// Start checks cfg, then starts what Run consumes with. Config.SQL is
// checked on a scratch copy of the ledger's schema first, and the embedded
// node's store lock is taken next, so that bad SQL or a second owner
// creates nothing; the ledger is opened once the server answers, so that
// an unreachable one leaves no new database behind. A ledger whose writer
// another process holds is waited for, logged once.
// Its errors are said in cfg.Names' words (Config.Say).
func Start(ctx context.Context, cfg Config) (*Service, error) {
	cfg, err := cfg.withDefaults()
	if err == nil {
		err = cfg.load()
	}
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, log: cfg.Logger}
	if err := s.start(ctx); err != nil {
		s.Close()
		return nil, cfg.Say(err)
	}
	return s, nil
}

// listenMetrics listens on MetricsAddr when Metrics is not given, first:
// a port in use stops the run before it creates anything. release, nil when
// nothing was opened, closes the listener.
func (c *Config) listenMetrics() (release func(), err error) {
	if c.Metrics != nil || c.MetricsAddr == "" {
		return nil, nil
	}
	if c.Metrics, err = net.Listen("tcp", c.MetricsAddr); err != nil {
		return nil, step(StepMetrics, fmt.Errorf("%s %s: %w", c.Names.Say("MetricsAddr"), c.MetricsAddr, err))
	}
	l := c.Metrics
	return func() { l.Close() }, nil
}

func (s *Service) start(ctx context.Context) (err error) {
	c := &s.cfg
	if closeMetrics, err := c.listenMetrics(); err != nil {
		return err
	} else if closeMetrics != nil {
		s.closers = append(s.closers, closeMetrics)
	}
	if err := sqlhandler.Check(ctx, c.DB, c.SQL); err != nil {
		return step(StepSQL, err)
	}
	conn := natsconn.Config{}
	if c.NATS != nil {
		conn = *c.NATS
		_ = node.ApplyMemoryLimit(c.Node.MemoryLimit, s.log) // refused by node.Start alone; a caller checks it
	} else {
		if s.node, err = node.Start(ctx, c.Node); err != nil {
			return step(StepNode, err)
		}
		s.closers = append(s.closers, s.node.Close)
		conn = s.node.Conn() // in-process: whatever the listener's roles and TLS
		conn.Logger = s.log
	}
	if c.Node.MemoryLimit > 0 {
		// Within the memory limit's reserve, as the ledger grows.
		if err := ledger.SetHeapLimit(int64(node.SQLiteHeapLimit)); err != nil {
			return step(StepNode, err)
		}
	}
	if s.nc, s.js, err = c.Dial(ctx, conn); err != nil {
		return step(StepConnect, err)
	}
	s.closers = append(s.closers, s.nc.Close)
	if err := stream.RequireJetStream(ctx, s.js); errors.Is(err, stream.ErrNoJetStream) {
		return step(StepServer, &NoJetStreamError{URL: natsconn.RedactURL(conn.URL), NATS: c.Names.Say("NATS"), Err: err})
	} else if err != nil {
		return step(StepServer, err)
	}
	ledgerCfg := c.Ledger
	if c.Webhook != nil {
		if c.Sink, err = webhook.New(*c.Webhook); err != nil { // refused by validate already
			return step(StepOutbox, err)
		}
	}
	if c.Sink != nil {
		ledgerCfg.Sinks = []string{c.Sink.Name()}
		s.fx.sink = c.Sink.Name()
	}
	if s.st, err = ledger.Open(c.DB, ledgerCfg); errors.Is(err, ledger.ErrInvalidConfig) {
		return step(StepLedger, &ConfigError{Reason: fmt.Sprintf("%s %q: %v", c.Names.Say("DB"), c.DB, err), Err: err})
	} else if err != nil {
		return step(StepLedger, err)
	}
	s.closers = append(s.closers, func() { s.st.Close() })
	if s.h, err = s.handler(ctx); err != nil {
		return step(StepSQL, err)
	}
	// After the schema, which a standby has only from a snapshot: the
	// take-over snapshots the ledger with its tables.
	if c.afterOpen != nil {
		stop, err := c.afterOpen(ctx, s.st)
		if err != nil {
			return step(StepLedger, err)
		}
		s.closers = append(s.closers, stop) // before the store closes
	}
	if err := s.ensureStream(ctx); err != nil {
		return err
	}
	c.Consumer.Handler = s.h.Handle
	return nil
}

// writerBackoff spaces the tries of a start that meets the ledger's writer
// held by another process (each try waits the busy timeout first).
var writerBackoff = ackwait.Backoff{Base: time.Second, Max: 15 * time.Second}

// handler runs the schema and checks the SQL on the ledger. Another
// process holding the ledger's writer (a run paused mid-batch beside this
// one) is waited for, logged once, as a cluster electing a leader is: it
// is the ledger's state, not bad SQL, and a start that gave up would leave
// the supervisor a crash loop.
func (s *Service) handler(ctx context.Context) (*sqlhandler.Handler, error) {
	cfg := s.cfg.SQL
	cfg.Effect = s.fx.effect
	cfg.Logger = s.log
	for try := 1; ; try++ {
		h, err := sqlhandler.New(ctx, s.st, cfg)
		if ctx.Err() != nil {
			return nil, ctx.Err() // stopped while waiting: a clean stop
		}
		if err == nil || !errors.Is(err, ledger.ErrBusy) {
			return h, err
		}
		if try == 1 {
			s.log.WarnContext(ctx, "another process holds the ledger's writer: waiting for it before running "+s.cfg.Names.Say("SQL.Schema")+" and checking "+s.cfg.Names.Say("SQL.Apply"),
				"db", s.cfg.DB, "err", err)
		}
		if !writerBackoff.Wait(ctx, try) {
			return nil, ctx.Err()
		}
	}
}

// ensureStream creates the stream if it is missing, takes the consumer's
// partition of a partitioned one, and warns when its duplicate window is
// shorter than a publisher retries, and when it has no limits, so that the
// ledger can never be pruned.
func (s *Service) ensureStream(ctx context.Context) error {
	c := &s.cfg
	var err error
	if c.Hub != nil {
		s.info, err = stream.EnsureSourced(ctx, s.js, stream.Sourced{Stream: c.Stream, Hub: c.Hub.Stream, Filter: c.Hub.Filter,
			Domain: c.Hub.Domain, Start: c.Hub.Start, Site: c.site(), Ledger: s.st, Names: say.Under(c.Names.Settings, "Hub")})
	} else if s.info, err = stream.Ensure(ctx, s.js, c.Stream); errors.Is(err, stream.ErrNotFound) {
		err = c.noStream(err)
	}
	if err != nil {
		return step(StepStream, err)
	}
	if err := s.partitionShare(s.info.Config); err != nil {
		return step(StepStream, err)
	}
	if err := c.checkPublishers(s.info.Config); err != nil {
		return step(StepStream, err)
	}
	stream.WarnUnlimited(ctx, s.info.Config, s.log)
	if err := (publisher.Config{}).CheckDuplicateWindow(s.info.Config.Duplicates); err != nil {
		s.log.WarnContext(ctx, "stream duplicate window is short", "err", err)
	}
	if w := s.info.Config.Duplicates; c.Node.MemoryLimit > 0 && c.NATS == nil && w > node.LimitedDuplicateWindow {
		// The id map grows with rate × window, which no cache limit bounds.
		s.log.WarnContext(ctx, "the embedded server keeps every message id of the stream's duplicate window (about 100 B each), which "+c.Names.Say("Node.MemoryLimit")+" does not bound; shorten the window (nats stream edit --dupe-window 30s) if the limit is exceeded",
			"stream", c.Stream.Name, "duplicate_window", w, "memory_limit", c.Node.MemoryLimit)
	}
	return nil
}

// site is the edge's name, its JetStream domain; "" off an edge.
func (c *Config) site() string {
	if c.NATS != nil || c.Node.Leaf == nil {
		return ""
	}
	return c.Node.Leaf.Domain
}

// checkPublishers refuses a stream its publishers could destroy: one
// that allows rollups, where a publish with Nats-Rollup: all purges it.
func (c *Config) checkPublishers(sc jetstream.StreamConfig) error {
	if len(c.Node.Publishers.Tokens) == 0 || c.NATS != nil || !sc.AllowRollup {
		return nil
	}
	return refusef("stream %s allows rollups: one publish with Nats-Rollup: all from a holder of %s would purge it; turn them off (nats stream edit %s --no-allow-rollup)",
		sc.Name, c.Names.Say("Node.Publishers.Tokens"), sc.Name)
}

// partitionShare makes sure a ledger gets one partition of a partitioned
// stream, never all of them: a consumer without a partition's filter is
// given it when its durable is a partition's (<durable>-p<I>, as replay of
// a partition's ledger reads it), and refused otherwise.
func (s *Service) partitionShare(cfg jetstream.StreamConfig) error {
	c := &s.cfg.Consumer
	n := partition.Count(cfg)
	if n == 0 || len(c.FilterSubjects) > 0 {
		return nil
	}
	if i, ok := partition.OfDurable(c.Durable, n); ok {
		c.FilterSubjects = []string{partition.Filter(i)}
		return nil
	}
	return &PartitionedError{Stream: cfg.Name, Partitions: n, Durable: c.Durable}
}

// Close releases what Start started, last first.
func (s *Service) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}

// Store is the ledger.
func (s *Service) Store() *ledger.Store { return s.st }

// JetStream is the connection's JetStream.
func (s *Service) JetStream() jetstream.JetStream { return s.js }

// Stream is the stream as Start found or created it.
func (s *Service) Stream() *jetstream.StreamInfo { return s.info }

// effects is what the SQL handler adds once the sink is known: the payload
// enqueued to the sink's outbox, or, in a replay, the replay's decision.
type effects struct {
	sink   string          // non-empty: enqueue the payload to this outbox sink
	replay *replay.Effects // set: decides a replayed message's effect, settles its dead letter
}

// effect is a ledger.Handler run in the message's savepoint: the outbox row
// exists if and only if the message is applied.
func (e *effects) effect(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
	if e.replay != nil {
		return e.replay.Record(ctx, tx, d, e.sink)
	}
	if e.sink != "" {
		_, err := tx.Enqueue(ctx, e.sink, d.Data)
		return err
	}
	return nil
}
