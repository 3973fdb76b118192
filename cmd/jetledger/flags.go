package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/service"
	"github.com/lmittmann/tint"
	"github.com/mattn/go-isatty"
)

// The flag groups that several commands share, each declared once and
// embedded where it is used.

// dbFlag is --db, the ledger file.
type dbFlag struct {
	DB string `name:"db" default:"jetledger.db" placeholder:"FILE" help:"SQLite ledger file (run creates it with mode 0600)"`
}

// validate refuses a path the ledger cannot open, before anything is done
// (ledger.CheckPath).
func (f dbFlag) validate() error { return configUsage(ledger.CheckPath(f.DB, "--db")) }

// openExisting opens a ledger that must already exist
// (ledger.OpenExisting): inspecting commands never create one.
func (f dbFlag) openExisting() (*ledger.Store, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	st, err := ledger.OpenExisting(f.DB, ledgerConfig(ledger.Config{}))
	return st, dbHint(err)
}

// dbHint is err, with the flag to give when it is a ledger not found.
func dbHint(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w (give the database with --db)", err)
	}
	return err
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

// limitFlag bounds a listing (ledger.Listing.Limit, checked by listRows).
type limitFlag struct {
	Limit int `name:"limit" default:"100" help:"most rows to list (0: all)"`
}

// retentionFlags say how long pruned rows are kept at least.
type retentionFlags struct {
	Retention       time.Duration `name:"retention" default:"${retention}" help:"keep processed_messages rows at least this long (0: the default); older rows of messages gone from the stream are pruned"`
	OutboxRetention time.Duration `name:"outbox-retention" default:"${outbox_retention}" help:"keep sent and cancelled outbox rows at least this long"`
}

// validate refuses what the service would (service.CheckPrune).
func (f retentionFlags) validate() error {
	return configUsage(service.CheckPrune(service.Prune{Retention: f.Retention, OutboxRetention: f.OutboxRetention}, runNames))
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

// ackwait is the plan the flags make.
func (p planFlags) ackwait() ackwait.Plan {
	return ackwait.Plan{Deadline: p.Deadline, BatchSize: p.Batch, BufferWait: p.BufferWait, CommitMargin: p.CommitMargin, AckMargin: p.AckMargin}
}

// plan checks the timing flags (service.CheckPlan), naming the first bad
// one, and returns the plan they make.
func (p planFlags) plan() (ackwait.Plan, error) {
	if err := service.CheckPlan(p.ackwait(), true, runNames); err != nil {
		return ackwait.Plan{}, configUsage(err)
	}
	return p.ackwait(), nil
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
