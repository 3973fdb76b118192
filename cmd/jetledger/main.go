// Command jetledger consumes NATS JetStream with exactly-once effects: each
// message id is recorded in a SQLite ledger in the same transaction as its
// local change, and acked only after that commit. See README.md.
//
// The command line is parsed by github.com/alecthomas/kong. From the struct
// tags of one type per command it gives what a host run by systemd or an
// image needs without hand-written parsing: per-command help, "did you mean"
// on unknown flags and commands, JETLEDGER_* environment variables
// (kong.DefaultEnvars) and a config file (configFlag); internal/kongx adds
// strict values, the config file's resolver, completion and the reference.
// Flag groups shared by several commands are embedded structs, declared once.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/alecthomas/kong"
	"github.com/jetledger/jetledger/internal/kongx"
)

// Exit codes, as documented in --help and README.md.
const (
	exitOK      = 0
	exitFailure = 1 // runtime failure
	exitUsage   = 2 // bad flags, arguments or input format
)

// gcPercent is the collector's target unless GOGC says otherwise: a
// consumer's heap is small and steady (about 40 MiB over a million
// messages), and collecting half as often was 5-10 % more messages/s in
// `jetledger bench`. --memory-limit still caps the heap.
const gcPercent = 200

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := mainExit(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// invocation is what every command's Run is given: the process's context
// (cancelled by SIGINT/SIGTERM) and where to write.
type invocation struct {
	ctx            context.Context
	stdout, stderr io.Writer
}

// exitRequest carries kong's exit (after --help or --version) out of Parse
// as a panic, so that mainExit returns the code instead of exiting.
type exitRequest int

// mainExit parses args, runs the command and maps its outcome to an exit
// code: 0 ok, 1 runtime failure, 2 bad usage.
func mainExit(ctx context.Context, args []string, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(exitRequest)
			if !ok {
				panic(r)
			}
			code = int(e)
		}
	}()
	if len(args) == 0 {
		return noArguments(stderr)
	}
	parser, err := newParser(&cli{}, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "jetledger: %v\n", err)
		return exitFailure
	}
	kctx, err := parser.Parse(args)
	if err != nil {
		var perr *kong.ParseError
		if errors.As(err, &perr) {
			return usage(stderr, commandName(perr.Context), err)
		}
		return usage(stderr, "jetledger", err)
	}
	name := commandName(kctx)
	if err := kongx.CheckNotEmpty(kctx); err != nil {
		return usage(stderr, name, err)
	}
	err = kctx.Run(&invocation{ctx: ctx, stdout: stdout, stderr: stderr})
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, new(usageError)):
		return usage(stderr, name, err)
	default:
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return exitFailure
	}
}

// noArguments prints the usage, asked for by mistake, where errors go.
func noArguments(stderr io.Writer) int {
	parser, err := newParser(&cli{}, stderr, stderr)
	var kctx *kong.Context
	if err == nil {
		kctx, err = kong.Trace(parser, nil)
	}
	if err == nil {
		err = kctx.PrintUsage(false)
	}
	if err != nil {
		fmt.Fprintf(stderr, "jetledger: %v\n", err)
	}
	return exitUsage
}

// commandName is "jetledger" and the command kctx selected so far.
func commandName(kctx *kong.Context) string {
	if kctx == nil || kctx.Selected() == nil {
		return "jetledger"
	}
	return kctx.Selected().FullPath()
}

// usage reports a usage error, the parser's or a command's, in one format:
// the command, the error, and where its help is. Exit 2.
func usage(stderr io.Writer, name string, err error) int {
	var missing *kongx.MissingValueError
	if errors.As(err, &missing) {
		err = missing // kong's prefix would name the flag twice
	}
	fmt.Fprintf(stderr, "%s: %v\nRun '%s --help' for usage.\n", name, err, name)
	return exitUsage
}

// usageError marks an error as the caller's: exit code 2.
type usageError struct{ error }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

func (e usageError) Unwrap() error { return e.error }
