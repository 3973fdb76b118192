package main

import (
	"context"
	"time"

	"github.com/jetledger/jetledger/service"
)

// partitionFlags split a stream by a key token so that several ledgers,
// each with its own durable, share its work; every message of a key lands
// in one partition, so one ledger holds all of a key's state.
type partitionFlags struct {
	Partitions   int           `name:"partitions" placeholder:"N" help:"with --subjects (one subject, its key a '*' token): create the stream partitioned into N by the key token, with NATS's deterministic partition mapping: the subject is stored as '<partition>.<subject>', such as 2.orders.alice.created"`
	PartitionKey int           `name:"partition-key" default:"1" placeholder:"K" help:"with --partitions: which '*' of the subject is the key, counting from 1"`
	Partition    []int         `name:"partition" placeholder:"I" sep:"," help:"consume these partitions of a partitioned stream (repeat the flag or give a list, such as 0,1): partition I on its own durable <durable>-p<I> into its own ledger, --db with -p<I> before its extension (ledger.db: ledger-p0.db)"`
	Changelog    bool          `name:"changelog" help:"with --nats: keep the ledger (each partition's) on other hosts too: hold the partition's lease, publish every transaction's changes to its changelog stream before committing, snapshot the ledger; a second run of the partition is refused, naming the owner"`
	Standby      bool          `name:"standby" help:"with --nats (implies --changelog): while another run owns the partition, keep a copy of its ledger from the changelog and take the partition over when the owner is lost"`
	Group        string        `name:"group" placeholder:"NAME" help:"with --nats: run as one member of this group of hosts, each running the same command: the group spreads the stream's partitions, and --standbys copies of each, evenly over its members, and moves them by a hand-over as members join and leave; a lost member's standbys take its partitions over. Implies --changelog and --standby; excludes --partition"`
	Standbys     int           `name:"standbys" placeholder:"K" help:"with --group: keep K standby copies of each partition, each on another member (fewer while the group has fewer members)"`
	StableAfter  time.Duration `name:"group-stable-after" default:"10s" placeholder:"DURATION" help:"with --group: give a member partitions only once it has been a member this long without a break, so a host that comes and goes more often moves nothing (a member lost or stopped is taken out at once)"`
	Leave        bool          `name:"leave-changelog" help:"without --changelog: make a ledger kept by a changelog this host's alone (stop its standbys first); without it such a ledger refuses every write outside --changelog, and so do the outbox, dlq, prune and replay commands"`
}

func (p partitionFlags) partitioned() bool {
	return p.Partitions != 0 || len(p.Partition) > 0 || p.Group != ""
}

// parts are the partitions the flags run here.
func (p partitionFlags) parts() service.Partitions {
	parts := service.Partitions{Named: p.Partition, Count: p.Partitions, Key: p.PartitionKey}
	if p.Group != "" {
		parts.Group = &service.Group{Name: p.Group, Standbys: p.Standbys, StableAfter: p.StableAfter}
	}
	return parts
}

// checkGroup refuses --standbys without --group, and --group without a
// server (before run's check names --changelog, which --group implies).
func (p partitionFlags) checkGroup(cfg service.Config) error {
	if p.Group != "" && cfg.NATS == nil {
		return usagef("--group needs a server to connect to (--nats, $NATS_URL or a named context): the members of a group share one JetStream cluster, each on its own host")
	}
	if p.Standbys != 0 && p.Group == "" {
		return usagef("--standbys %d needs --group: a group keeps that many copies of each partition (without a group, run --standby on the hosts that keep one)", p.Standbys)
	}
	return nil
}

// runPartitions runs one consumer per partition (service.RunPartitions),
// each on the config the service derives from cfg for it, its refusals
// advised with its own ledger and durable.
func (c *runCmd) runPartitions(ctx context.Context, cfg service.Config, parts service.Partitions) error {
	parts.Run = func(ctx context.Context, p service.Partition) error {
		pc := p.Config(cfg)
		return advise(service.Run(ctx, pc))
	}
	return advise(service.RunPartitions(ctx, cfg, parts))
}
