// Command jetledger consumes NATS JetStream with exactly-once effects: each
// message id is recorded in a SQLite ledger in the same transaction as its
// local change, and acked only after that commit. See README.md.
//
// The command line is parsed by github.com/alecthomas/kong. From the struct
// tags of one type per command it gives what a host run by systemd or an
// image needs without hand-written parsing: per-command help, "did you mean"
// on unknown flags and commands, JETLEDGER_* environment variables
// (kong.DefaultEnvars) and a config file (kong.Configuration with
// kong.ConfigFlag, read by tomlConfig), with no dependency beyond itself.
// Flag groups shared by several commands are embedded structs, declared once.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/alecthomas/kong"
	"github.com/jetledger/jetledger/ackwait"
)

// Exit codes, as documented in --help and README.md.
const (
	exitOK      = 0
	exitFailure = 1 // runtime failure
	exitUsage   = 2 // bad flags, arguments or input format
)

func main() {
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
	parser, err := newParser(&cli{}, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "jetledger: %v\n", err)
		return exitFailure
	}
	if len(args) == 0 {
		kctx, err := kong.Trace(parser, nil)
		if err == nil {
			err = kctx.PrintUsage(false)
		}
		if err != nil {
			fmt.Fprintf(stderr, "jetledger: %v\n", err)
		}
		return exitUsage
	}
	kctx, err := parser.Parse(args)
	if err != nil {
		parser.Errorf("%v", err)
		return exitUsage
	}
	err = kctx.Run(&invocation{ctx: ctx, stdout: stdout, stderr: stderr})
	name := kctx.Selected().FullPath()
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, new(usageError)):
		fmt.Fprintf(stderr, "%s: %v\nRun '%s --help' for usage.\n", name, err, name)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "%s: %v%s\n", name, err, advice(err))
		return exitFailure
	}
}

// usageError marks an error as the caller's: exit code 2.
type usageError struct{ error }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

func (e usageError) Unwrap() error { return e.error }

// advice is what the command line can change about a library error, which
// names only the library's fields; empty when there is nothing to add.
func advice(err error) string {
	var short *ackwait.TooShortError
	switch {
	case errors.As(err, &short):
		return fmt.Sprintf("; with the nats CLI: nats consumer edit --wait %s; or shrink the plan: lower --deadline or --batch (or --buffer-wait, --commit-margin, --ack-margin)", short.Need)
	case errors.Is(err, ackwait.ErrMaxAckPending):
		return "; with the nats CLI: nats consumer edit --max-pending; or lower --batch"
	}
	return ""
}
