package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jetledger/jetledger/fleet"
	"github.com/nats-io/nats.go/jetstream"
)

const fleetHelp = `
Every edge run reports its state to the hub's bucket ` + fleet.Bucket + `, key its
domain, every 15 s while its leaf link is up and at once when it comes back.
With --nats or --context to the hub, fleet lists every site by its key, worst
first: mismatch (the record names another site or none: a misconfigured or
forged reporter), offline (no record for --stale), attention (review rows, dead
letters, conflicts, low disk), behind (lagging, another version), ok. Exit 1 on
mismatch, offline or attention. Set up a site at the hub with 'jetledger hub'.`

const hubHelp = `
What a site needs at the hub, with --nats or --context to the hub: the bucket
` + fleet.Bucket + ` the sites report to, and, with --effects-stream, the hub's effects
stream sourcing the site's effects stream through the durable consumer its run
makes (which resumes within seconds after an outage, where a source added by
hand with 'nats stream add --source' takes 30-40 s). Adding site 201 is one
command; running it again changes nothing. It needs no link to the site.`

// fleetCmd is `jetledger fleet`, hubCmd `jetledger hub`.
type fleetCmd struct {
	NATS    natsFlags     `embed:"" group:"nats"`
	Stale   time.Duration `name:"stale" default:"1m" help:"a site whose last record is older than this is offline"`
	LowDisk int64         `name:"low-disk" default:"268435456" placeholder:"BYTES" help:"less free than this on a site's ledger or store disk needs a person"`
	Lag     uint64        `name:"lag" default:"1000" help:"more messages than this not yet copied or applied is behind"`
	Version string        `name:"want-version" placeholder:"VERSION" help:"the release sites should run; another is behind (as 'jetledger version' of the sites says its module version)"`
	jsonFlag
}

func (c *fleetCmd) Run(inv *invocation) error {
	if c.Stale == 0 {
		return usagef("--stale 0: want a positive duration")
	}
	return withHub(inv, c.NATS, func(ctx context.Context, js jetstream.JetStream) error {
		return c.list(ctx, js, inv)
	})
}

func (c *fleetCmd) list(ctx context.Context, js jetstream.JetStream, inv *invocation) error {
	sites, err := fleet.List(ctx, js, fleet.ListConfig{Stale: c.Stale, LowDisk: c.LowDisk, Lag: c.Lag, Version: c.Version})
	if errors.Is(err, fleet.ErrInvalidConfig) {
		return usagef("--stale %s, --low-disk %d: want a positive duration and bytes of 0 or more", c.Stale, c.LowDisk)
	} else if err != nil {
		return err
	}
	if c.JSON {
		err = printJSON(inv.stdout, sites)
	} else {
		err = fleet.WriteTable(inv.stdout, sites)
	}
	return cmp.Or(err, fleet.NeedPerson(sites))
}

type hubCmd struct {
	NATS       natsFlags `embed:"" group:"nats"`
	Domain     string    `name:"domain" required:"" placeholder:"NAME" help:"the site's JetStream domain (its run --edge-domain)"`
	Effects    string    `name:"effects-stream" placeholder:"NAME" help:"the site's effects stream (its run --effects-stream), for the hub to source; none: the site sends no effects up"`
	HubEffects string    `name:"hub-effects-stream" default:"${hub_effects}" placeholder:"NAME" help:"the hub's stream of every site's effects"`
}

func (c *hubCmd) Run(inv *invocation) error {
	return withHub(inv, c.NATS, func(ctx context.Context, js jetstream.JetStream) error {
		return c.add(ctx, js, inv)
	})
}

func (c *hubCmd) add(ctx context.Context, js jetstream.JetStream, inv *invocation) error {
	did, err := fleet.AddSite(ctx, js, fleet.Site{Domain: c.Domain, Effects: c.Effects, HubEffects: c.HubEffects})
	if errors.Is(err, fleet.ErrInvalidSite) {
		return usageError{err}
	}
	for _, line := range did {
		fmt.Fprintln(inv.stdout, line)
	}
	if err == nil && len(did) == 0 {
		fmt.Fprintln(inv.stdout, "nothing to do: the hub has what site "+c.Domain+" needs")
	}
	return err
}

// withHub runs f with a client of the hub n names, for 30 s at most.
func withHub(inv *invocation, n natsFlags, f func(context.Context, jetstream.JetStream) error) error {
	ctx, cancel := context.WithTimeout(inv.ctx, 30*time.Second)
	defer cancel()
	nc, js, err := connect(ctx, n, quiet)
	if err != nil {
		return err
	}
	defer nc.Close()
	return f(ctx, js)
}

func (fleetCmd) Help() string { return fleetHelp }
func (hubCmd) Help() string   { return hubHelp }
