package service

import (
	"cmp"
	"context"
	"sync"
	"time"

	"github.com/jetledger/jetledger/fleet"
	"github.com/jetledger/jetledger/health"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/node"
	"github.com/jetledger/jetledger/status"
	"github.com/prometheus/client_golang/prometheus"
)

// effectsStream is the run's effects stream at an edge, "" without one.
func (c *Config) effectsStream() string {
	if c.Effects == nil {
		return ""
	}
	return c.Effects.Stream
}

// fleetRecord gathers the site's record for the hub (fleet.Reporter)
// from what jetledger status reads (status.Read): what it cannot read is
// said in Problems, never a reason to send none.
func (s *Service) fleetRecord(started time.Time) func(context.Context) fleet.Record {
	c := &s.cfg
	return func(ctx context.Context) fleet.Record {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		r := fleet.Record{Version: c.Stream.Version, Started: started, Stream: c.Stream.Name, LedgerFree: -1, StoreFree: -1}
		rep, err := status.Read(ctx, s.js, s.st, status.Config{Stream: c.Stream.Name, Durable: c.Consumer.Durable, Plan: c.Consumer.Plan,
			Effects: c.effectsStream(), Logger: s.log})
		if err != nil {
			rep.Problems = append(rep.Problems, err)
		}
		for _, p := range rep.Problems {
			r.Problems = append(r.Problems, p.Error())
		}
		if cs := rep.Consumer; cs != nil {
			r.AppliedSeq, r.Pending = cs.AckFloorSeq, cs.Pending+uint64(cs.AckPending)
		}
		if l := rep.Ledger; l != nil {
			r.AppliedAt, r.DeadLetters, r.Conflicts = l.Newest, l.DeadLetters, l.Conflicts
		}
		if n := rep.Outbox; n != nil {
			r.Queued, r.Review = n[ledger.StatusQueued]+n[ledger.StatusSending], n[ledger.StatusReview]
		}
		if rep.Hub != nil {
			r.Link = *rep.Hub
		}
		r.Attention = rep.Attention
		if r.Attention == nil {
			r.Attention = []health.Need{} // none: judged by it, not by the counts of an earlier version
		}
		if free, ok := ledger.DiskFree(c.DB); ok {
			r.LedgerFree = free
		}
		if free, ok := ledger.DiskFree(s.node.StoreDir()); ok {
			r.StoreFree = free
		}
		return r
	}
}

// reportToHub sends the site's record to the hub until ctx ends.
func (s *Service) reportToHub(ctx context.Context) {
	hubDomain := cmp.Or(s.cfg.Node.Leaf.HubDomain, node.DefaultHubDomain)
	r := &fleet.Reporter{Site: s.cfg.site(), HubDomain: hubDomain, Conn: s.nc, Link: s.node.Link, Gather: s.fleetRecord(time.Now()), Logger: s.log}
	if s.cfg.Hub != nil {
		r.Interval = s.cfg.Hub.Report
	}
	r.Run(ctx)
}

// hubProbe is /healthz's "hub": the link down degrades, never fails.
func (s *Service) hubProbe() health.Probe {
	return health.Link(func() (bool, string) {
		l := s.node.Link()
		return l.Up, l.Reason
	})
}

// sourcing reads the copy's sourcing from the hub (fleet.ReadSourcing)
// on the edge's own server, at most once a second.
func (s *Service) sourcing() func() fleet.Link {
	var mu sync.Mutex
	var at time.Time
	var last fleet.Link
	return func() fleet.Link {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(at) > time.Second {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			l, err := fleet.ReadSourcing(ctx, s.js, s.cfg.Stream.Name, s.cfg.effectsStream())
			cancel()
			if err == nil {
				last, at = l, time.Now()
			}
		}
		return last
	}
}

// sourcingProbe is /healthz's "sourcing" at an edge: a copy that cannot
// source from its hub (its stream there deleted) needs a person for as
// long as it fails; healthy, as the edge works on with what it holds.
func sourcingProbe(read func() fleet.Link) health.Probe {
	return health.Probe{Name: "sourcing", Check: func(context.Context) error {
		if needs := read().Needs(); len(needs) > 0 {
			return &health.AttentionError{Needs: needs}
		}
		return nil
	}}
}

// hubGauges are the edge's link metrics: up, seconds since it last came
// up, the copy's sourcing lag and the effects not yet at the hub, read
// by read.
func (s *Service) hubGauges(read func() fleet.Link) []prometheus.Collector {
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	return []prometheus.Collector{
		gauge("jetledger_hub_link_up", "1 while the edge's leaf link to its hub is up.", func() float64 {
			if s.node.Link().Up {
				return 1
			}
			return 0
		}),
		gauge("jetledger_hub_link_seconds_since_connect", "Seconds since the hub link last came up; -1 if it has not since the start.", func() float64 {
			if c := s.node.Link().Connected; !c.IsZero() {
				return time.Since(c).Seconds()
			}
			return -1
		}),
		gauge("jetledger_hub_sourcing_lag_messages", "The hub's messages for this site the local stream has not copied, as last heard.", func() float64 { return float64(read().Lag) }),
		gauge("jetledger_effects_not_at_hub", "Effects in the local effects stream the hub has not taken yet.", func() float64 { return float64(read().EffectsNotAtHub) }),
		gauge("jetledger_hub_sourcing_failing", "1 while the local stream cannot source from the hub (the server's error: its stream there deleted, a permission).", func() float64 {
			if read().SourceError != "" {
				return 1
			}
			return 0
		}),
	}
}
