package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The scale run: a JetStream cluster of scaleNodes servers inside this
// process, on loopback, each with its own store; for each partition count
// N a stream (R3, file storage) partitioned into N by the account token,
// filled with Config.ScaleMessages messages, then consumed three ways:
//
//   - (a) raw: one plain consume-and-ack loop over the whole stream;
//   - (a_N) raw×N: N such loops in parallel, one per partition filter;
//   - (c_N) jetledger×N: N jetledger consumers in parallel, one durable
//     and one ledger per partition, as `run --partition I` does;
//   - (c_N+cl), with Config.Changelog: (c_N) again on fresh durables and
//     ledgers, each ledger publishing its changes to its partition's
//     changelog (R3) before each commit, as `run --changelog` does.
//
// Each rate is the messages of the stream over the wall time until the
// last consumer is done. Clients connect to the nodes round robin.
const (
	scaleNodes    = 3
	scaleSubject  = "pay.*" // its '*' is the key: the account
	scaleAccounts = 100
	// scaleTimeout bounds each phase, so that a lost message fails the run
	// instead of hanging it.
	scaleTimeout = 10 * time.Minute
)

// scaleMapping is the stream's partition mapping for n partitions, the
// one `run --partitions N --subjects 'pay.*'` makes (partitionTransform of
// package main, which this package cannot import): the partition first,
// chosen by the first '*'.
func scaleMapping(n int) *jetstream.SubjectTransformConfig {
	return &jetstream.SubjectTransformConfig{Source: scaleSubject,
		Destination: fmt.Sprintf("{{partition(%d,1)}}.pay.{{wildcard(1)}}", n)}
}

// scaleFilter is partition i's subjects under that mapping (partitionFilter
// of package main).
func scaleFilter(i int) string { return strconv.Itoa(i) + ".>" }

// scaleMessage is message i of the scale run: its subject carries the
// account, its key; its payload is the balance handler's, as (c)'s.
func scaleMessage(rng *rand.Rand, stream string, i int) *nats.Msg {
	acct := rng.IntN(scaleAccounts)
	m := &nats.Msg{Subject: fmt.Sprintf("pay.acct-%d", acct), Header: nats.Header{},
		Data: fmt.Appendf(nil, `{"account":"acct-%d","amount":%d,"n":%d}`, acct, 1+rng.IntN(1000), i)}
	m.Header.Set(jetstream.MsgIDHeader, scaleID(stream, i))
	return m
}

func scaleID(stream string, i int) string { return fmt.Sprintf("%s-%09d", stream, i) }

// ScaleResult is what the scale run measured (jetledger bench --partitions
// … --json).
type ScaleResult struct {
	Cores        int        `json:"cores"`
	Nodes        int        `json:"nodes"`
	Replicas     int        `json:"replicas"`
	Messages     int        `json:"messages"`
	Batch        int        `json:"batch"`
	SyncInterval string     `json:"sync_interval"`
	Changelog    bool       `json:"changelog"` // the rows have (c_N+cl)
	Rows         []ScaleRow `json:"rows"`
}

// ScaleRow is one partition count.
type ScaleRow struct {
	Partitions    int     `json:"partitions"`
	StreamLeader  string  `json:"stream_leader"`
	PublishPerSec float64 `json:"publish_msgs_per_sec"`
	// RawPerSec is (a), one loop over the whole stream: the baseline.
	RawPerSec float64 `json:"raw_msgs_per_sec"`
	// RawNPerSec is (a_N), N loops in parallel, one per partition.
	RawNPerSec float64 `json:"raw_n_msgs_per_sec"`
	// LedgerPerSec is (c_N), N jetledger consumers in parallel.
	LedgerPerSec    float64 `json:"jetledger_n_msgs_per_sec"`
	RatioLedgerRaw  float64 `json:"ratio_jetledger_n_over_raw"`
	RatioLedgerRawN float64 `json:"ratio_jetledger_n_over_raw_n"`
	// ChangelogPerSec is (c_N+cl), N jetledger consumers each with its
	// partition's changelog; RatioChangelog is (c_N+cl)/(c_N).
	ChangelogPerSec float64 `json:"jetledger_n_changelog_msgs_per_sec,omitempty"`
	RatioChangelog  float64 `json:"ratio_changelog_over_jetledger_n,omitempty"`
	// ChangelogBytesPerMsg is the bytes the changelog streams hold after
	// (c_N+cl) (State.Bytes, one replica's) per message of the stream.
	ChangelogBytesPerMsg float64          `json:"changelog_bytes_per_msg,omitempty"`
	PartitionResults     []ScalePartition `json:"per_partition"`
}

