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

const benchHelp = `
Measure jetledger against plain JetStream in one run, on an embedded server
in a temporary directory:

    (a) raw       a plain JetStream consume-and-ack loop: no ledger, no guarantee
    (b) per-msg   jetledger with one transaction per message (fetched in
                  batches like (c), each message committed and acked alone)
    (c) group     jetledger with group commit (--batch) and the --apply balance handler
    (d) failing   (c) with a handler that fails one message in --fail-every,
                  once, after writing (the ledger undoes it)

It publishes --messages messages, consumes them with each mode on its own
durable, and prints messages/s, the ratios c/a, c/b and d/c, p50/p99/max
latency (publish to commit) of (c) at each offered load of --rate for
--latency-duration (measured from each message's due time, so a server that
falls behind the load counts), ledger bytes per message (processed_messages
and its index, from SQLite's dbstat), and peak RSS of this process. With
--rss-messages N it also runs 'jetledger run' as a child process over N
messages already in the stream, then 'jetledger run' with its own embedded
server (the edge default, with --memory-limit from --rss-memory-limit) while
'jetledger publish' sends it N messages, and reports each one's peak RSS
(VmHWM).

The embedded server syncs its store as --sync-interval says, as run's does
(default always: every write before its publish is acked); the publish rate
(acked publishes per second, 2 000 in flight) shows the cost most plainly.

With --partitions (such as 1,2,4) it runs the scale benchmark instead of
(a)-(d): a 3-node JetStream cluster inside this process on loopback (each
node with its own store, syncing as --sync-interval says), and for each
partition count N a stream of its own (R3, file storage) partitioned into N
by the account token as 'run --partitions N --subjects pay.*' does, filled
with --scale-messages messages over 100 accounts, consumed by (a) one raw
consume+ack loop over the whole stream, (a_N) N raw loops in parallel, one
per partition, and (c_N) N jetledger consumers in parallel, one durable and
one ledger per partition (batch --batch, the balance handler). Clients
connect to the nodes round robin. It prints aggregate messages/s (the
stream's messages over the wall time until the last consumer is done), the
ratios c_N/a and c_N/a_N, and each partition's share and rate. --messages,
--rate and the other flags of (a)-(d) are not used then.`

// benchCmd is `jetledger bench`, over the harness in internal/bench.
type benchCmd struct {
	SyncInterval    syncInterval  `name:"sync-interval" placeholder:"always|DURATION" help:"how often the embedded server fsyncs its store: always (the default) or a duration"`
	Messages        int           `name:"messages" default:"200000" help:"messages published and consumed by (a) and (c)"`
	PerMsgMessages  int           `name:"per-msg-messages" default:"20000" help:"messages consumed by (b), which is slow; its rate is what counts"`
	Batch           int           `name:"batch" default:"500" help:"batch size of (c)"`
	Rate            []int         `name:"rate" default:"1000,10000" sep:"," help:"offered loads of the latency runs, messages/s, comma-separated"`
	LatencyDuration time.Duration `name:"latency-duration" default:"5s" help:"length of each latency run"`
	FailEvery       int           `name:"fail-every" default:"100" help:"run (d) fails one message in this many (100: 1 %)"`
	RSSMessages     int           `name:"rss-messages" help:"also run 'jetledger run' over this many messages, alone and with its embedded server, and report its peak RSS (0: skip)"`
	RSSMemoryLimit  byteSize      `name:"rss-memory-limit" default:"96MiB" placeholder:"SIZE" help:"--memory-limit of the embedded-server RSS run (0: none)"`
	CPUProfile      string        `name:"cpuprofile" placeholder:"FILE" help:"write a CPU profile of run (c) to this file"`
	Partitions      []int         `name:"partitions" sep:"," placeholder:"N" help:"run the scale benchmark instead of (a)-(d): a 3-node cluster in this process, a stream partitioned into each N in turn (such as 1,2,4)"`
	ScaleMessages   int           `name:"scale-messages" default:"100000" help:"with --partitions: messages published for each partition count"`
	Keep            bool          `name:"keep" help:"keep the temporary directory"`
	jsonFlag
}

func (benchCmd) Help() string { return benchHelp }

func (c *benchCmd) Run(inv *invocation) error {
	cfg := bench.Config{Messages: c.Messages, PerMsgMessages: c.PerMsgMessages, Batch: c.Batch, Rates: c.Rate, FailEvery: c.FailEvery,
		LatencyDuration: c.LatencyDuration, RSSMessages: c.RSSMessages, CPUProfile: c.CPUProfile, EdgeMemoryLimit: c.RSSMemoryLimit.flag(),
		SyncInterval: c.SyncInterval.String(), Handler: builtinHandler, Partitions: c.Partitions, ScaleMessages: c.ScaleMessages}
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
	defer closeScratch(n, c.Keep, inv.stderr)
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
		// The scale run starts its own cluster; the scratch node gives it
		// the directory (and --keep).
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
