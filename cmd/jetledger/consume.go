package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/internal/kongx"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/natsconn"
	"github.com/jetledger/jetledger/node"
	"github.com/jetledger/jetledger/service"
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
	MemoryLimit     byteSize      `name:"memory-limit" placeholder:"SIZE" help:"keep the process (with its embedded server) within about this much memory, such as 96MiB: sets the Go memory limit to it less 32MiB for code and SQLite, and gives a stream created by --subjects a 30s duplicate window (default: no limit, or GOMEMLIMIT)"`
	MaxDeliver      int           `name:"max-deliver" default:"${max_deliver}" help:"deliveries before a failing message is dead-lettered, enforced by jetledger (-1 unlimited); consumers are created with no server-side limit"`
	DBMaxSize       byteSize      `name:"db-max-size" placeholder:"SIZE" help:"cap the database at this size, such as 512MiB or 1GB (a plain number is bytes); past it run stops, naming the cap (0: no cap)"`
	Apply           string        `name:"apply" placeholder:"SQL" help:"SQL run per message in its transaction, with :msg_id :subject :seq :data"`
	Schema          string        `name:"schema" placeholder:"FILE" help:"SQL file run at start to create your tables"`
	AllowSeqIDs     bool          `name:"allow-seq-ids" help:"give messages without Nats-Msg-Id the id <stream>@<created>/<seq> (the stream instance and the sequence) instead of dead-lettering them (cannot catch publisher retries)"`
	Plan            planFlags     `embed:"" group:"timing"`
	Webhook         webhookURL    `embed:"" group:"webhook"`
	Log             logFlags      `embed:"" group:"log"`

	// Set by run for one partition of a partitioned stream.
	filter   []string // the partition's subjects
	logAttrs []any    // the partition, on every log line
}

// validate checks every flag, naming the first bad one, before anything is
// started, and returns the timing plan.
func (f *consumeFlags) validate() (ackwait.Plan, error) {
	plan, err := f.Plan.plan()
	if err == nil {
		err = firstError(f.dbFlag.validate(), f.streamFlags.validate(), checkSubjects(f.Subjects),
			checkDurations(durationFlag{"--duplicate-window", f.DuplicateWindow}), checkMemoryLimit(f.MemoryLimit),
			f.streamLimitFlags.validate(f.Subjects+f.Embedded.HubStream, duplicateWindow(f.DuplicateWindow, f.MemoryLimit)),
			f.Embedded.validate(f.NATS.URL != ""), f.Embedded.hubFlags.validate(f.NATS.URL != "", f.Subjects))
	}
	switch {
	case err != nil:
	case f.MaxDeliver == 0 || f.MaxDeliver < -1:
		err = usagef("--max-deliver %d: want a positive number or -1", f.MaxDeliver)
	case f.DBMaxSize > 0 && f.DBMaxSize < ledger.MinSizeBytes:
		err = usagef("--db-max-size %s: want at least %s (a new ledger's schema with room for its first batches), or 0 for no cap",
			f.DBMaxSize, byteSize(ledger.MinSizeBytes))
	case f.Schema != "":
		if _, serr := os.Stat(f.Schema); serr != nil {
			err = usagef("--schema: %v", serr)
		}
	}
	return plan, err
}

// consumption is the service replay starts, as its flags say.
type consumption struct {
	*service.Service
	js jetstream.JetStream
}

// setup checks the flags, then starts what run and replay consume with
// (service.Start), effects going to s (nil: none); its refusals are said
// in the flags' terms.
func (f *consumeFlags) setup(ctx context.Context, stderr io.Writer, s sink) (*consumption, error) {
	cfg, err := f.config(stderr, s)
	if err != nil {
		return nil, err
	}
	svc, err := service.Start(ctx, cfg)
	if err != nil {
		return nil, f.advise(err)
	}
	return &consumption{Service: svc, js: svc.JetStream()}, nil
}

// config checks the flags and maps them to the service's config.
func (f *consumeFlags) config(stderr io.Writer, s sink) (service.Config, error) {
	plan, err := f.validate()
	if err != nil {
		return service.Config{}, err
	}
	log, err := f.Log.logger(stderr)
	if err != nil {
		return service.Config{}, err
	}
	log = log.With(f.logAttrs...)
	sql, err := handlerConfig(f.Schema, f.Apply)
	if err != nil {
		return service.Config{}, err
	}
	cfg := service.Config{DB: f.DB, Logger: log, SQL: sql, Sink: s, Dial: f.dial(log), StartAttrs: []any{"names_from", f.from}, Names: runNames,
		Ledger: ledgerConfig(ledger.Config{Logger: log, MaxSizeBytes: int64(f.DBMaxSize)}),
		Node:   f.Embedded.config(f.DB, log),
		Stream: streamSpec{Name: f.Stream, Subjects: kongx.SplitList(f.Subjects), Duplicates: duplicateWindow(f.DuplicateWindow, f.MemoryLimit),
			Limits: f.streamLimitFlags}.config(log),
		Consumer: consumer.Config{Stream: f.Stream, Durable: f.Durable, Plan: plan, MaxDeliver: f.MaxDeliver, AllowSequenceIDs: f.AllowSeqIDs,
			Logger: log, FilterSubjects: f.filter, Metadata: map[string]string{consumer.MetadataVersion: version()}}}
	cfg.Node.MemoryLimit = node.ByteSize(f.MemoryLimit)
	if f.NATS.URL != "" {
		n := f.NATS.config(log)
		cfg.NATS = &n
	}
	if h := f.Embedded.hubFlags; h.Hub != "" {
		cfg.Node.Leaf = h.leaf()
		cfg.Hub = &service.Hub{Stream: h.HubStream, Filter: h.HubFilter, Domain: h.HubDomain, Start: h.HubStart}
	}
	return cfg, nil
}

// runNames are the flags (and the command) the service's log names.
var runNames = service.Names{Program: "run", Settings: map[string]string{"SQL.Schema": "--schema", "SQL.Apply": "--apply", "Node.MemoryLimit": "--memory-limit", "Stream.Name": "--stream"}}

// dial connects as the flags say (connect), or to the embedded server.
func (f *consumeFlags) dial(log *slog.Logger) func(context.Context, natsconn.Config) (*nats.Conn, jetstream.JetStream, error) {
	return func(ctx context.Context, cfg natsconn.Config) (*nats.Conn, jetstream.JetStream, error) {
		n := f.NATS
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