// ScalePartition is one partition of a row: its share of the messages and
// the rate of its own consumer, from the common start to its last message.
type ScalePartition struct {
	Partition    int     `json:"partition"`
	Node         int     `json:"node"` // the node its consumers' clients connected to
	Messages     int     `json:"messages"`
	RawPerSec    float64 `json:"raw_msgs_per_sec"`
	LedgerPerSec float64 `json:"jetledger_msgs_per_sec"`
	// MeanBatch is the jetledger consumer's messages per committed batch:
	// below Config.Batch when fetches come back short.
	MeanBatch float64 `json:"jetledger_mean_batch"`
	// ChangelogPerSec is the partition's rate in (c_N+cl).
	ChangelogPerSec float64 `json:"jetledger_changelog_msgs_per_sec,omitempty"`
	// BatchMs is a batch's mean time from its start to its commit (the
	// writer's), and DurableMs from its commit to Pending.Durable (the
	// WAL's sync, and with the changelog the entry's ack), in (c_N); the
	// Changelog ones in (c_N+cl).
	BatchMs            float64 `json:"batch_ms"`
	DurableMs          float64 `json:"durable_ms"`
	ChangelogBatchMs   float64 `json:"changelog_batch_ms,omitempty"`
	ChangelogDurableMs float64 `json:"changelog_durable_ms,omitempty"`
	// Ledger is the partition's ledger file of (c_N), under Config.Dir;
	// ChangelogLedger that of (c_N+cl).
	Ledger          string `json:"-"`
	ChangelogLedger string `json:"-"`
}

// validateScale checks the scale run's fields; no partitions, no run.
func (c Config) validateScale() error {
	if len(c.Partitions) == 0 {
		if c.Changelog {
			return &ConfigError{Flag: "--with-changelog", Got: true, Want: "--partitions as well"}
		}
		return nil
	}
	for _, n := range c.Partitions {
		if n < 1 || n > 64 {
			return &ConfigError{Flag: "--partitions", Got: n, Want: "partition counts from 1 to 64"}
		}
	}
	switch {
	case c.ScaleMessages < 1000:
		return &ConfigError{Flag: "--scale-messages", Got: c.ScaleMessages, Want: "at least 1000"}
	case c.Batch < 1:
		return &ConfigError{Flag: "--batch", Got: c.Batch, Want: "at least 1"}
	}
	if _, err := c.scaleSync(); err != nil {
		return &ConfigError{Flag: "--sync-interval", Got: c.SyncInterval, Want: "always or a positive duration"}
	}
	return nil
}

// scaleSync is how the cluster's servers sync their stores: SyncInterval,
// "always" (or empty) being 0.
func (c Config) scaleSync() (time.Duration, error) {
	if c.SyncInterval == "" || c.SyncInterval == "always" {
		return 0, nil
	}
	d, err := ackwait.ParseDuration(c.SyncInterval)
	if err == nil && d <= 0 {
		err = errors.New("not positive")
	}
	return d, err
}

