package main

import (
	"context"
	"io"
	"os"
	"time"

	"github.com/jetledger/jetledger/cmd/jetledger/internal/bench"
	"github.com/jetledger/jetledger/internal/say"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/node"
	"github.com/jetledger/jetledger/sqlhandler"
)

// benchCmd is `jetledger bench`, over the harness in internal/bench.
type benchCmd struct {
	SyncInterval    syncInterval  `name:"sync-interval" placeholder:"always|DURATION" help:"how often the embedded server fsyncs its store: always (the default) or a duration"`
	Messages        int           `name:"messages" default:"200000" help:"messages published and consumed by (a) and (c)"`
	PerMsgMessages  int           `name:"per-msg-messages" default:"20000" help:"messages consumed by (b), which is slow; its rate is what counts"`
	Batch           int           `name:"batch" default:"500" help:"batch size of (c)"`
	Rate            []int         `name:"rate" default:"1000,10000" sep:"," help:"offered loads of the latency runs, messages/s, comma-separated"`
	LatencyDuration time.Duration `name:"latency-duration" default:"5s" help:"length of each latency run"`
	FailEvery       int           `name:"fail-every" default:"100" help:"run (d) fails one message in this many (100: 1 %)"`
	PayloadBytes    int           `name:"payload-bytes" placeholder:"N" help:"pad each payload of (a)-(e) and the RSS runs to N bytes with a JSON string (0: the smallest, about 45 bytes)"`
	RSSMessages     int           `name:"rss-messages" help:"also run 'jetledger run' over this many messages, alone and with its embedded server, and report its peak RSS (0: skip)"`
	RSSRate         int           `name:"rss-rate" placeholder:"N" help:"feed the embedded-server RSS run N messages/s, with its stream and ledger pruned as they go (--max-age 1m --duplicate-window 30s --retention 30s --prune-interval 20s), for a steady state (0: as fast as it takes them)"`
	RSSMemoryLimit  byteSize      `name:"rss-memory-limit" default:"96MiB" placeholder:"SIZE" help:"--memory-limit of the embedded-server RSS run (0: none)"`
	CPUProfile      string        `name:"cpuprofile" placeholder:"FILE" help:"write a CPU profile of run (c) to this file, of (c_N) to FILE.ledger-rows, of the latency run beside a prune (--prune-rows) to FILE.prune, and with --partitions of each (c_N) to FILE.scaleN and (c_N+cl) to FILE.scaleN-cl"`
	Partitions      []int         `name:"partitions" sep:"," placeholder:"N" help:"run the scale benchmark instead of (a)-(d): a 3-node cluster in this process, a stream partitioned into each N in turn (such as 1,2,4)"`
	ScaleMessages   int           `name:"scale-messages" default:"100000" help:"with --partitions: messages published for each partition count"`
	Changelog       bool          `name:"with-changelog" help:"with --partitions: also run (c_N) with each partition's changelog, R3, and report its rate against (c_N) and the changelog bytes per message"`
	IDKind          string        `name:"id-kind" default:"ulid" enum:"ulid,random" help:"the message ids published: ulid (in time order, as 'jetledger publish' makes them) or random (32 hex digits, as webhook providers and UUIDv4 publishers give)"`
	LedgerRows      int           `name:"ledger-rows" placeholder:"N" help:"also run (c) on a ledger pre-filled with N rows of random ids, and report it against (c) on an empty one"`
	PruneRows       int           `name:"prune-rows" placeholder:"N" help:"also run the first --rate's latency and (c) on a ledger of N prunable rows, without and beside a prune of them, and report both"`
	Keep            bool          `name:"keep" help:"keep the temporary directory"`
	jsonFlag
}

func (benchCmd) Help() string { return bench.Help }

func (c *benchCmd) Run(inv *invocation) error {
	cfg := bench.Config{Messages: c.Messages, PerMsgMessages: c.PerMsgMessages, Batch: c.Batch, Rates: c.Rate, FailEvery: c.FailEvery, PayloadBytes: c.PayloadBytes,
		LatencyDuration: c.LatencyDuration, RSSMessages: c.RSSMessages, RSSRate: c.RSSRate, CPUProfile: c.CPUProfile, EdgeMemoryLimit: c.RSSMemoryLimit.flag(),
		SyncInterval: c.SyncInterval.String(), Handler: builtinHandler, Partitions: c.Partitions, ScaleMessages: c.ScaleMessages, Changelog: c.Changelog, IDKind: c.IDKind, LedgerRows: c.LedgerRows, PruneRows: c.PruneRows}
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	n, err := node.StartScratch(inv.ctx, "bench", node.Config{SyncInterval: c.SyncInterval.interval, Logger: quiet})
	if err != nil {
		return err
	}
	defer n.Finish(c.Keep, inv.stderr)
	nc, js, err := connect(inv.ctx, natsFlags{URL: n.ClientURL()}, quiet)
	if err != nil {
		return err
	}
	defer nc.Close()
	cfg.JS, cfg.URL, cfg.Dir, cfg.Binary = js, n.ClientURL(), n.Dir, self
	if !c.JSON {
		cfg.Progress = inv.stdout
	}
	if len(c.Partitions) > 0 {
		// The scale run starts its own cluster, in the scratch node's directory.
		res, err := bench.Scale(inv.ctx, cfg)
		return c.print(inv, res, err)
	}
	res, err := bench.Run(inv.ctx, cfg)
	return c.print(inv, res, err)
}

// print writes a benchmark's result as --json asks, or its error.
func (c *benchCmd) print(inv *invocation, res interface{ WriteText(io.Writer) }, err error) error {
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(inv.stdout, res)
	}
	res.WriteText(inv.stdout)
	return nil
}

// sqlNames are what the built-in handler's errors call its settings: the
// flags (sqlhandler.Config.Names).
var sqlNames = say.Under(runNames.Settings, "SQL")

// builtinHandler is run's built-in handler with --apply apply, for the bench.
func builtinHandler(ctx context.Context, st *ledger.Store, apply string) (ledger.Handler, error) {
	h, err := sqlhandler.New(ctx, st, sqlhandler.Config{Apply: apply, Names: sqlNames})
	if err != nil {
		return nil, sqlUsage(err)
	}
	return h.Handle, nil
}
