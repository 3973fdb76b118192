package service

import (
	"context"
	"errors"

	"github.com/jetledger/jetledger/consumer/partition"
	"github.com/jetledger/jetledger/natsconn"
	"github.com/jetledger/jetledger/node"
	"github.com/jetledger/jetledger/sqlhandler"
	"github.com/jetledger/jetledger/stream"
)

// Partitions says which partitions of a partitioned stream RunPartitions
// runs in this process, and how.
type Partitions struct {
	// Named are the partitions to run here. Default: every partition of
	// the stream.
	Named []int
	// Count, when set, is the partition count the stream must have; with
	// Config.Stream.Subjects and Transform (its {{partition(N,…)}} mapping)
	// the stream is created with it if missing. Default 0: the stream must
	// exist partitioned.
	Count int
	// Key, with Count, creates the stream partitioned by this '*' token of
	// Config.Stream.Subjects' one subject, counting from 1
	// (partition.Transform sets Stream.Transform). Default 0: the
	// Stream.Transform given.
	Key int
	// Run runs one partition until ctx ends or it fails. Default: Run of
	// the Config the partition makes of RunPartitions' (Partition.Config).
	Run func(ctx context.Context, p Partition) error
	// Group, when set, runs the partitions as a member of this group of
	// hosts (each running the same command), which spreads them and their
	// standbys over its members and moves them as members come and go.
	// It needs NATS, and excludes Named. Default nil: Named, statically.
	Group *Group
}

// Partition is one partition's share: its own ledger and durable, its
// subjects, and the server the partitions share.
type Partition struct {
	Index   int
	DB      string           // partition.Ledger of Config.DB
	Durable string           // partition.Durable of Config.Consumer.Durable
	Filter  string           // partition.Filter
	NATS    *natsconn.Config // the server the partitions share
	Shared  *node.Node       // the embedded node RunPartitions started, nil with NATS
	locked  bool             // RunPartitions holds the ledger file's lock (lockPartitions)
	owner   *Owner           // a group's: this member's run of the partition (runGroup)
}

// Config is base run as this partition: its ledger, durable and subjects,
// on the shared server, consuming the stream that exists by now.
func (p Partition) Config(base Config) Config {
	c := base
	c.DB, c.Consumer.Durable, c.Consumer.FilterSubjects = p.DB, p.Durable, []string{p.Filter}
	c.NATS, c.Shared, c.Node.StoreDir, c.Node.Leaf = p.NATS, p.Shared, "", nil
	c.ledgerLocked = p.locked
	if p.owner != nil {
		o := *p.owner
		if base.Owner != nil {
			o.Replicas, o.SnapshotInterval = base.Owner.Replicas, base.Owner.SnapshotInterval
		}
		c.Owner = &o
		c.Metrics, c.MetricsAddr = nil, "" // the member's, one for its partitions (runGroup)
	}
	// The shared server's access is RunPartitions' to set; a partition
	// connects as its own client.
	c.Node.Token, c.Node.Publishers, c.Node.TLS, c.Node.Insecure = "", node.PublishRole{}, node.TLSConfig{}, false
	c.Stream.Subjects, c.Stream.Transform, c.Stream.Limits = nil, nil, stream.Limits{}
	c.Logger = c.Logger.With("partition", p.Index)
	c.Ledger.Logger, c.Consumer.Logger, c.Stream.Logger, c.Node.Logger = nil, nil, nil, nil
	return c
}

