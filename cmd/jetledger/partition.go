package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jetledger/jetledger/consumer/partition"
	"github.com/nats-io/nats.go/jetstream"
)

// partitionFlags split a stream by a key token so that several ledgers,
// each with its own durable, share its work; every message of a key lands
// in one partition, so one ledger holds all of a key's state.
type partitionFlags struct {
	Partitions   int   `name:"partitions" placeholder:"N" help:"with --subjects (one subject, its key a '*' token): create the stream partitioned into N by the key token, with NATS's deterministic partition mapping: the subject is stored as '<partition>.<subject>', such as 2.orders.alice.created"`
	PartitionKey int   `name:"partition-key" default:"1" placeholder:"K" help:"with --partitions: which '*' of the subject is the key, counting from 1"`
	Partition    []int `name:"partition" placeholder:"I" sep:"," help:"consume these partitions of a partitioned stream (repeat the flag or give a list, such as 0,1): partition I on its own durable <durable>-p<I> into its own ledger, --db with -p<I> before its extension (ledger.db: ledger-p0.db)"`
}

// validate checks the partition flags against --subjects.
func (p partitionFlags) validate(subjects string) error {
	switch {
	case p.Partitions < 0:
		return usagef("--partitions %d: want a positive number", p.Partitions)
	case p.Partitions == 1:
		return usagef("--partitions 1 is no partitioning; leave the flag out, or give 2 or more")
	case p.Partitions > 0 && len(splitList(subjects)) != 1:
		return usagef("--partitions needs --subjects with exactly one subject (the stream's partition mapping has one source)")
	case p.Partitions > 0 && p.PartitionKey < 1:
		return usagef("--partition-key %d: want the position of a '*' token, from 1", p.PartitionKey)
	}
	if p.Partitions > 0 {
		if _, err := partitionTransform(splitList(subjects)[0], p.Partitions, p.PartitionKey); err != nil {
			return err
		}
	}
	seen := map[int]bool{}
	for _, i := range p.Partition {
		switch {
		case i < 0:
			return usagef("--partition %d: partitions count from 0", i)
		case p.Partitions > 0 && i >= p.Partitions:
			return usagef("--partition %d: the stream has --partitions %d, numbered 0 to %d", i, p.Partitions, p.Partitions-1)
		case seen[i]:
			return usagef("--partition %d is given twice", i)
		}
		seen[i] = true
	}
	return nil
}

// partitionTransform is the stream's subject mapping for n partitions keyed
// by the key-th '*' of subject: the partition number goes first.
func partitionTransform(subject string, n, key int) (*jetstream.SubjectTransformConfig, error) {
	toks := strings.Split(subject, ".")
	wild := 0
	for i, t := range toks {
		switch {
		case t == "*":
			wild++
			toks[i] = fmt.Sprintf("{{wildcard(%d)}}", wild)
		case t == ">" && i != len(toks)-1:
			return nil, usagef("--subjects %q: '>' must be the last token", subject)
		}
	}
	if key > wild {
		return nil, usagef("--partition-key %d: --subjects %q has %d '*' tokens; the key must be one of them, such as orders.*.> with the customer in the '*'", key, subject, wild)
	}
	return &jetstream.SubjectTransformConfig{Source: subject,
		Destination: fmt.Sprintf("{{partition(%d,%d)}}.%s", n, key, strings.Join(toks, "."))}, nil
}

// checkPartitionsSQL is checkSQLFirst for every partition ledger this run
// may open: those named (--partition), or else those --partitions creates.
// Where neither says, the stream's partitions are known only from the
// server, and the first partition's ledger stands for them. Another host's
// partitions are not read: a read-only open leaves -wal and -shm beside a
// ledger, and beside a moved partition's old file they make the ledger
// backup that moves it back refuse.
func (c *runCmd) checkPartitionsSQL(ctx context.Context) error {
	parts := partition.Here(c.Partition, c.Partitions)
	if len(parts) == 0 {
		parts = []int{0}
	}
	for _, i := range parts {
		if err := checkSQLFirst(ctx, partitionDB(c.DB, i), c.Schema, c.Apply); err != nil {
			return err
		}
	}
	return nil
}

