package main

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/internal/kongx"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/natsconn"
	"github.com/jetledger/jetledger/node"
	"github.com/jetledger/jetledger/service"
	"github.com/jetledger/jetledger/sqlhandler"
	"github.com/jetledger/jetledger/stream"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// setupTimeout bounds replay's calls to the server as it starts: a one-shot
// command gives up where run waits.
const setupTimeout = 30 * time.Second

// consumeFlags are the flags of run and replay, which take the same path
// through the ledger.
type consumeFlags struct {
	dbFlag
	NATS     natsFlags     `embed:"" group:"nats" kong:"set='nats_url=',set='nats_help=NATS server URL (without it, an embedded JetStream server is started)'"`
	Embedded embeddedFlags `embed:"" group:"embedded"`
	streamFlags
	streamLimitFlags
	Subjects        string        `name:"subjects" placeholder:"LIST" help:"comma-separated subjects; creates the stream with them if it does not exist"`
	DuplicateWindow time.Duration `name:"duplicate-window" help:"duplicate window of a stream created by --subjects (default 2m; 30s with --memory-limit: the embedded server keeps about 100 B per message id for this long)"`
	MemoryLimit     byteSize      `name:"memory-limit" placeholder:"SIZE" help:"keep the process (with its embedded server) within about this much memory, such as 96MiB: sets the Go memory limit to it less 44MiB for code and SQLite (whose heap it bounds to 8MiB), and gives a stream created by --subjects a 30s duplicate window (default: no limit, or GOMEMLIMIT)"`
	MaxDeliver      int           `name:"max-deliver" default:"${max_deliver}" help:"deliveries before a failing message is dead-lettered, enforced by jetledger (-1 unlimited); consumers are created with no server-side limit"`
	DBMaxSize       byteSize      `name:"db-max-size" placeholder:"SIZE" help:"cap the database at this size, such as 512MiB or 1GB (a plain number is bytes); past it run stops, naming the cap (0: no cap)"`
	Apply           string        `name:"apply" placeholder:"SQL" help:"SQL run per message in its transaction, with :msg_id :subject :seq :data"`
	Schema          string        `name:"schema" placeholder:"FILE" help:"SQL file run at start to create your tables"`
	AllowSeqIDs     bool          `name:"allow-seq-ids" help:"give messages without Nats-Msg-Id the id <stream>@<created>/<seq> (the stream instance and the sequence) instead of dead-lettering them (cannot catch publisher retries)"`
	Plan            planFlags     `embed:"" group:"timing"`
	Webhook         webhookURL    `embed:"" group:"webhook"`
	Log             logFlags      `embed:"" group:"log"`
}

// runNames are what the service calls the settings the flags give, in
// one table: its refusals and its log name the flags (and the command),
// and so do the libraries it configures (the node, its leaf, the stream)
// with the part of the table under their path. Webhook.* are the webhook
// sink's (webhookNames), which the command line builds.
var runNames = service.Names{Program: "run", Settings: map[string]string{
	"DB": "--db", "SchemaFile": "--schema", "SQL.Schema": "--schema", "SQL.Apply": "--apply", "Ledger.MaxSizeBytes": "--db-max-size", "Prune": "jetledger ledger prune",
	"Stream.Name": "--stream", "Stream.Subjects": "--subjects", "Stream.Duplicates": "--duplicate-window", "Node.MemoryLimit": "--memory-limit",
	"Stream.Limits.MaxAge": "--max-age", "Stream.Limits.MaxBytes": "--max-bytes", "Stream.Limits.MaxMsgs": "--max-msgs", "Stream.Limits.Replicas": "--replicas",
	"Consumer.Durable": "--durable", "Consumer.MaxDeliver": "--max-deliver", "Consumer.Plan.Deadline": "--deadline", "Consumer.Plan.BatchSize": "--batch",
	"Consumer.Plan.BufferWait": "--buffer-wait", "Consumer.Plan.CommitMargin": "--commit-margin", "Consumer.Plan.AckMargin": "--ack-margin",
	"Prune.Retention": "--retention", "Prune.OutboxRetention": "--outbox-retention", "Prune.Interval": "--prune-interval",
	"SummaryInterval": "--summary-interval", "MetricsAddr": "--metrics", "MetricsCert": "--metrics-tls-cert", "MetricsKey": "--metrics-tls-key", "Partitions.Count": "--partitions", "Partitions.Key": "--partition-key", "Partitions.Named": "--partition", "Partitions.Group": "--group",
	"NATS": "a server to connect to (--nats, $NATS_URL or a named context)", "NATS.URL": "--nats", "NATS.Token": "--nats-token",
	"Owner": "--changelog", "Owner.Standby": "--standby",
	"Node.Listen": "--listen", "Node.StoreDir": "--store-dir", "Node.Token": "--embedded-token", "Node.Publishers.Tokens": "--publisher-token-file", "Node.Operators": "--operator-token-file", "Node.Viewers": "--viewer-token-file",
	"Node.Publishers.Stream": "--stream", "Node.Publishers.Subjects": "--subjects", "Node.Insecure": "--insecure-listen",
	"Node.TLS.Cert": "--listen-tls-cert", "Node.TLS.Key": "--listen-tls-key", "Node.TLS.ClientCA": "--listen-tls-client-ca", "Node.SyncInterval": "--sync-interval",
	"Node.Leaf.URLs": "--hub-url", "Node.Leaf.Domain": "--edge-domain", "Node.Leaf.HubDomain": "--hub-domain", "Node.Leaf.Credentials": "--hub-creds",
	"Node.Leaf.TLSCA": "--hub-tls-ca", "Node.Leaf.TLSCert": "--hub-tls-cert", "Node.Leaf.TLSKey": "--hub-tls-key",
	"Hub": "--hub-url", "Hub.Stream": "--hub-stream", "Hub.Filter": "--hub-filter", "Hub.Start": "--hub-start-seq", "Hub.Report": "--hub-status-interval",
	"Effects.Subject": "--effects-subject", "Effects.Stream": "--effects-stream", "Effects.Timeout": "--effects-timeout", "Sink": "--webhook",
	"Webhook.URL": "--webhook", "Webhook.DeleteURL": "--webhook-delete-url", "Webhook.LookupURL": "--webhook-lookup-url",
	"Webhook.Timeout": "--webhook-timeout", "Webhook.RetryOn": "--webhook-retry-on",
}}

