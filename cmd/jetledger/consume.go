package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/node"
	"github.com/jetledger/jetledger/publisher"
	"github.com/jetledger/jetledger/sqlhandler"
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
	// Set by run to create the stream partitioned.
	transform *jetstream.SubjectTransformConfig
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

// consumption is what run and replay share once their flags are read: the
// plan, the logger, the sink, the embedded server if any, the ledger with
// the built-in handler, the connection, and the consumer's configuration.
type consumption struct {
	plan    ackwait.Plan
	log     *slog.Logger
	sink    sink // nil without --webhook
	st      *ledger.Store
	h       *sqlhandler.Handler
	fx      handlerEffects        // the sink's or replay's effects, set before consuming
	stream  *jetstream.StreamInfo // as setup found or created it
	store   *node.Node            // nil with --nats
	nc      *nats.Conn
	js      jetstream.JetStream
	cfg     consumer.Config
	closers []func()
}

// setup checks the flags, then starts what run and replay consume with,
// effects going to s (nil: none). The embedded server's store lock comes
// first: a second owner is refused before it touches anything; before it,
// --schema and --apply are checked on a scratch copy of the ledger's schema
// (checkSQLFirst), so a bad one creates nothing. The ledger is opened once
// the server answers, so that an unreachable one leaves no new database
// behind; --schema and --apply are checked on it again before the stream is
// created.
func (f *consumeFlags) setup(ctx context.Context, stderr io.Writer, s sink) (*consumption, error) {
	c := &consumption{sink: s}
	if err := f.start(ctx, c, stderr); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (f *consumeFlags) start(ctx context.Context, c *consumption, stderr io.Writer) (err error) {
	if c.plan, err = f.validate(); err != nil {
		return err
	}
	if c.log, err = f.Log.logger(stderr); err != nil {
		return err
	}
	c.log = c.log.With(f.logAttrs...)
	if err := checkSQLFirst(ctx, f.DB, f.Schema, f.Apply); err != nil {
		return err
	}
	conn := f.NATS
	if conn.URL != "" {
		_ = node.ApplyMemoryLimit(node.ByteSize(f.MemoryLimit), c.log) // checked by validate
	} else if conn, err = f.startEmbedded(ctx, c); err != nil {
		return err
	}
	if c.nc, c.js, err = connect(ctx, conn, c.log); err != nil {
		return err
	}
	c.closers = append(c.closers, c.nc.Close)
	if err := requireJetStream(ctx, c.js, conn.URL); err != nil {
		return err
	}
	if c.st, err = f.open(ledger.Config{Logger: c.log, MaxSizeBytes: int64(f.DBMaxSize), Sinks: sinkNames(c.sink)}); err != nil {
		return err
	}
	c.closers = append(c.closers, func() { c.st.Close() })
	if c.h, err = f.eventsHandler(ctx, c); err != nil {
		return err
	}
	if c.sink != nil {
		c.fx.sink = c.sink.Name()
	}
	if err := f.ensureStream(ctx, c); err != nil {
		return err
	}
	c.cfg = consumer.Config{Stream: f.Stream, Durable: f.Durable, Plan: c.plan, Handler: c.h.Handle,
		MaxDeliver: f.MaxDeliver, AllowSequenceIDs: f.AllowSeqIDs, Logger: c.log, FilterSubjects: f.filter,
		Metadata: map[string]string{consumer.MetadataVersion: version()}}
	return nil
}

// writerBackoff spaces the tries of a start that meets the ledger's writer
// held by another process (each try waits the busy timeout first).
var writerBackoff = ackwait.Backoff{Base: time.Second, Max: 15 * time.Second}

// eventsHandler runs --schema and checks --apply on the ledger. Another
// process holding the ledger's writer (a run paused mid-batch beside this
// one, README: several processes) is waited for, logged once, as a cluster
// electing a leader is: it is the ledger's state, not bad SQL, and a start
// that gave up would leave the supervisor a crash loop.
func (f *consumeFlags) eventsHandler(ctx context.Context, c *consumption) (*sqlhandler.Handler, error) {
	for try := 1; ; try++ {
		h, err := newEventsHandlerWith(ctx, c.st, f.Schema, f.Apply, c.fx.effect)
		if ctx.Err() != nil {
			return nil, ctx.Err() // stopped while waiting: a clean stop
		}
		if err == nil || !errors.Is(err, ledger.ErrBusy) {
			return h, err
		}
		if try == 1 {
			c.log.WarnContext(ctx, "another process holds the ledger's writer: waiting for it before running --schema and checking --apply", "db", f.DB, "err", err)
		}
		if !writerBackoff.Wait(ctx, try) {
			return nil, ctx.Err()
		}
	}
}

// startEmbedded starts the embedded server, its store beside the database
// unless --store-dir says otherwise, and returns how to connect to it.
func (f *consumeFlags) startEmbedded(ctx context.Context, c *consumption) (natsFlags, error) {
	e := f.Embedded
	cfg := e.config(f.DB, c.log)
	cfg.MemoryLimit = node.ByteSize(f.MemoryLimit)
	if e.Hub != "" {
		cfg.Leaf = e.leaf()
	}
	srv, err := startEmbedded(ctx, cfg)
	if err != nil {
		return natsFlags{}, err
	}
	c.closers = append(c.closers, srv.Close)
	c.store = srv
	return natsFlags{URL: srv.ClientURL(), Token: e.EmbeddedToken}, nil
}

// ensureStream creates the stream with --subjects if it is missing, and
// warns when its duplicate window is shorter than a publisher retries, and
// when it has no limits, so that the ledger can never be pruned.
func (f *consumeFlags) ensureStream(ctx context.Context, c *consumption) error {
	spec := streamSpec{Name: f.Stream, Subjects: splitList(f.Subjects),
		Duplicates: duplicateWindow(f.DuplicateWindow, f.MemoryLimit), Limits: f.streamLimitFlags, Transform: f.transform}
	ensure := ensureStream
	if f.Embedded.Hub != "" {
		ensure = func(ctx context.Context, js jetstream.JetStream, spec streamSpec, log *slog.Logger) (*jetstream.StreamInfo, error) {
			return ensureSourcedStream(ctx, js, c.st, spec, f.Embedded.hubFlags, log)
		}
	}
	info, err := ensure(ctx, c.js, spec, c.log)
	if err != nil {
		return err
	}
	c.stream = info
	if err := f.partitionShare(info.Config); err != nil {
		return err
	}
	warnUnlimited(ctx, info.Config, c.log)
	if err := (publisher.Config{}).CheckDuplicateWindow(info.Config.Duplicates); err != nil {
		c.log.WarnContext(ctx, "stream duplicate window is short", "err", err)
	}
	if w := info.Config.Duplicates; f.MemoryLimit > 0 && f.NATS.URL == "" && w > node.LimitedDuplicateWindow {
		// The id map grows with rate × window, which no cache limit bounds.
		c.log.WarnContext(ctx, "the embedded server keeps every message id of the stream's duplicate window (about 100 B each), which --memory-limit does not bound; shorten the window (nats stream edit --dupe-window 30s) if the limit is exceeded",
			"stream", f.Stream, "duplicate_window", w, "memory_limit", f.MemoryLimit)
	}
	return nil
}

// Close releases what setup started, last first.
func (c *consumption) Close() {
	for i := len(c.closers) - 1; i >= 0; i-- {
		c.closers[i]()
	}
	c.closers = nil
}
