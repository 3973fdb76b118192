// Command jetledger consumes NATS JetStream with exactly-once effects: each
// message id is recorded in a SQLite ledger in the same transaction as its
// local change, and acked only after that commit. See README.md.
//
// The command line is parsed by github.com/alecthomas/kong. From the struct
// tags of one type per command it gives what a host run by systemd or an
// image needs without hand-written parsing: per-command help, "did you mean"
// on unknown flags and commands, JETLEDGER_* environment variables
// (kong.DefaultEnvars) and a config file (configFlag); internal/kongx adds
// strict values, the config file's resolver, completion, the reference and
// Main, which maps each outcome to an exit code.
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

// Exit codes, as documented in --help and README.md (kongx.Main's).
const (
	exitOK      = kongx.ExitOK
	exitFailure = kongx.ExitFailure // runtime failure
	exitUsage   = kongx.ExitUsage   // bad flags, arguments or input format
	// exitAttention: status found something that needs a person.
	exitAttention = kongx.ExitAttention
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

// program is the command line for kongx.Main: a usageError is exit 2.
var program = kongx.Program{Name: "jetledger",
	Parser: func(stdout, stderr io.Writer) (*kong.Kong, error) { return newParser(&cli{}, stdout, stderr) },
	Usage:  func(err error) bool { return errors.As(err, new(usageError)) }}

// mainExit parses args, runs the command and maps its outcome to an exit
// code: 0 ok, 1 runtime failure, 2 bad usage.
func mainExit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return program.Main(args, stdout, stderr, &invocation{ctx: ctx, stdout: stdout, stderr: stderr})
}

// usageError marks an error as the caller's: exit code 2.
type usageError struct{ error }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

func (e usageError) Unwrap() error { return e.error }
