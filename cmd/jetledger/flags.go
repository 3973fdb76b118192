package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/ledger"
	"github.com/lmittmann/tint"
	"github.com/mattn/go-isatty"
)

// The flag groups that several commands share, each declared once and
// embedded where it is used.

// dbFlag is --db, the ledger file.
type dbFlag struct {
	DB string `name:"db" default:"jetledger.db" placeholder:"FILE" help:"SQLite ledger file (run creates it with mode 0600)"`
}

// openExisting opens a ledger that must already exist: inspecting commands
// never create an empty database by mistake.
func (f dbFlag) openExisting() (*ledger.Store, error) {
	if _, err := os.Stat(f.DB); err != nil {
		return nil, fmt.Errorf("ledger %s: %w (give the database with --db)", f.DB, err)
	}
	return ledger.Open(f.DB, ledger.Config{})
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

// streamFlags name the stream and run's durable consumer on it.
type streamFlags struct {
	Stream  string `name:"stream" default:"EVENTS" help:"stream"`
	Durable string `name:"durable" default:"${durable_default}" help:"${durable_help}"`
}

// retentionFlags say how long pruned rows are kept at least.
type retentionFlags struct {
	Retention       time.Duration `name:"retention" default:"${retention}" help:"keep processed_messages rows at least this long; older rows of messages gone from the stream are pruned"`
	OutboxRetention time.Duration `name:"outbox-retention" default:"${outbox_retention}" help:"keep sent and cancelled outbox rows at least this long"`
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

func (p planFlags) plan() (ackwait.Plan, error) {
	if p.Deadline <= 0 || p.Batch <= 0 || p.BufferWait <= 0 || p.CommitMargin <= 0 || p.AckMargin <= 0 {
		return ackwait.Plan{}, usagef("--deadline, --batch, --buffer-wait, --commit-margin and --ack-margin must be positive")
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
	Level  string `name:"log-level" default:"info" help:"log level: debug, info, warn or error"`
	Format string `name:"log-format" default:"auto" help:"log format: auto (colour text on a terminal, JSON otherwise), text or json"`
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
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})), nil
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

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// listRows prints the rows fetch reads from the ledger of db as printList does.
func listRows[T any](inv *invocation, db dbFlag, asJSON bool, fetch func(*ledger.Store) ([]T, error), header string, row func(T) string) error {
	return db.withStore(func(st *ledger.Store) error {
		items, err := fetch(st)
		if err != nil {
			return err
		}
		return printList(inv.stdout, asJSON, items, header, row)
	})
}

// printList prints a listing: a JSON array with asJSON (empty, not null, when
// there are no items), otherwise a table of header and one row per item, the
// row's cells separated by tabs.
func printList[T any](w io.Writer, asJSON bool, items []T, header string, row func(T) string) error {
	if asJSON {
		if items == nil {
			items = []T{}
		}
		return printJSON(w, items)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, it := range items {
		fmt.Fprintln(tw, row(it))
	}
	return tw.Flush()
}
