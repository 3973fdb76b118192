package service

import (
	"cmp"
	"context"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/internal/say"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/natsconn"
	"github.com/jetledger/jetledger/node"
	"github.com/jetledger/jetledger/sqlhandler"
	"github.com/jetledger/jetledger/stream"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// Config is one consumer with everything around it: what `jetledger run`
// starts. The zero value with DB and Stream.Name set consumes an existing
// stream EVENTS-like through an embedded node beside the database, with the
// built-in SQL handler recording each message in the events table.
type Config struct {
	// DB is the ledger's SQLite file, created if missing. Required.
	DB string
	// Ledger configures the ledger's open. Logger defaults to Logger;
	// Sinks is set from Sink (an effect enqueued for another sink fails).
	Ledger ledger.Config
	// NATS is the server to consume from. Default nil: an embedded node is
	// started from Node.
	NATS *natsconn.Config
	// Node is the embedded node, without NATS. StoreDir defaults to DB +
	// ".nats", Logger to Logger. Its MemoryLimit is applied with NATS too
	// (node.ApplyMemoryLimit) and bounds the stream's duplicate window
	// warning. Leaf makes it an edge: see Hub.
	Node node.Config
	// Shared is an embedded node started by the caller that NATS connects
	// to (RunPartitions): /healthz probes its store; the caller watches it.
	// Default nil.
	Shared *node.Node
	// Dial connects to the server: NATS, or the embedded node's URL and
	// token. Default natsconn.Connect.
	Dial func(ctx context.Context, cfg natsconn.Config) (*nats.Conn, jetstream.JetStream, error)
	// Stream is the stream consumed, created if missing when it has
	// Subjects (stream.Ensure). Name is required. Duplicates defaults to
	// node.DuplicateWindow's under Node.MemoryLimit.
	Stream stream.Config
	// Hub, when set, creates Stream as a copy sourcing the hub's stream
	// (stream.EnsureSourced): an edge. It needs Node.Leaf and no NATS.
	// Default nil.
	Hub *Hub
	// Consumer is the consumer's config. Stream defaults to Stream.Name,
	// Logger to Logger; Handler must be nil: it is the SQL handler.
	Consumer consumer.Config
	// SQL is the built-in handler (sqlhandler), checked on a scratch copy
	// of the ledger's schema before anything starts.
	SQL sqlhandler.Config
	// SchemaFile, when set, is read as SQL.Schema (SQL.SchemaName defaults
	// to it) before anything starts. Default "": SQL.Schema as given.
	SchemaFile string
	// Sink receives each applied message's payload through the outbox.
	// Default nil: none, unless Webhook or Effects.
	Sink outbox.Sink
	// Webhook, when set, is the Sink: a webhook sink (webhook.New), its
	// refusals naming its fields under "Webhook" in Names. Without URL it
	// may not have DeleteURL or LookupURL: a run deletes what it sent.
	// Default nil.
	Webhook *webhook.Config
	// Effects sends the payloads to a JetStream subject instead: the NATS
	// sink. Default nil.
	Effects *Effects
	// Outbox configures the dispatcher of Sink or Effects.
	Outbox Outbox
	// Prune prunes the ledger while running.
	Prune Prune
	// Owner, when set, keeps the ledger on more than one host (package
	// changelog): the run holds the partition's lease, publishes every
	// transaction's changes to its changelog before it commits, and
	// snapshots the ledger; or, with Owner.Standby and another owner,
	// keeps a copy and takes over when the owner is lost. Needs NATS.
	// Default nil: the ledger of one host, which pays nothing for this.
	Owner *Owner
	// Metrics, when set, serves Prometheus /metrics and /healthz on it
	// until Run returns. Default nil: none, unless MetricsAddr.
	Metrics net.Listener
	// MetricsAddr is the host:port Metrics listens on (port 0: a free
	// one); with Metrics nil, Start listens there. Default "": none.
	MetricsAddr string
	// MetricsCert and MetricsKey, when set, serve Metrics with TLS: the
	// certificate and key files (PEM), both or neither. Default: plain
	// HTTP.
	MetricsCert, MetricsKey string
	// SummaryInterval is how often Run logs the counts at info. Default 0:
	// never.
	SummaryInterval time.Duration
	// StartAttrs are added to the "consuming" line Run logs at start.
	StartAttrs []any
	// Names are what the refusals and the log call the settings, and the
	// program its warnings name. Default: the settings' paths from Config.
	Names Names
	// Explicit says the caller sets Consumer.Plan's fields (but
	// PerMessage), Consumer.MaxDeliver, Partitions.Key and Effects.Timeout
	// itself, as a command line whose flags have defaults does: a zero
	// among them is refused, not taken as the default. Default false.
	Explicit bool
	// afterOpen runs once the ledger is open, before anything writes it
	// (runOwned: the take-over of the changelog); what it started is
	// stopped with stop, before the ledger closes.
	afterOpen func(ctx context.Context, st *ledger.Store) (stop func(), err error)
	// metricsTo, when set, is given the /metrics and /healthz handler to
	// serve on Metrics while Run runs (nil when it stops), and collectors
	// are added to its registry: an owned run serves Metrics across its
	// standby and owner phases (ownedMetrics).
	metricsTo  func(http.Handler)
	collectors []prometheus.Collector
	// leaseHeld: the caller holds the partition's lease (runOwned,
	// runLeased), so Run does not take it again.
	leaseHeld bool
	// ledgerLocked: the run of the partitions holds DB's lock already.
	ledgerLocked bool
	// retainLease, when set, is called when the run ends because it lost
	// its partition (its log gone, or refused), before its lease is let
	// go (runOwner).
	retainLease func()
	// Logger receives every record. Default slog.Default().
	Logger *slog.Logger
}

// Names say the Config's settings in the caller's words, so that every
// refusal and warning names what its user sets: a command line gives its
// flags ("Consumer.Plan.Deadline": "--deadline") where a Go program reads
// its Config's fields.
type Names struct {
	// Settings maps a setting's path from Config, as Go writes it
	// ("Stream.Limits.MaxAge"), to the caller's name for it. A path not in
	// it is said as itself.
	Settings map[string]string
	// Program is what is started again after the store fails, and what
	// consumes a partitioned stream in the advice on one. Default "the
	// program".
	Program string
}

// Say is what the caller calls the setting at path.
func (n Names) Say(path string) string { return say.Name(n.Settings, path) }

// withDefaults is n with each zero field its default.
func (n Names) withDefaults() Names {
	n.Program = cmp.Or(n.Program, "the program")
	return n
}

// Hub is the hub's stream an edge's Stream sources (stream.Sourced).
type Hub struct {
	Stream string // the hub's stream. Required.
	Filter string // only its messages on this subject. Default: all.
	Domain string // the hub's JetStream domain. Default: this one.
	Start  uint64 // the hub's sequence to copy from when no floor is recorded. Default 0: none.
	// Report is how often the site's status record goes to the hub's
	// bucket while the link is up (fleet.Reporter). Default
	// fleet.ReportIntervalDefault.
	Report time.Duration
}

// Effects is the outbox's NATS sink (natssink).
type Effects struct {
	// Subject the payloads are published to, one without wildcards. Required.
	Subject string
	// Stream is created for Subject when no stream captures it
	// (stream.EnsureEffects). Default "": one must exist (ErrNoEffectsStream).
	Stream string
	// Timeout of one publish's acknowledgement. Default 0: natssink's.
	Timeout time.Duration
}

// Outbox configures the dispatcher (outbox.Config).
type Outbox struct {
	Workers     int // concurrent sends. Default outbox.WorkersDefault.
	MaxAttempts int // sends of a row that provably did not arrive. Default outbox.MaxAttemptsDefault.
	// Backoff spaces the retries of a row. Default 1s doubling to 1m.
	Backoff ackwait.Backoff
}

// Prune is the pruner Run starts (prune.Pruner).
type Prune struct {
	// Interval between prunes. Default 0: never.
	Interval time.Duration
	// Retention is the least time since a pruned id was last seen; it must
	// cover the stream's duplicate window (prune.RetentionError). Required with
	// Interval.
	Retention time.Duration
	// OutboxRetention is the least age of a pruned sent or cancelled outbox
	// row. Default 0: ledger.OutboxRetentionDefault.
	OutboxRetention time.Duration
}

// withDefaults is c with its defaults filled in, or an ErrInvalidConfig.
func (c Config) withDefaults() (Config, error) {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Ledger.Logger == nil {
		c.Ledger.Logger = c.Logger
	}
	if c.Node.Logger == nil {
		c.Node.Logger = c.Logger
	}
	if c.Node.StoreDir == "" {
		c.Node.StoreDir = c.DB + ".nats"
	}
	if p := &c.Node.Publishers; len(p.Tokens) > 0 {
		// Publishers publish to the stream consumed (node.PublishRole).
		if p.Stream == "" {
			p.Stream = c.Stream.Name
		}
		if len(p.Subjects) == 0 {
			p.Subjects = c.Stream.Subjects
		}
	}
	if c.Dial == nil {
		c.Dial = natsconn.Connect
	}
	if c.Consumer.Stream == "" {
		c.Consumer.Stream = c.Stream.Name
	}
	if c.Consumer.Logger == nil {
		c.Consumer.Logger = c.Logger
	}
	if c.Stream.Logger == nil {
		c.Stream.Logger = c.Logger
	}
	if c.Stream.Duplicates == 0 {
		// Short under a memory limit: the embedded server keeps every id of it.
		c.Stream.Duplicates = node.DuplicateWindow(0, c.Node.MemoryLimit)
	}
	// The libraries below say their refusals in the caller's words too,
	// the node and its leaf as checkEdge does.
	if c.Stream.Names == nil {
		c.Stream.Names = say.Under(c.Names.Settings, "Stream")
	}
	if c.SQL.Names == nil {
		c.SQL.Names = say.Under(c.Names.Settings, "SQL")
	}
	if c.Consumer.Names == nil {
		c.Consumer.Names = say.Under(c.Names.Settings, "Consumer")
	}
	c.Node.Names = namesOr(say.Under(c.Names.Settings, "Node"), c.Node.Names)
	if l := c.Node.Leaf; l != nil {
		leaf := *l // the caller's stays as given
		leaf.Names = namesOr(say.Under(c.Names.Settings, "Node.Leaf"), l.Names)
		c.Node.Leaf = &leaf
	}
	c.Names = c.Names.withDefaults()
	return c, c.validate()
}

// Validate refuses, before any I/O, a Config that Start or Run would
// refuse: a *ConfigError, naming the setting as Names says.
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

// validate refuses a Config before any I/O, across fields too: the
// embedded node, the edge and the NATS sink first (checkEdge), then the
// consumer's settings (checkRun), in the order a command line's flags are
// checked.
func (c Config) validate() error {
	if err := c.checkEdge(); err != nil {
		return err
	}
	if err := c.checkRun(); err != nil {
		return err
	}
	var why string
	switch {
	case c.Consumer.Stream != c.Stream.Name:
		why = "Consumer.Stream is another stream than Stream.Name"
	case c.Consumer.Handler != nil:
		why = "Consumer.Handler is the SQL handler's: leave it nil"
	case c.Outbox.Workers < 0 || c.Outbox.MaxAttempts < 0:
		why = "Outbox.Workers and Outbox.MaxAttempts must not be negative"
	case c.Owner != nil && c.NATS == nil:
		why = c.Names.Say("Owner") + " keeps the ledger on other hosts through a JetStream cluster: it needs " + c.Names.Say("NATS")
	}
	if why != "" {
		return &ConfigError{Reason: why}
	}
	return nil
}

// servedNames are names with what a stream found to be another instance
// than the one the ledger served names (stream.NotTheInstanceError):
// the server read and the program that records it. Without Settings,
// the Go API's advice: nil when names is nil too.
func (c Config) servedNames(names map[string]string) map[string]string {
	if len(c.Names.Settings) == 0 {
		return names
	}
	if names == nil {
		names = map[string]string{}
	}
	names["NATS"], names["Run"] = c.Names.Say("NATS.URL"), c.Names.Program
	return names
}
