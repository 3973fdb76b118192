package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/ledger"
	"github.com/lmittmann/tint"
	"github.com/mattn/go-isatty"
	"github.com/nats-io/nats.go/jetstream"
)

// The flag groups that several commands share, each declared once and
// embedded where it is used.

// dbFlag is --db, the ledger file.
type dbFlag struct {
	DB string `name:"db" default:"jetledger.db" placeholder:"FILE" help:"SQLite ledger file (run creates it with mode 0600)"`
}

// validate refuses a path the ledger cannot open, before anything is done.
func (f dbFlag) validate() error {
	if f.DB == "" {
		return usagef("--db needs a file path")
	}
	// ledger.Open refuses these too, but only once a server may be running.
	if strings.ContainsAny(f.DB, "?#") {
		return usagef("--db %q: the path of a database file may not contain '?' or '#'", f.DB)
	}
	return nil
}

// openExisting opens a ledger that must already exist: inspecting commands
// never create an empty database by mistake.
func (f dbFlag) openExisting() (*ledger.Store, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(f.DB); err != nil {
		return nil, fmt.Errorf("ledger %s: %w (give the database with --db)", f.DB, err)
	}
	return f.open(ledger.Config{})
}

// open opens the ledger; a path it refuses is the flag's usage error.
func (f dbFlag) open(cfg ledger.Config) (*ledger.Store, error) {
	if w := weakenedSynchronous(); w != "" {
		cfg.Synchronous = w
	}
	if now := faultClock(); now != nil && cfg.Now == nil {
		cfg.Now = now
	}
	st, err := ledger.Open(f.DB, cfg)
	if errors.Is(err, ledger.ErrInvalidConfig) {
		return nil, usagef("--db %q: %w", f.DB, err)
	}
	return st, err
}

// withStore runs f with the ledger, which must exist.
func (f dbFlag) withStore(fn func(*ledger.Store) error) error {
	st, err := f.openExisting()
	if err != nil {
		return err
	}
	defer st.Close()
	return fn(st)
}

// jsonFlag is --json, on every listing.
type jsonFlag struct {
	JSON bool `name:"json" help:"print JSON"`
}

// limitFlag bounds a listing.
type limitFlag struct {
	Limit int `name:"limit" default:"100" help:"most rows to list (0: all)"`
}

func (f limitFlag) validate() error {
	if f.Limit < 0 {
		return usagef("--limit %d: want 0 (all) or more", f.Limit)
	}
	return nil
}

// streamDefault is the stream of a command told none, whose ledger names
// none either.
const streamDefault = "EVENTS"

// streamFlags name the stream and run's durable consumer on it. A name left
// out is the one run recorded in the ledger (resolve), else the default.
// The flags have no default of their own, so that one given, even as
// EVENTS, is told apart from one left out: what is given always wins.
type streamFlags struct {
	Stream  string `name:"stream" placeholder:"NAME" help:"stream (default: the one run recorded in the ledger, or EVENTS)"`
	Durable string `name:"durable" placeholder:"NAME" help:"${durable_help} (default: the one run recorded with the stream, or ${durable_default})"`

	defaulted struct{ stream, durable bool } // filled in by validate, so resolve may replace them
	from      namesFrom
	read      bool // resolve read the ledger
	recorded  int  // pairs the ledger records
}

// namesFrom is where the stream and durable a command uses came from.
type namesFrom string

const (
	fromGiven   namesFrom = "given"   // the command line, environment or config file
	fromLedger  namesFrom = "ledger"  // the pair run recorded in the ledger
	fromDefault namesFrom = "default" // EVENTS and the default durable
)

// validate checks the names given and fills in the defaults for those left
// out; where a ledger can name them, resolve replaces the defaults next.
func (f *streamFlags) validate() error {
	if f.from == "" {
		f.from = fromGiven
		if f.Stream == "" {
			f.Stream, f.defaulted.stream, f.from = streamDefault, true, fromDefault
		}
		if f.Durable == "" {
			f.Durable, f.defaulted.durable = consumer.DurableDefault, true
		}
	}
	if err := checkName("--stream", f.Stream); err != nil {
		return err
	}
	return checkName("--durable", f.Durable)
}

// resolve replaces the names validate defaulted with the pair run recorded
// in st that matches the names given. Several such pairs are a usage error
// naming them: which one is meant is the user's to say.
func (f *streamFlags) resolve(ctx context.Context, st *ledger.Store) error {
	if !f.defaulted.stream && !f.defaulted.durable {
		return nil
	}
	all, err := st.Consumers(ctx)
	if err != nil {
		return err
	}
	f.read, f.recorded = true, len(all)
	var match []ledger.Consumer
	for _, c := range all {
		if (f.defaulted.stream || c.Stream == f.Stream) && (f.defaulted.durable || c.Durable == f.Durable) {
			match = append(match, c)
		}
	}
	switch {
	case len(match) == 1:
		f.Stream, f.Durable, f.from = match[0].Stream, match[0].Durable, fromLedger
		return nil
	case len(match) > 1:
		return f.ambiguous(st.Path(), match)
	case f.defaulted.stream && len(all) > 0:
		// A new durable given alone: its stream is the one this ledger
		// serves, never the default, which would apply another stream's
		// messages into it.
		streams := map[string]bool{}
		for _, c := range all {
			streams[c.Stream] = true
		}
		if len(streams) > 1 {
			return f.ambiguous(st.Path(), all)
		}
		f.Stream, f.from = all[0].Stream, fromLedger
	}
	return nil
}

