// Command jetledger consumes NATS JetStream with exactly-once effects: each
// message id is recorded in a SQLite ledger in the same transaction as its
// local change, and acked only after that commit. See README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// Exit codes, as documented in --help and README.md.
const (
	exitOK      = 0
	exitFailure = 1 // runtime failure
	exitUsage   = 2 // bad flags, arguments or input format
)

// command is one subcommand; run gets the arguments after its name.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	hidden  bool
}

func commands() []command {
	return []command{
		{name: "run", summary: "consume a stream through the ledger (embedded JetStream server without --nats)", run: runCmd},
		{name: "replay", summary: "replay a stream through the ledger from a sequence or time; effects suppressed", run: replayCmd},
		{name: "publish", summary: "publish JSON messages with stable Nats-Msg-Id headers", run: publishCmd},
		{name: "outbox", summary: "inspect and operate the outbox: list, review, cancel, resolve, retry", run: outboxCmd},
		{name: "ledger", summary: "inspect the ledger: stats, conflicts, prune", run: ledgerCmd},
		{name: "dlq", summary: "dead letters: list, show, requeue with the original id, discard", run: dlqCmd},
		{name: "status", summary: "one screen: stream, consumer vs plan, ledger, outbox, dead letters, conflicts", run: statusCmd},
		{name: "check", summary: "verify a live consumer's AckWait against the timing plan", run: checkCmd},
		{name: "bench", summary: "measure throughput, latency, ledger size and memory against raw JetStream", run: benchCmd},
		{name: "demo", summary: "publish, consume, crash between commit and ack, restart: exactly once, shown", run: demoCmd},
		{name: "demo-consumer", summary: "the demo's crashing consumer", run: demoConsumerCmd, hidden: true},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := mainExit(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func mainExit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		switch {
		case err == nil || errors.Is(err, errHelp):
			return exitOK
		case errors.As(err, new(usageError)):
			fmt.Fprintf(stderr, "jetledger %s: %v\nRun 'jetledger %s --help' for usage.\n", c.name, err, c.name)
			return exitUsage
		default:
			fmt.Fprintf(stderr, "jetledger %s: %v\n", c.name, err)
			return exitFailure
		}
	}
	fmt.Fprintf(stderr, "jetledger: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprint(w, `jetledger consumes NATS JetStream with exactly-once effects.

Usage: jetledger <command> [flags]

Commands:
`)
	cs := commands()
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	for _, c := range cs {
		if !c.hidden {
			fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
		}
	}
	fmt.Fprint(w, `
Every flag can also be set by an environment variable: JETLEDGER_ and the
flag's name in capitals with '-' as '_' (--max-deliver: JETLEDGER_MAX_DELIVER).
A flag on the command line wins over the environment.

Exit codes: 0 ok, 1 runtime failure, 2 bad usage.
Run 'jetledger <command> --help' for a command's flags.
`)
}

// usageError marks an error as the caller's: exit code 2.
type usageError struct{ error }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

func (e usageError) Unwrap() error { return e.error }

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
