package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/ledger"
)

// Owner keeps a run's ledger on more than one host (Config.Owner).
type Owner struct {
	// Standby waits, while another process owns the partition, as its
	// standby: a copy of the ledger kept current from the changelog, which
	// takes the partition over when the owner is lost, and goes back to
	// standing by when it loses it. Default false: a partition owned by
	// another is refused (ErrOwned).
	Standby bool
	// Name is this process in the lease, as the others' logs say it.
	// Default host name and process id.
	Name string
	// Replicas of the changelog, the lease bucket and the snapshots.
	// Default Stream.Limits.Replicas, at least 1.
	Replicas int
	// SnapshotInterval is how often the owner snapshots the ledger, which
	// bounds the changelog a new standby applies. Default 10 minutes.
	SnapshotInterval time.Duration
}

// SnapshotIntervalDefault is Owner.SnapshotInterval's default.
const SnapshotIntervalDefault = 10 * time.Minute

// ErrOwned: another process owns the partition and this run is not a
// standby. The error names the owner.
var ErrOwned = changelog.ErrLeaseHeld

// LeaseTTL is the partition lease's TTL for a consumer's AckWait: a
// second longer, so an owner that stopped renewing has its unacknowledged
// deliveries handed out again by the time another owns the partition.
func LeaseTTL(ackWait time.Duration) time.Duration { return ackWait + time.Second }

// runOwned runs cfg as its partition's owner, or stands by first.
func runOwned(ctx context.Context, cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	o := *cfg.Owner
	if o.Name == "" {
		host, _ := os.Hostname()
		o.Name = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	o.Replicas = max(cmp.Or(o.Replicas, cfg.Stream.Limits.Replicas), 1)
	o.SnapshotInterval = cmp.Or(o.SnapshotInterval, SnapshotIntervalDefault)
	nc, js, err := cfg.Dial(ctx, *cfg.NATS)
	if err != nil {
		return step(StepConnect, err)
	}
	defer nc.Close()
	ttl := LeaseTTL(cfg.Consumer.Plan.WithDefaults().AckWait())
	var log *changelog.Log
	var lease *changelog.Lease
	// A cluster electing a leader, or just started, does not answer at
	// once: waited for, as the consumer's own calls are.
	retry := ackwait.Backoff{Base: 250 * time.Millisecond, Max: 5 * time.Second}
	for n := 1; ; n++ {
		log, err = changelog.Ensure(ctx, js, changelog.Config{Stream: cfg.Stream.Name, Durable: cfg.Consumer.Durable, Replicas: o.Replicas, Logger: cfg.Logger})
		if err == nil {
			lease, err = changelog.OpenLease(ctx, js, cfg.Stream.Name, cfg.Consumer.Durable, o.Name, ttl, o.Replicas)
		}
		if err == nil || errors.Is(err, changelog.ErrInvalidConfig) || !retry.Wait(ctx, n) {
			break
		}
		cfg.Logger.WarnContext(ctx, "the changelog or the lease bucket does not answer yet; retrying", "err", err)
	}
	if err != nil {
		return step(StepLedger, err)
	}
	for {
		err := lease.Acquire(ctx)
		if errors.Is(err, changelog.ErrLeaseHeld) && o.Standby {
			err = changelog.Standby(ctx, log, lease, cfg.DB, cfg.Ledger, nil)
		}
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return step(StepLedger, err)
		}
		err = runOwner(ctx, cfg, o, log, lease)
		if ctx.Err() != nil {
			return err
		}
		if (errors.Is(err, changelog.ErrLeaseLost) || errors.Is(err, ledger.ErrNotChangelogOwner)) && o.Standby {
			cfg.Logger.WarnContext(ctx, "lost the partition's ownership: it commits and acknowledges nothing more here; standing by",
				"stream", cfg.Stream.Name, "durable", cfg.Consumer.Durable, "err", err)
			continue
		}
		return err
	}
}

// runOwner runs the partition while the lease is held.
func runOwner(ctx context.Context, cfg Config, o Owner, log *changelog.Log, lease *changelog.Lease) error {
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		if err := lease.Keep(runCtx); err != nil {
			stop(err) // the consumer stops fetching before the lease can pass
		}
	}()
	cfg.Owner = nil
	cfg.Ledger.Changelog = log
	var snapshots sync.WaitGroup // stopped with runCtx
	defer snapshots.Wait()
	cfg.afterOpen = func(ctx context.Context, st *ledger.Store) error {
		if err := changelog.Own(ctx, log, lease, st); err != nil {
			return err
		}
		// A standby needs a snapshot to start from: one that fails now is
		// tried again every few seconds until one is stored.
		_, serr := log.Snapshot(ctx, st)
		cfg.Logger.InfoContext(ctx, "owning the partition: its changes go to its changelog before each commit",
			"stream", cfg.Stream.Name, "durable", cfg.Consumer.Durable, "owner", o.Name, "role", "owner")
		snapshots.Go(func() {
			for {
				wait := o.SnapshotInterval
				if serr != nil {
					if runCtx.Err() == nil {
						cfg.Logger.WarnContext(runCtx, "snapshot of the ledger failed; tried again", "err", serr)
					}
					wait = min(wait, 5*time.Second)
				}
				if !ackwait.Sleep(runCtx, wait) {
					return
				}
				_, serr = log.Snapshot(runCtx, st)
			}
		})
		return nil
	}
	err := Run(runCtx, cfg)
	stop(nil)
	<-kept
	if cause := context.Cause(runCtx); errors.Is(cause, changelog.ErrLeaseLost) {
		return errors.Join(cause, err)
	}
	return err
}
