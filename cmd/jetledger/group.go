package main

import (
	"cmp"
	"context"

	"github.com/jetledger/jetledger/group"
	"github.com/nats-io/nats.go/jetstream"
)

const groupStatusHelp = `
A group of hosts that each run 'jetledger run --group NAME' shares out the
stream's partitions by itself (see docs/scaling.md). With --nats or --context
to the cluster, status lists the members present (their keys in the bucket
` + group.Bucket + ` not expired), how long each has been a member and what it
runs, then each partition: owned (its lease is its assigned owner's), moving
(another member's: a hand-over under way), outside (a run that is no member
holds it, such as a static --partition run) or unowned (nobody holds its
lease: nothing consumes it). Exit 1 when a partition is unowned or outside,
or the group has no member.`

// groupCmd is `jetledger group`.
type groupCmd struct {
	Status groupStatusCmd `cmd:"" help:"a group's members and each partition's owner; exit 1 when a partition has none"`
}

type groupStatusCmd struct {
	NATS    natsFlags `embed:"" group:"nats"`
	Group   string    `name:"group" required:"" placeholder:"NAME" help:"the group (run --group)"`
	Stream  string    `name:"stream" placeholder:"NAME" help:"the partitioned stream the group consumes (run --stream); default: the one its members say"`
	Durable string    `name:"durable" placeholder:"NAME" help:"the durable whose partitions the group runs (run --durable; partition I's is <durable>-p<I>); default: the one its members say"`
	jsonFlag
}

func (c *groupStatusCmd) Run(inv *invocation) error {
	return withHub(inv, c.NATS, func(ctx context.Context, js jetstream.JetStream) error {
		st, err := group.ReadStatus(ctx, js, c.Group, c.Stream, c.Durable)
		if err != nil {
			return err
		}
		if c.JSON {
			err = printJSON(inv.stdout, st)
		} else {
			err = st.WriteTable(inv.stdout)
		}
		return cmp.Or(err, st.Attention())
	})
}

func (groupStatusCmd) Help() string { return groupStatusHelp }