// RunPartitions runs one consumer per partition, each as its own run with
// its own durable and ledger, over one server: the embedded node started
// here once, or NATS. The stream is made (or checked) partitioned first, so
// no partition binds a stream of another shape. The first partition to
// fail stops the others. Its own errors are said in cfg.Names' words
// (Config.Say), a partition's by the partition's Run.
func RunPartitions(ctx context.Context, cfg Config, p Partitions) error {
	cfg, err := cfg.withDefaults()
	if err == nil {
		err = p.Validate(cfg)
	}
	if err == nil {
		err = cfg.load()
	}
	if err != nil {
		return err
	}
	if p.Count > 0 && p.creates(cfg) {
		cfg.Stream.Transform, _ = p.transform(cfg) // checked by Validate
	}
	if p.Group != nil && cfg.Owner == nil {
		cfg.Owner = &Owner{Standby: true} // a group's partitions are owned, and stood by
	}
	// Each partition's Start checks its SQL first too, but only after the
	// server and the stream below: checked here, a bad one creates nothing.
	if err := checkPartitionsSQL(ctx, cfg, p); err != nil {
		return step(StepSQL, err)
	}
	conn, shared := cfg.NATS, (*node.Node)(nil)
	if conn == nil {
		nodeCfg := cfg.Node
		nodeCfg.MemoryLimit, nodeCfg.Leaf = 0, nil // each partition's run applies the limit
		if shared, err = node.Start(ctx, nodeCfg); err != nil {
			return cfg.Say(step(StepNode, err))
		}
		defer shared.Close()
		own := shared.Conn() // in-process: whatever the listener's roles and TLS
		own.Logger = cfg.Logger
		conn = &own
	}
	n, err := partitionedStream(ctx, cfg, *conn, p.Count)
	if err != nil {
		return cfg.Say(err)
	}
	parts := partition.Here(p.Named, n)
	for _, i := range parts {
		if i >= n {
			return cfg.Say(step(StepStream, &PartitionCountError{Stream: cfg.Stream.Name, Have: n, Want: i, Named: true}))
		}
	}
	cfg.Logger.InfoContext(ctx, "consuming partitions", "stream", cfg.Stream.Name, "partitions", n, "here", parts)
	run := p.Run
	if run == nil {
		run = func(ctx context.Context, part Partition) error { return Run(ctx, part.Config(cfg)) }
	}
	release, err := lockPartitions(cfg, parts)
	if err != nil {
		return cfg.Say(step(StepLedger, err))
	}
	defer release()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	part := func(i int) Partition {
		return Partition{Index: i, DB: partition.Ledger(cfg.DB, i), Durable: partition.Durable(cfg.Consumer.Durable, i),
			Filter: partition.Filter(i), NATS: conn, Shared: shared, locked: locksLedgers(cfg)}
	}
	if shared != nil {
		shared.DependOn(cfg.Stream.Name)
	}
	watched := watchStore(runCtx, stop, shared, cfg.Logger, cfg.Names.Program)
	if p.Group != nil {
		err = runGroupOn(runCtx, cfg, *p.Group, *conn, n, part, run)
	} else {
		err = partition.Run(runCtx, partition.Config{Partitions: parts, Start: func(ctx context.Context, i int) error { return run(ctx, part(i)) }})
	}
	stop()
	return errors.Join(err, <-watched)
}

// checkPartitionsSQL is sqlhandler.Check for every partition ledger this
// run may open: those named, or else those Count creates. Where neither
// says, the stream's partitions are known only from the server, and the
// first partition's ledger stands for them. Another host's partitions are
// not read: a read-only open leaves -wal and -shm beside a ledger, and
// beside a moved partition's old file they make the ledger backup that
// moves it back refuse.
func checkPartitionsSQL(ctx context.Context, cfg Config, p Partitions) error {
	parts := partition.Here(p.Named, p.Count)
	if len(parts) == 0 {
		parts = []int{0}
	}
	for _, i := range parts {
		if err := sqlhandler.Check(ctx, partition.Ledger(cfg.DB, i), cfg.SQL); err != nil {
			return err
		}
	}
	return nil
}

// partitionedStream creates the stream partitioned when cfg.Stream says so
// and it is missing, and returns how many partitions it has; a stream that
// is not partitioned, or not into count (when set), is refused.
func partitionedStream(ctx context.Context, cfg Config, conn natsconn.Config, count int) (int, error) {
	nc, js, err := cfg.Dial(ctx, conn)
	if err != nil {
		return 0, step(StepConnect, err)
	}
	defer nc.Close()
	info, err := stream.Ensure(ctx, js, cfg.Stream)
	if errors.Is(err, stream.ErrNotFound) {
		err = cfg.noStream(err)
	}
	if err != nil {
		return 0, step(StepStream, err)
	}
	n := partition.Count(info.Config)
	if n == 0 || (count > 0 && n != count) {
		return 0, step(StepStream, &PartitionCountError{Stream: cfg.Stream.Name, Have: n, Want: count})
	}
	return n, nil
}