// config maps the flags to the service's config, which checks them
// (check). The names left out are the defaults until resolveFrom reads
// the ledger's.
func (f *consumeFlags) config(log *slog.Logger, s sink) service.Config {
	_ = f.streamFlags.validate() // fills in the defaults; the service checks the names
	e, l := f.Embedded, f.streamLimitFlags
	cfg := service.Config{DB: f.DB, Logger: log, SchemaFile: f.Schema, SQL: sqlhandler.Config{Apply: f.Apply}, Sink: s,
		Dial: f.dial(log), StartAttrs: []any{"names_from", f.from}, Names: runNames, Explicit: true,
		Ledger: ledgerConfig(ledger.Config{MaxSizeBytes: int64(f.DBMaxSize)}),
		Node:   e.node(),
		Hub:    e.hub(),
		Stream: stream.Config{Name: f.Stream, Subjects: kongx.SplitList(f.Subjects), Duplicates: f.DuplicateWindow, Version: version(),
			Limits: stream.Limits{MaxAge: l.MaxAge, MaxBytes: int64(l.MaxBytes), MaxMsgs: l.MaxMsgs, Replicas: l.Replicas}},
		Consumer: consumer.Config{Stream: f.Stream, Durable: f.Durable, Plan: f.Plan.ackwait(), MaxDeliver: f.MaxDeliver, AllowSequenceIDs: f.AllowSeqIDs,
			Metadata: map[string]string{consumer.MetadataVersion: version()}}}
	cfg.Node.MemoryLimit, cfg.Node.Logger = node.ByteSize(f.MemoryLimit), log
	if f.NATS.URL != "" {
		n := f.NATS.config(log)
		cfg.NATS = &n
	}
	return cfg
}

// check refuses cfg, the flags' config, before anything is started
// (service.Config.Validate).
func (f *consumeFlags) check(cfg service.Config) error {
	if s := f.Embedded.SyncInterval; cfg.NATS != nil && s.set && s.interval == 0 {
		// "always" is the zero value, which the service cannot tell from
		// none given.
		return usagef("--sync-interval is for the embedded server; the server at --nats syncs as its own sync_interval says")
	}
	return configUsage(cfg.Validate())
}

// consumption is the service replay starts, as its flags say.
type consumption struct {
	*service.Service
	js jetstream.JetStream
}

// validate checks every flag, naming the first bad one, before anything
// is started (check).
func (f *consumeFlags) validate() error { return f.check(f.config(quiet, nil)) }

// setup starts what replay consumes with (service.Start), effects going
// to s (nil: none).
func (f *consumeFlags) setup(ctx context.Context, stderr io.Writer, s sink) (*consumption, error) {
	log, err := f.Log.logger(stderr)
	if err != nil {
		return nil, err
	}
	cfg := f.config(log, s)
	svc, err := service.Start(ctx, cfg)
	if err != nil {
		return nil, advise(err)
	}
	return &consumption{Service: svc, js: svc.JetStream()}, nil
}

// dial connects as the flags say (connect), or to the embedded server.
func (f *consumeFlags) dial(log *slog.Logger) func(context.Context, natsconn.Config) (*nats.Conn, jetstream.JetStream, error) {
	return func(ctx context.Context, cfg natsconn.Config) (*nats.Conn, jetstream.JetStream, error) {
		n := f.NATS
		if cfg.InProcess != nil {
			return natsconn.Connect(ctx, cfg) // the embedded node's own connection
		}
		if cfg.URL != n.URL {
			n = natsFlags{URL: cfg.URL, Token: cfg.Token}
		}
		return connect(ctx, n, log)
	}
}

// ledgerConfig is cfg as dbFlag.open gives it to ledger.Open.
func ledgerConfig(cfg ledger.Config) ledger.Config {
	if w := weakenedSynchronous(); w != "" {
		cfg.Synchronous = w
	}
	if now := faultClock(); now != nil && cfg.Now == nil {
		cfg.Now = now
	}
	return cfg
}