// ambiguous is the usage error of several recorded pairs that fit.
func (f *streamFlags) ambiguous(db string, match []ledger.Consumer) error {
	streams := map[string]bool{}
	pairs := make([]string, len(match))
	for i, c := range match {
		streams[c.Stream] = true
		pairs[i] = fmt.Sprintf("stream %s (durable %s)", c.Stream, c.Durable)
	}
	if len(streams) == 1 {
		return usagef("--durable not given and %s records %d durables that run served on stream %s: %s; give --durable to say which",
			db, len(match), match[0].Stream, strings.Join(pairs, ", "))
	}
	flags := "--stream"
	if len(streams) < len(match) {
		flags = "--stream and --durable"
	}
	return usagef("--stream not given and %s records %d consumers that run served: %s; give %s to say which",
		db, len(match), strings.Join(pairs, ", "), flags)
}

// resolveFrom is resolve for run and replay, whose ledger may not exist
// yet: a new one names nothing, and is not created here.
func (f *streamFlags) resolveFrom(ctx context.Context, db dbFlag) error {
	if !f.defaulted.stream && !f.defaulted.durable {
		return nil
	}
	if _, err := os.Stat(db.DB); errors.Is(err, fs.ErrNotExist) {
		f.read = true // a ledger yet to be made records nothing
		return nil
	}
	st, err := db.open(ledger.Config{Logger: quiet})
	if err != nil {
		return err
	}
	defer st.Close()
	return f.resolve(ctx, st)
}

// origin says where the names came from, for output and for an error about
// a stream or durable not found; "" when they were given.
func (f *streamFlags) origin(db string) string {
	switch f.from {
	case fromLedger:
		return fmt.Sprintf("as run recorded them in %s", db)
	case fromDefault:
		switch {
		case !f.read:
			return "the defaults: --stream not given"
		case f.recorded > 0:
			return fmt.Sprintf("the defaults: --stream not given, and no consumer run recorded in %s has durable %s", db, f.Durable)
		}
		return fmt.Sprintf("the defaults: --stream not given, and %s records no stream; 'jetledger run' records the one it consumes", db)
	}
	return ""
}

// explain adds to err, a stream or durable not found, where the names came
// from when they were not given.
func (f *streamFlags) explain(err error, db string) error {
	o := f.origin(db)
	if o == "" || !(errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrConsumerNotFound)) {
		return err
	}
	return fmt.Errorf("%w (%s)", err, o)
}

// retentionFlags say how long pruned rows are kept at least.
type retentionFlags struct {
	Retention       time.Duration `name:"retention" default:"${retention}" help:"keep processed_messages rows at least this long; older rows of messages gone from the stream are pruned"`
	OutboxRetention time.Duration `name:"outbox-retention" default:"${outbox_retention}" help:"keep sent and cancelled outbox rows at least this long"`
}

func (f retentionFlags) validate() error {
	return checkDurations(durationFlag{"--retention", f.Retention}, durationFlag{"--outbox-retention", f.OutboxRetention})
}

// planFlags are the timing flags of run, replay, check and status: each
// must derive the same plan from the same flags.
type planFlags struct {
	Deadline     time.Duration `name:"deadline" default:"${deadline}" help:"processing deadline of one batch; a handler still running then is rolled back"`
	Batch        int           `name:"batch" default:"${batch}" help:"most messages fetched and committed in one transaction"`
	BufferWait   time.Duration `name:"buffer-wait" default:"${buffer_wait}" help:"longest a fetched message may wait before its batch starts"`
	CommitMargin time.Duration `name:"commit-margin" default:"${commit_margin}" help:"time allowed for the commit's fsync"`
	AckMargin    time.Duration `name:"ack-margin" default:"${ack_margin}" help:"time allowed for the ack to reach the server"`
}

// plan checks each timing flag, naming it, and returns the plan they make.
func (p planFlags) plan() (ackwait.Plan, error) {
	for _, d := range []durationFlag{{"--deadline", p.Deadline}, {"--buffer-wait", p.BufferWait},
		{"--commit-margin", p.CommitMargin}, {"--ack-margin", p.AckMargin}} {
		if d.v <= 0 || d.v > ackwait.MaxDuration {
			return ackwait.Plan{}, usagef("%s %s: want more than 0 and at most %s", d.name, d.v, ackwait.MaxDuration)
		}
	}
	if p.Batch < 1 || p.Batch > ackwait.MaxBatchSize {
		return ackwait.Plan{}, usagef("--batch %d: want 1 to %d", p.Batch, ackwait.MaxBatchSize)
	}
	plan := ackwait.Plan{Deadline: p.Deadline, BatchSize: p.Batch, BufferWait: p.BufferWait,
		CommitMargin: p.CommitMargin, AckMargin: p.AckMargin}
	if err := plan.Check(); err != nil {
		return ackwait.Plan{}, usageError{err}
	}
	return plan, nil
}

// logFlags are the logging flags of the commands that log.
type logFlags struct {
	Level  string `name:"log-level" default:"info" values:"debug,info,warn,error" help:"log level: debug, info, warn or error"`
	Format string `name:"log-format" default:"auto" values:"auto,text,json" help:"log format: auto (colour text on a terminal, JSON otherwise), text or json"`
}

// durationString writes a duration in a JSON log as people read it ("19.1s"),
// not as slog's nanoseconds.
func durationString(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// logger builds the process's logger: only main picks a handler.
func (l logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.Level)); err != nil {
		return nil, usagef("--log-level %q: want debug, info, warn or error", l.Level)
	}
	format := l.Format
	if format == "auto" {
		format = "json"
		if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
			format = "tint"
		}
	}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: durationString})), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})), nil
	case "tint":
		return slog.New(tint.NewTextHandler(w, &tint.Options{Level: level, TimeFormat: time.TimeOnly})), nil
	}
	return nil, usagef("--log-format %q: want auto, text or json", l.Format)
}

// quiet is the logger of commands that tell their own story.
var quiet = slog.New(slog.DiscardHandler)

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