// Scale runs the scale benchmark: a cluster in cfg.Dir, then each partition
// count of cfg.Partitions in turn, each on a stream of its own that is
// deleted after it. The ledgers stay in cfg.Dir.
func Scale(ctx context.Context, cfg Config) (ScaleResult, error) {
	if err := cfg.validateScale(); err != nil {
		return ScaleResult{}, err
	}
	if len(cfg.Partitions) == 0 || cfg.Handler == nil {
		return ScaleResult{}, fmt.Errorf("%w: Partitions and Handler are required", ErrConfig)
	}
	sync, _ := cfg.scaleSync()
	res := ScaleResult{Cores: runtime.NumCPU(), Nodes: scaleNodes, Replicas: scaleNodes,
		Messages: cfg.ScaleMessages, Batch: cfg.Batch, SyncInterval: cfg.SyncInterval, Changelog: cfg.Changelog}
	cfg.progress("starting a %d-node JetStream cluster in this process (sync_interval %s)…", scaleNodes, res.SyncInterval)
	cl, err := startCluster(ctx, filepath.Join(cfg.Dir, "cluster"), sync)
	if err != nil {
		return res, err
	}
	defer cl.Close()
	for _, n := range cfg.Partitions {
		row, err := cl.scaleRow(ctx, cfg, n)
		if err != nil {
			return res, fmt.Errorf("scale, %d partitions: %w", n, err)
		}
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}

// cluster is scaleNodes JetStream servers routed to each other.
type cluster struct {
	srvs []*server.Server
}

// startCluster starts the cluster with its stores under dir and waits for
// its meta leader and every peer to be current. A cluster port taken
// between picking it and listening on it (other programs share loopback)
// costs a retry.
func startCluster(ctx context.Context, dir string, sync time.Duration) (*cluster, error) {
	var err error
	for range 3 {
		var cl *cluster
		if cl, err = tryCluster(dir, sync); err == nil {
			if err = cl.waitReady(ctx); err == nil {
				return cl, nil
			}
			cl.Close()
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if rmErr := os.RemoveAll(dir); rmErr != nil {
			return nil, rmErr
		}
	}
	return nil, err
}

func tryCluster(dir string, sync time.Duration) (*cluster, error) {
	ports := make([]int, scaleNodes)
	routes := make([]string, scaleNodes)
	for i := range ports {
		// The route ports must be known before any server starts: each
		// server's routes name all three (a route to itself is ignored).
		u, err := freeURL()
		if err != nil {
			return nil, err
		}
		_, p, err := net.SplitHostPort(strings.TrimPrefix(u, "nats://"))
		if err != nil {
			return nil, err
		}
		if ports[i], err = strconv.Atoi(p); err != nil {
			return nil, err
		}
		routes[i] = "nats-route://127.0.0.1:" + p
	}
	cl := &cluster{}
	for i := range scaleNodes {
		name := fmt.Sprintf("scale-%d", i)
		srv, err := server.NewServer(&server.Options{
			ServerName: name, Host: "127.0.0.1", Port: server.RANDOM_PORT,
			JetStream: true, StoreDir: filepath.Join(dir, name),
			NoSigs: true, NoLog: true,
			SyncAlways: sync == 0, SyncInterval: sync, // as startEmbedded does
			Cluster: server.ClusterOpts{Name: "jetledger-bench", Host: "127.0.0.1", Port: ports[i]},
			Routes:  server.RoutesFromStr(strings.Join(routes, ",")),
		})
		if err != nil {
			cl.Close()
			return nil, fmt.Errorf("cluster node %s: %w", name, err)
		}
		srv.Start()
		cl.srvs = append(cl.srvs, srv)
	}
	for _, srv := range cl.srvs {
		if !srv.ReadyForConnections(10 * time.Second) {
			cl.Close()
			return nil, fmt.Errorf("cluster node %s did not become ready within 10s", srv.Name())
		}
	}
	return cl, nil
}

// waitReady polls until a meta leader is elected and sees both other peers
// current: before that an R3 stream cannot be placed.
func (cl *cluster) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, srv := range cl.srvs {
			if !srv.JetStreamIsLeader() {
				continue
			}
			info, err := srv.Jsz(nil)
			if err != nil || info.Meta == nil || len(info.Meta.Replicas) != scaleNodes-1 {
				continue
			}
			current := 0
			for _, p := range info.Meta.Replicas {
				if p.Current {
					current++
				}
			}
			if current == scaleNodes-1 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: no meta leader with all peers current: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// Close shuts every server down and waits for them.
func (cl *cluster) Close() {
	for _, srv := range cl.srvs {
		srv.Shutdown()
	}
	for _, srv := range cl.srvs {
		srv.WaitForShutdown()
	}
}

// clients are connections to the nodes, made as needed and closed together.
type clients struct {
	cl    *cluster
	conns []*nats.Conn
}

// js connects a client to node i mod scaleNodes.
func (c *clients) js(i int) (jetstream.JetStream, error) {
	nc, err := nats.Connect(c.cl.srvs[i%scaleNodes].ClientURL(), nats.Name("jetledger-bench-scale"))
	if err != nil {
		return nil, err
	}
	c.conns = append(c.conns, nc)
	return jetstream.New(nc)
}

func (c *clients) Close() {
	for _, nc := range c.conns {
		nc.Close()
	}
}

// scaleRow measures one partition count on a stream of its own.
func (cl *cluster) scaleRow(ctx context.Context, cfg Config, n int) (ScaleRow, error) {
	row := ScaleRow{Partitions: n}
	conns := &clients{cl: cl}
	defer conns.Close()
	js, err := conns.js(0)
	if err != nil {
		return row, err
	}
	name := fmt.Sprintf("SCALE%d", n)
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{scaleSubject},
		SubjectTransform: scaleMapping(n), Replicas: scaleNodes, Storage: jetstream.FileStorage})
	if err != nil {
		return row, fmt.Errorf("create stream %s: %w", name, err)
	}
	// The next row's stream takes the same subjects, and the disk is better
	// spent on it.
	defer js.DeleteStream(context.WithoutCancel(ctx), name) //nolint:errcheck // the cluster goes next
	if ci := stream.CachedInfo().Cluster; ci != nil {
		row.StreamLeader = ci.Leader
	}
	m := cfg.ScaleMessages
	cfg.progress("N=%d: publishing %d messages to %s (R%d, leader %s)…", n, m, name, scaleNodes, row.StreamLeader)
	if row.PublishPerSec, err = publishScale(ctx, js, name, m); err != nil {
		return row, err
	}

	cfg.progress("N=%d: (a) one raw consume+ack loop over the stream…", n)
	// (a) on node 1, the publisher being on node 0.
	ajs, err := conns.js(1)
	if err != nil {
		return row, err
	}
	a, err := rawLoops(ctx, []jetstream.JetStream{ajs}, name, []string{""})
	if err != nil {
		return row, err
	}
	if a.counts[0] != m {
		return row, fmt.Errorf("(a) found %d messages in %s, want %d", a.counts[0], name, m)
	}
	row.RawPerSec = a.rate(m)

	parts, aN, err := partitionRawLoops(ctx, cfg, conns, name, n)
	if err != nil {
		return row, err
	}
	row.RawNPerSec = aN.rate(m)

	cfg.progress("N=%d: (c_N) %d jetledger consumers in parallel (batch %d), one ledger each…", n, n, cfg.Batch)
	cN, err := ledgerLoops(ctx, cfg, parts, name, aN.counts, ledgerRun{})
	if err != nil {
		return row, err
	}
	row.LedgerPerSec = cN.rate(m)
	row.RatioLedgerRaw = row.LedgerPerSec / row.RawPerSec
	row.RatioLedgerRawN = row.LedgerPerSec / row.RawNPerSec
	row.PartitionResults = partitionResults(n, aN, cN)
	if cfg.Changelog {
		cfg.progress("N=%d: (c_N+cl) %d jetledger consumers in parallel, each ledger with its changelog (R%d)…", n, n, scaleNodes)
		return row, changelogLoops(ctx, cfg, &row, parts, name, aN.counts)
	}
	return row, nil
}

// partitionRawLoops is step (a_N): one raw consume+ack loop per partition
// in parallel, each on the clients of its partition, which it returns for
// the ledger loops. The partitions must hold the stream's messages.
func partitionRawLoops(ctx context.Context, cfg Config, conns *clients, name string, n int) ([]jetstream.JetStream, loops, error) {
	// Partition i's clients go to node i mod 3: N consumers spread over
	// the cluster as N `run --partition I` hosts would.
	parts := make([]jetstream.JetStream, n)
	filters := make([]string, n)
	var err error
	for i := range n {
		if parts[i], err = conns.js(i); err != nil {
			return nil, loops{}, err
		}
		filters[i] = scaleFilter(i)
	}
	cfg.progress("N=%d: (a_N) %d raw loops in parallel, one per partition…", n, n)
	aN, err := rawLoops(ctx, parts, name, filters)
	if err != nil {
		return nil, loops{}, err
	}
	sum := 0
	for _, c := range aN.counts {
		sum += c
	}
	if m := cfg.ScaleMessages; sum != m {
		return nil, loops{}, fmt.Errorf("the %d partitions of %s hold %d messages, want %d", n, name, sum, m)
	}
	return parts, aN, nil
}

// partitionResults are the rows of each partition: raw rate of aN, ledger
// rate and file of cN, and the mean batch.
func partitionResults(n int, aN, cN loops) []ScalePartition {
	var out []ScalePartition
	for i := range n {
		out = append(out, ScalePartition{Partition: i, Node: i % scaleNodes,
			Messages: aN.counts[i], RawPerSec: aN.partRate(i), LedgerPerSec: cN.partRate(i), Ledger: cN.ledgers[i]})
		if b := cN.batches[i]; b > 0 {
			out[i].MeanBatch = float64(aN.counts[i]) / float64(b)
		}
		out[i].BatchMs, out[i].DurableMs = cN.batchMs(i)
	}
	return out
}

// publishScale fills the stream with n messages with ids and returns the
// rate of acked publishes.
func publishScale(ctx context.Context, js jetstream.JetStream, stream string, n int) (float64, error) {
	rng := rand.New(rand.NewPCG(1, 1))
	return publishAsync(ctx, js, n, func(i int) *nats.Msg { return scaleMessage(rng, stream, i) })
}

// loops is the outcome of parallel consumers started together: each one's
// message count and time from the common start to its last message.
type loops struct {
	counts  []int
	elapsed []time.Duration
	ledgers []string
	batches []int // committed batches, of the jetledger consumers
	// Of the jetledger consumers' batches: the sums of start to commit and
	// commit to durable.
	toCommit, toDurable []time.Duration
}

// batchMs is partition i's mean batch time from start to commit, and from
// commit to durable, in milliseconds.
func (l loops) batchMs(i int) (commit, durable float64) {
	if l.batches[i] == 0 {
		return 0, 0
	}
	n := float64(l.batches[i])
	return float64(l.toCommit[i].Microseconds()) / 1000 / n, float64(l.toDurable[i].Microseconds()) / 1000 / n
}

// rate is the aggregate: m messages over the time of the slowest.
func (l loops) rate(m int) float64 {
	var wall time.Duration
	for _, e := range l.elapsed {
		wall = max(wall, e)
	}
	if wall == 0 {
		return 0
	}
	return float64(m) / wall.Seconds()
}

func (l loops) partRate(i int) float64 {
	if l.elapsed[i] == 0 {
		return 0
	}
	return float64(l.counts[i]) / l.elapsed[i].Seconds()
}

// rawLoops runs one plain Consume callback that acks each message per
// filter ("" for the whole stream), each on its client js[i] and a durable
// of its own, all started together; each stops once it has had the
// messages its filter held when it was created.
func rawLoops(ctx context.Context, js []jetstream.JetStream, stream string, filters []string) (loops, error) {
	ctx, cancel := context.WithTimeout(ctx, scaleTimeout)
	defer cancel()
	l := loops{counts: make([]int, len(filters)), elapsed: make([]time.Duration, len(filters))}
	cons := make([]jetstream.Consumer, len(filters))
	for i, f := range filters {
		durable := "raw"
		if f != "" {
			durable = fmt.Sprintf("raw-p%d", i)
		}
		c, err := js[i].CreateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: durable, FilterSubject: f,
			AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
		if err != nil {
			return l, fmt.Errorf("consumer %s: %w", durable, err)
		}
		cons[i] = c
		l.counts[i] = int(c.CachedInfo().NumPending)
	}
	done := make(chan int, len(filters))
	start := time.Now()
	for i, c := range cons {
		if l.counts[i] == 0 {
			done <- i
			continue
		}
		var got atomic.Int64
		want := int64(l.counts[i])
		cc, err := c.Consume(func(m jetstream.Msg) {
			m.Ack() //nolint:errcheck // the raw baseline does no more than this
			if got.Add(1) == want {
				l.elapsed[i] = time.Since(start) // read after done says so
				done <- i
			}
		})
		if err != nil {
			return l, err
		}
		defer cc.Stop()
	}
	for range filters {
		select {
		case <-done:
		case <-ctx.Done():
			return l, fmt.Errorf("raw consumers did not finish: %w", ctx.Err())
		}
	}
	for _, j := range js {
		if err := j.Conn().Flush(); err != nil {
			return l, err
		}
	}
	return l, nil
}

// ledgerLoops runs one jetledger consumer per partition, as `run
// --partition I` does: its own durable, filter and ledger, the balance
// handler, cfg.Batch messages per transaction. All start together; each
// stops once it has committed counts[i] messages.
func ledgerLoops(ctx context.Context, cfg Config, js []jetstream.JetStream, stream string, counts []int, run ledgerRun) (loops, error) {
	n := len(js)
	l := loops{counts: counts, elapsed: make([]time.Duration, n), ledgers: make([]string, n), batches: make([]int, n),
		toCommit: make([]time.Duration, n), toDurable: make([]time.Duration, n)}
	cons := make([]*consumer.Consumer, n)
	runCtx := make([]context.Context, n)
	cancels := make([]context.CancelFunc, n)
	var start time.Time // set before any consumer runs
	for i := range n {
		l.ledgers[i] = filepath.Join(cfg.Dir, fmt.Sprintf("scale%d%s-p%d.db", n, run.tag, i))
		st, h, err := run.open(ctx, cfg, i, l.ledgers[i])
		if err != nil {
			return l, fmt.Errorf("partition %d: %w", i, err)
		}
		defer st.Close()
		runCtx[i], cancels[i] = context.WithCancel(ctx)
		defer cancels[i]()
		var done atomic.Int64
		want := int64(counts[i])
		cons[i], err = consumer.New(ctx, js[i], st, consumer.Config{
			Stream: stream, Durable: run.durable(i), FilterSubjects: []string{scaleFilter(i)},
			Handler: h, Logger: quiet, Plan: ackwait.Plan{BatchSize: cfg.Batch},
			AfterCommit: func(r consumer.BatchReport) {
				k := int64(len(r.Results))
				l.batches[i]++ // AfterCommit is called from one goroutine at a time; read after Run returns
				l.toCommit[i] += r.Committed.Sub(r.Started)
				l.toDurable[i] += r.Durable.Sub(r.Committed)
				if now := done.Add(k); now >= want && now-k < want {
					l.elapsed[i] = time.Since(start) // read after Run returns
					cancels[i]()
				}
			},
		})
		if err != nil {
			return l, fmt.Errorf("partition %d: %w", i, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, scaleTimeout)
	defer cancel()
	errs := make(chan error, n)
	// Where the step's time goes: the cluster's nodes are in this process.
	stopProfile, err := cfg.profile(fmt.Sprintf(".scale%d%s", n, run.tag))
	if err != nil {
		return l, err
	}
	defer stopProfile()
	start = time.Now()
	for i, c := range cons {
		if counts[i] == 0 {
			errs <- nil
			continue
		}
		go func() {
			// The phase's deadline ends every partition's run as well.
			stop := context.AfterFunc(ctx, cancels[i])
			defer stop()
			err := c.Run(runCtx[i])
			if err == nil && ctx.Err() != nil {
				err = fmt.Errorf("partition %d did not finish: %w", i, ctx.Err())
			} else if err != nil {
				err = fmt.Errorf("partition %d: %w", i, err)
			}
			errs <- err
		}()
	}
	var all []error
	for range n {
		if err := <-errs; err != nil {
			all = append(all, err)
			cancel() // the first failure stops the others
		}
	}
	return l, errors.Join(all...)
}

// WriteText prints the scale result as a table.
func (r ScaleResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "\n%d-node JetStream cluster in this process on loopback, streams R%d on file storage, sync_interval %s; %d messages (100 accounts, the key) per row; %d cores\n",
		r.Nodes, r.Replicas, r.SyncInterval, r.Messages, r.Cores)
	fmt.Fprintf(w, "(a) one raw consume+ack loop; (a_N) N raw loops, one per partition; (c_N) N jetledger consumers, one ledger each, batch %d; messages/s\n", r.Batch)
	var clHead string
	if r.Changelog {
		fmt.Fprintf(w, "(c_N+cl) (c_N) with each ledger's changes published to its partition's changelog (R%d) before each commit; cl B/msg: the changelogs' bytes per message\n", r.Replicas)
		clHead = fmt.Sprintf(" %12s %8s %9s", "(c_N+cl)", "cl/c_N", "cl B/msg")
	}
	fmt.Fprintf(w, "\n%3s %10s %10s %10s %12s %7s %9s%s  %s\n", "N", "publish", "(a) raw", "(a_N)", "(c_N)", "c_N/a", "c_N/a_N", clHead,
		"per partition (c_N): messages/s (messages, mean batch)")
	for _, row := range r.Rows {
		per := make([]string, len(row.PartitionResults))
		for i, p := range row.PartitionResults {
			per[i] = fmt.Sprintf("p%d %.0f (%d, %.0f)", p.Partition, p.LedgerPerSec, p.Messages, p.MeanBatch)
		}
		var cl string
		if r.Changelog {
			cl = fmt.Sprintf(" %12.0f %8.2f %9.1f", row.ChangelogPerSec, row.RatioChangelog, row.ChangelogBytesPerMsg)
		}
		fmt.Fprintf(w, "%3d %10.0f %10.0f %10.0f %12.0f %7.2f %9.2f%s  %s\n", row.Partitions, row.PublishPerSec, row.RawPerSec,
			row.RawNPerSec, row.LedgerPerSec, row.RatioLedgerRaw, row.RatioLedgerRawN, cl, strings.Join(per, ", "))
	}
}
