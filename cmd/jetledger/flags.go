package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/lmittmann/tint"
	"github.com/mattn/go-isatty"
)

// errHelp is returned when --help was asked for; the exit code is 0.
var errHelp = errors.New("help requested")

// newFlags returns a flag set whose usage prints the command's description
// and every flag with its environment variable.
func newFlags(name, synopsis, description string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported once, by mainExit
	fs.Usage = func() {
		fmt.Fprintf(stdout, "Usage: jetledger %s\n\n%s\n\nFlags:\n", synopsis, strings.TrimSpace(description))
		fs.VisitAll(func(f *flag.Flag) {
			def := ""
			if f.DefValue != "" && f.DefValue != "false" {
				def = fmt.Sprintf(" (default %s)", f.DefValue)
			}
			fmt.Fprintf(stdout, "  --%s\n        %s%s [$%s]\n", f.Name, f.Usage, def, envName(f.Name))
		})
	}
	return fs
}

func envName(flagName string) string {
	return "JETLEDGER_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parse parses args, then fills every flag not given on the command line
// from its JETLEDGER_* environment variable.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.Usage()
			return errHelp
		}
		return usageError{err}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		if v, ok := os.LookupEnv(envName(f.Name)); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = usagef("$%s=%q: %v", envName(f.Name), v, e)
			}
		}
	})
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// logFlags are the logging flags every long-running command takes.
type logFlags struct {
	level, format string
}

func (l *logFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.level, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&l.format, "log-format", "auto", "log format: auto (colour text on a terminal, JSON otherwise), text or json")
}

// logger builds the process's logger: only main picks a handler.
func (l *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.level)); err != nil {
		return nil, usagef("--log-level %q: want debug, info, warn or error", l.level)
	}
	format := l.format
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
	return nil, usagef("--log-format %q: want auto, text or json", l.format)
}

// planFlags are the timing flags of run and check; both must derive the same plan.
type planFlags struct {
	deadline, bufferWait, commitMargin, ackMargin time.Duration
	batch                                         int
}

func (p *planFlags) register(fs *flag.FlagSet) {
	fs.DurationVar(&p.deadline, "deadline", ackwait.DeadlineDefault, "processing deadline of one batch; a handler still running then is rolled back")
	fs.IntVar(&p.batch, "batch", ackwait.BatchSizeDefault, "most messages fetched and committed in one transaction")
	fs.DurationVar(&p.bufferWait, "buffer-wait", ackwait.BufferWaitDefault, "longest a fetched message may wait before its batch starts")
	fs.DurationVar(&p.commitMargin, "commit-margin", ackwait.CommitMarginDefault, "time allowed for the commit's fsync")
	fs.DurationVar(&p.ackMargin, "ack-margin", ackwait.AckMarginDefault, "time allowed for the ack to reach the server")
}

func (p *planFlags) plan() (ackwait.Plan, error) {
	if p.deadline <= 0 || p.batch <= 0 || p.bufferWait <= 0 || p.commitMargin <= 0 || p.ackMargin <= 0 {
		return ackwait.Plan{}, usagef("--deadline, --batch, --buffer-wait, --commit-margin and --ack-margin must be positive")
	}
	plan := ackwait.Plan{Deadline: p.deadline, BatchSize: p.batch, BufferWait: p.bufferWait,
		CommitMargin: p.commitMargin, AckMargin: p.ackMargin}
	if err := plan.Check(); err != nil {
		return ackwait.Plan{}, usageError{err}
	}
	return plan, nil
}
