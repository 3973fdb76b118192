package main

import (
	"context"
	"errors"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/partition"
	"github.com/jetledger/jetledger/internal/kongx"
	"github.com/jetledger/jetledger/service"
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
	case p.Partitions > 0 && len(kongx.SplitList(subjects)) != 1:
		return usagef("--partitions needs --subjects with exactly one subject (the stream's partition mapping has one source)")
	case p.Partitions > 0 && p.PartitionKey < 1:
		return usagef("--partition-key %d: want the position of a '*' token, from 1", p.PartitionKey)
	}
	if p.Partitions > 0 {
		if _, err := partitionTransform(kongx.SplitList(subjects)[0], p.Partitions, p.PartitionKey); err != nil {
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
// by the key-th '*' of subject (partition.Transform), its refusals naming
// the flags.
func partitionTransform(subject string, n, key int) (*jetstream.SubjectTransformConfig, error) {
	tr, err := partition.Transform(subject, n, key)
	var ke *partition.KeyError
	switch {
	case errors.Is(err, partition.ErrWildcardNotLast):
		return nil, usagef("--subjects %q: '>' must be the last token", subject)
	case errors.As(err, &ke):
		return nil, usagef("--partition-key %d: --subjects %q has %d '*' tokens; the key must be one of them, such as orders.*.> with the customer in the '*'", key, subject, ke.Wildcards)
	}
	return tr, err
}

// runPartitions runs one consumer per partition (service.RunPartitions),
// each as its own run of these flags with its own durable and ledger over
// the server the partitions share.
func (c *runCmd) runPartitions(inv *invocation) error {
	log, err := c.Log.logger(inv.stderr)
	if err != nil {
		return err
	}
	sql, err := handlerConfig(c.Schema, c.Apply)
	if err != nil {
		return err
	}
	spec := streamSpec{Name: c.Stream, Subjects: kongx.SplitList(c.Subjects),
		Duplicates: duplicateWindow(c.DuplicateWindow, c.MemoryLimit), Limits: c.streamLimitFlags}
	if c.Partitions > 0 {
		if spec.Transform, err = partitionTransform(spec.Subjects[0], c.Partitions, c.PartitionKey); err != nil {
			return err
		}
	}
	cfg := service.Config{DB: c.DB, Logger: log, SQL: sql, Node: c.Embedded.config(c.DB, log), Dial: c.dial(log), Stream: spec.config(log), Names: runNames,
		Consumer: consumer.Config{Durable: c.Durable}}
	if c.NATS.URL != "" {
		n := c.NATS.config(log)
		cfg.NATS = &n
	}
	base := *c
	run := func(ctx context.Context, part service.Partition) error {
		p, pinv := base, *inv
		pinv.ctx = ctx
		if part.Shared != nil {
			p.shared = part.Shared
			p.NATS = natsFlags{URL: part.NATS.URL, Token: part.NATS.Token, Context: c.NATS.Context}
			p.Embedded = embeddedFlags{Listen: c.Embedded.Listen}
		}
		p.DB, p.Durable = part.DB, part.Durable
		p.defaulted.durable = false // the partition's durable is its own, whatever the ledger recorded
		p.filter, p.logAttrs = []string{part.Filter}, []any{"partition", part.Index}
		p.Subjects, p.partitionFlags, p.streamLimitFlags = "", partitionFlags{}, streamLimitFlags{}
		return p.run(&pinv)
	}
	err = service.RunPartitions(inv.ctx, cfg, service.Partitions{Named: c.Partition, Count: c.Partitions, Run: run})
	return c.advise(err)
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