// runPartitions runs one consumer per partition, each as its own run with
// its own durable and ledger, over one connection's server: the embedded
// one started here once, or --nats. The stream is made (or checked)
// partitioned first, so no partition binds a stream of another shape. The
// first partition to fail stops the others.
func (c *runCmd) runPartitions(inv *invocation) error {
	ctx := inv.ctx
	log, err := c.Log.logger(inv.stderr)
	if err != nil {
		return err
	}
	// Each partition's run checks its SQL first too, but only after the
	// server and the stream below: checked here, a bad one creates nothing.
	if err := c.checkPartitionsSQL(ctx); err != nil {
		return err
	}
	base := *c
	if c.NATS.URL == "" {
		e := c.Embedded
		srv, err := startEmbedded(ctx, e.config(c.DB, log))
		if err != nil {
			return err
		}
		defer srv.Close()
		base.shared = srv
		base.NATS = natsFlags{URL: srv.ClientURL(), Token: e.EmbeddedToken, Context: c.NATS.Context}
		base.Embedded = embeddedFlags{Listen: e.Listen}
	}
	n, err := c.partitionedStream(ctx, base.NATS, log)
	if err != nil {
		return err
	}
	parts := partition.Here(c.Partition, n)
	for _, i := range parts {
		if i >= n {
			return usagef("--partition %d: stream %s has %d partitions, numbered 0 to %d", i, c.Stream, n, n-1)
		}
	}
	log.InfoContext(ctx, "consuming partitions", "stream", c.Stream, "partitions", n, "here", parts)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	start := func(ctx context.Context, i int) error {
		p, pinv := base, *inv
		pinv.ctx = ctx
		p.DB, p.Durable = partitionDB(c.DB, i), partitionDurable(c.Durable, i)
		p.defaulted.durable = false // the partition's durable is its own, whatever the ledger recorded
		p.filter, p.logAttrs = []string{partitionFilter(i)}, []any{"partition", i}
		p.Subjects, p.transform, p.partitionFlags, p.streamLimitFlags = "", nil, partitionFlags{}, streamLimitFlags{}
		return p.run(&pinv)
	}
	if base.shared != nil {
		base.shared.DependOn(c.Stream)
	}
	watched := watchStore(runCtx, stop, base.shared, log)
	err = partition.Run(runCtx, partition.Config{Partitions: parts, Start: start})
	stop()
	return errors.Join(err, <-watched)
}

// partitionedStream creates the stream partitioned when --partitions and
// --subjects say so and it is missing, and returns how many partitions it
// has; a stream that is not partitioned is refused.
func (c *runCmd) partitionedStream(ctx context.Context, conn natsFlags, log *slog.Logger) (int, error) {
	nc, js, err := connect(ctx, conn, log)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	spec := streamSpec{Name: c.Stream, Subjects: splitList(c.Subjects),
		Duplicates: duplicateWindow(c.DuplicateWindow, c.MemoryLimit), Limits: c.streamLimitFlags}
	if c.Partitions > 0 {
		if spec.Transform, err = partitionTransform(spec.Subjects[0], c.Partitions, c.PartitionKey); err != nil {
			return 0, err
		}
	}
	info, err := ensureStream(ctx, js, spec, log)
	if err != nil {
		return 0, err
	}
	n := partitionsOf(info.Config)
	switch {
	case n == 0:
		return 0, fmt.Errorf("stream %s is not partitioned (no {{partition(N,…)}} subject mapping): create it with run --subjects … --partitions N, or leave out --partition", c.Stream)
	case c.Partitions > 0 && n != c.Partitions:
		return 0, fmt.Errorf("stream %s has %d partitions, not --partitions %d; a partitioned stream keeps its count (leave out --partitions)", c.Stream, n, c.Partitions)
	}
	return n, nil
}

// partitionsAlone refuses what a partitioned run cannot do: it serves one
// --metrics endpoint per consumer, and an edge's stream is the hub's copy.
func (c *runCmd) partitionsAlone() error {
	partitioned := c.Partitions > 0 || len(c.Partition) > 0
	switch {
	case !partitioned:
		return nil
	case c.Metrics != "" && len(c.Partition) != 1:
		return usagef("--metrics serves one consumer: with partitions give one --partition per process (or leave out --metrics)")
	case c.Embedded.Hub != "":
		return usagef("--partitions/--partition and --hub-url do not go together: partition the hub's stream, and give each site its share with --hub-filter")
	}
	return nil
}

// partitionShare makes sure a ledger gets one partition of a partitioned
// stream, never all of them: a consumer without a partition's filter is
// given it when its durable is a partition's (<durable>-p<I>, as replay of
// a partition's ledger reads it), and refused otherwise.
func (f *consumeFlags) partitionShare(cfg jetstream.StreamConfig) error {
	n := partitionsOf(cfg)
	if n == 0 || len(f.filter) > 0 {
		return nil
	}
	if i, ok := partition.OfDurable(f.Durable, n); ok {
		f.filter = []string{partitionFilter(i)}
		return nil
	}
	return fmt.Errorf("stream %s is partitioned into %d: consume it with run --partition I (each partition into its own ledger), or name a partition's durable (--durable %s-p0); one consumer over every partition would apply them all into one ledger, beside the partitions' own",
		cfg.Name, n, f.Durable)
}

// The partition names are the library's (consumer/partition); the inverse
// of a stream's mapping is consumer/requeue's business now.
var (
	partitionsOf     = partition.Count
	partitionDB      = partition.Ledger
	partitionDurable = partition.Durable
	partitionFilter  = partition.Filter
)
