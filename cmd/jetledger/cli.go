package main

import (
	"io"
	"strconv"

	"github.com/alecthomas/kong"
	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/fleet"
	"github.com/jetledger/jetledger/internal/kongx"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/publisher"
)

// cli is the command line: global flags, then one command per field, each
// in a file of its own name.
type cli struct {
	Config  configFlag  `help:"read flag values from this TOML file: top-level keys for every command, a [command] or [command.subcommand] table for one" placeholder:"FILE"`
	Version versionFlag `help:"print the version and exit" env:"-"`

	Run          runCmd          `cmd:"" help:"consume a stream through the ledger (embedded JetStream server without --nats)"`
	Replay       replayCmd       `cmd:"" help:"replay a stream through the ledger up to where run stands; effects recorded for run"`
	Publish      publishCmd      `cmd:"" help:"publish JSON messages with stable Nats-Msg-Id headers"`
	Outbox       outboxCmd       `cmd:"" help:"inspect and operate the outbox: list, review, cancel, resolve, retry"`
	Ledger       ledgerCmd       `cmd:"" help:"inspect the ledger: stats, conflicts, prune, backup"`
	DLQ          dlqCmd          `cmd:"" name:"dlq" help:"dead letters: list, show, requeue with the original id, discard"`
	Conflicts    conflictsCmd    `cmd:"" help:"ids reused with another payload: list, show, acknowledge"`
	Status       statusCmd       `cmd:"" help:"one screen: stream, consumer vs plan, ledger, outbox, dead letters, conflicts"`
	Fleet        fleetCmd        `cmd:"" help:"at the hub: every edge site's state, worst first; exit 1 when any needs a person"`
	Hub          hubCmd          `cmd:"" help:"at the hub: set up what an edge site needs there (the status bucket, its effects source); idempotent"`
	Group        groupCmd        `cmd:"" help:"a group of hosts sharing a stream's partitions (run --group): status"`
	Console      consoleCmd      `cmd:"" help:"a web console over the admin API of every run and site the connection reaches: look, and act with sign-in"`
	Check        checkCmd        `cmd:"" help:"verify a live consumer's AckWait against the timing plan"`
	Health       healthCmd       `cmd:"" help:"ask a running run for its health (/healthz of --metrics): exit 1 unless healthy; a container's health check"`
	Bench        benchCmd        `cmd:"" help:"measure throughput, latency, ledger size and memory against raw JetStream"`
	Demo         demoCmd         `cmd:"" help:"publish, consume, crash between commit and ack, restart: exactly once, shown"`
	DemoConsumer demoConsumerCmd `cmd:"" name:"demo-consumer" hidden:"" help:"the demo's crashing consumer"`
	VersionCmd   versionCmd      `cmd:"" name:"version" help:"print the version: module, VCS commit, Go"`
	Completion   completionCmd   `cmd:"" help:"print a shell completion script: bash, zsh or fish"`
	Help         helpCmd         `cmd:"" help:"print the help of a command: jetledger help outbox cancel"`
	Complete     completeCmd     `cmd:"" name:"__complete" hidden:"" help:"complete a command line (used by the completion scripts)"`
}

const description = `jetledger consumes NATS JetStream with exactly-once effects.

Every flag can also be set by an environment variable: JETLEDGER_ and the
flag's name in capitals with '-' as '_' (--max-deliver: JETLEDGER_MAX_DELIVER),
or in the TOML file of --config (JETLEDGER_CONFIG). The command line wins over
the environment, which wins over the file.

Exit codes: 0 ok, 1 runtime failure, 2 bad usage.`

// flagGroups order the flags of a long --help by what they are about.
var flagGroups = []kong.Group{
	{Key: "nats", Title: "NATS connection:"},
	{Key: "api", Title: "Through the admin API of the run that owns the ledger (with --nats or --context):"},
	{Key: "embedded", Title: "Embedded server (without --nats):"},
	{Key: "edge", Title: "Edge (the embedded server as a leaf node of a hub):"},
	{Key: "partitions", Title: "Partitions (scale out: a ledger and a durable per partition):"},
	{Key: "timing", Title: "Timing (the AckWait plan):"},
	{Key: "webhook", Title: "Webhook sink:"},
	{Key: "effects", Title: "NATS sink (effects published to a JetStream subject):"},
	{Key: "log", Title: "Logging:"},
}

// defaults are the library's defaults, shown in --help and used as the
// flags' defaults, and the help of flags whose meaning varies by command.
func defaults() kong.Vars {
	return kong.Vars{
		"nats_url":            defaultNATS,
		"nats_default":        defaultNATS,
		"nats_help":           "NATS server URL",
		"webhook_help":        "POST each applied message's payload to this URL through the outbox (Idempotency-Key: <outbox id>)",
		"durable_help":        "durable pull consumer name",
		"durable_default":     consumer.DurableDefault,
		"max_deliver":         strconv.Itoa(consumer.MaxDeliverDefault),
		"deadline":            ackwait.DeadlineDefault.String(),
		"batch":               strconv.Itoa(ackwait.BatchSizeDefault),
		"buffer_wait":         ackwait.BufferWaitDefault.String(),
		"commit_margin":       ackwait.CommitMarginDefault.String(),
		"ack_margin":          ackwait.AckMarginDefault.String(),
		"retention":           ledger.RetentionDefault.String(),
		"outbox_retention":    ledger.OutboxRetentionDefault.String(),
		"publish_attempts":    strconv.Itoa(publisher.AttemptsDefault),
		"publish_timeout":     publisher.TimeoutDefault.String(),
		"outbox_workers":      strconv.Itoa(outbox.WorkersDefault),
		"outbox_max_attempts": strconv.Itoa(outbox.MaxAttemptsDefault),
		"webhook_timeout":     webhook.TimeoutDefault.String(),
		"webhook_id_field":    webhook.ExternalIDFieldDefault,
		"hub_effects":         fleet.HubEffectsDefault,
	}
}

// completionCmd and completeCmd are shell completion, computed from the
// kong model by the binary itself.
type (
	completionCmd = kongx.CompletionCmd
	completeCmd   = kongx.CompleteCmd
)

// configFlag is --config (JETLEDGER_CONFIG): TOML whose keys are flag
// names without the dashes, a [command] or [command.subcommand] table for
// one command (kongx.LoadConfig). The file is read before the flags are
// resolved, and every error about it names it.
type configFlag string

// BeforeResolve reads the file and adds it as a resolver.
func (configFlag) BeforeResolve(kctx *kong.Context, trace *kong.Path) error {
	return kongx.ReadConfigFlag(kctx, trace)
}

// newParser builds the parser of root. Exits (after --help, --version)
// return their code from mainExit (kongx.Exit).
func newParser(root *cli, stdout, stderr io.Writer) (*kong.Kong, error) {
	opts, err := kongx.Options(kongx.Config{Name: "jetledger", EnvPrefix: "JETLEDGER"})
	if err != nil {
		return nil, err
	}
	return kong.New(root, append(opts,
		kong.Description(description),
		kong.Writers(stdout, stderr),
		kong.Exit(kongx.Exit),
		kong.Vars(defaults()),
		kong.ExplicitGroups(flagGroups),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true, NoExpandSubcommands: true}),
	)...)
}
