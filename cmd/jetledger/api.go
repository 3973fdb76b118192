package main

import (
	"cmp"
	"context"
	"time"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/internal/adminctl"
	"github.com/nats-io/nats.go"
)

// apiFlags send a command through the admin API of the run that owns the
// ledger, anywhere its NATS reaches, instead of opening --db.
type apiFlags struct {
	NATS natsFlags `embed:"" group:"api" kong:"set='nats_url=',set='nats_help=act through the admin API of the run that owns the ledger, reached at this NATS server (or --context), instead of --db'"`
	apiTarget
}

// apiTarget names the run whose API a command asks, and how.
type apiTarget struct {
	Site      string        `name:"site" group:"api" help:"with --nats: the site (edge domain) of the run to ask; - for a run that is no edge"`
	Stream    string        `name:"api-stream" group:"api" help:"with --nats: the stream of the run to ask"`
	Durable   string        `name:"durable" group:"api" help:"with --nats: the durable of the run to ask"`
	Partition int           `name:"partition" default:"-1" group:"api" help:"with --nats: the partition of the run to ask"`
	Standby   bool          `name:"standby" group:"api" help:"with --nats: ask a standby's copy (reads only)"`
	Who       string        `name:"who" group:"api" help:"with --nats: who acts, as the audit records it (default $USER@host)"`
	Timeout   time.Duration `name:"api-timeout" default:"1m" group:"api" help:"with --nats: how long to wait for the run's answer (an action on 20 000 rows takes seconds); an action not answered may still have been taken: list the rows again"`
}

// remote says whether the command goes through the API.
func (a apiFlags) remote() bool { return a.NATS.URL != "" }

// with connects, finds the one run's API the flags name, and runs f.
func (a apiFlags) with(inv *invocation, f func(nc *nats.Conn, addr admin.Address) error) error {
	// Bounded for f too, which reads inv.ctx: a run that took the request
	// and died or was paused never answers.
	ctx, cancel := context.WithTimeout(inv.ctx, a.Timeout)
	defer cancel()
	outer := inv.ctx
	inv.ctx = ctx
	defer func() { inv.ctx = outer }()
	nc, _, err := connect(inv.ctx, a.NATS, quiet)
	if err != nil {
		return err
	}
	defer nc.Close()
	addr, err := adminctl.Resolve(inv.ctx, nc, a.NATS.URL, adminctl.Target{Site: a.Site, Stream: a.Stream, Durable: a.Durable, Partition: a.Partition, Standby: a.Standby})
	if err != nil {
		return err
	}
	return f(nc, addr)
}

// bulk runs b through the API (adminctl.Do), as --who.
func (a apiFlags) bulk(inv *invocation, asJSON bool, b adminctl.Bulk) error {
	b.Act.Who = cmp.Or(a.Who, adminctl.Who())
	return a.with(inv, func(nc *nats.Conn, addr admin.Address) error {
		return adminctl.Do(inv.ctx, nc, addr, b, asJSON, inv.stdout)
	})
}
