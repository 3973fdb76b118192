package service

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/jsretry"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/natsconn"
	"github.com/jetledger/jetledger/stream"
	"github.com/nats-io/nats.go/jetstream"
)

// runLeased runs cfg, a run on a server others may share, as the one
// consumer of its durable: it holds the partition's lease, the one owned
// runs hold, while it consumes. Two runs of one durable on two ledgers
// would each apply what the other had committed and not acknowledged; a
// second run waits for the lease through two TTLs (a run that stopped
// without giving it up, SIGKILLed, lets it go within one) and is then refused,
// naming the holder (ErrOwned). Without a changelog the lease is the
// commit path's fence (ledger.Config.Fence): a batch is committed only
// while it is held, and a run that another has taken it from stops.
func runLeased(ctx context.Context, cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return cfg.Say(err)
	}
	if cfg.Ledger.LeaveChangelog { // an owner's or standby's file: its lock, as theirs (ownedBegin)
		release, err := cfg.lockLedger()
		if err != nil {
			return cfg.Say(step(StepLedger, err))
		}
		defer release()
	}
	nc, js, err := cfg.Dial(ctx, *cfg.NATS)
	if err != nil {
		return cfg.Say(step(StepConnect, err))
	}
	defer nc.Close()
	// The lease bucket needs JetStream: a server without it is refused as
	// Start refuses it, not waited for.
	if err := stream.RequireJetStream(ctx, js); errors.Is(err, stream.ErrNoJetStream) {
		return cfg.Say(step(StepServer, &NoJetStreamError{URL: natsconn.RedactURL(cfg.NATS.URL), NATS: cfg.Names.Say("NATS"), Err: err}))
	}
	durable := cmp.Or(cfg.Consumer.Durable, consumer.DurableDefault)
	lease, err := takeLease(ctx, cfg, js, len(nc.Servers()), durable)
	if err == nil && cfg.Ledger.LeaveChangelog {
		if err = leaveRetrying(ctx, cfg, js, durable, lease); err != nil {
			lease.Release() // for the host that may own the partition, at once
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return cfg.Say(step(StepLedger, err))
	}
	cfg.leaseHeld = true // before the keeper's goroutine reads cfg
	cfg.Ledger.Fence = lease.Fence
	err, cause := runKept(ctx, cfg, func(ctx context.Context) error {
		err := keepPlain(ctx, cfg, lease)
		if err != nil {
			cfg.Logger.ErrorContext(ctx, "another run took the durable's lease: this run stops consuming", "stream", cfg.Stream.Name, "durable", durable, "err", err)
		}
		return err
	})
	if errors.Is(cause, changelog.ErrLeaseHeld) {
		return cfg.Say(step(StepLedger, errors.Join(cause, err)))
	}
	return err
}

// takeLease opens the durable's lease and takes it (waitLease). A key
// held by a run of another timing (a run restarted with another
// --deadline after a SIGKILL, or after a stop whose release was lost) is
// waited for as a held one is, through two of the holder's TTLs and 2 s;
// still held then, it is refused naming both timings. It was refused at
// once: the nemesis's restart with new flags exited 1 under CI's load.
func takeLease(ctx context.Context, cfg Config, js jetstream.JetStream, servers int, durable string) (*changelog.Lease, error) {
	ttl := LeaseTTL(cfg.Consumer.Plan.WithDefaults().AckWait())
	host, _ := os.Hostname()
	var lease *changelog.Lease
	err := jsretry.Do(ctx, cfg.Logger, "open the lease of "+durable, func(ctx context.Context) (err error) {
		lease, err = changelog.OpenLease(ctx, js, cfg.Stream.Name, durable, runName(host), ttl,
			leaseReplicas(cfg, servers), changelog.LeaseLogger(cfg.Logger))
		return err
	})
	// One lease polled throughout: it knows the bucket it opened, so a
	// bucket deleted and made again meanwhile is waited out, not taken.
	var te *changelog.TimingError
	var until time.Time
	for errors.As(err, &te) {
		if until.IsZero() {
			until = time.Now().Add(2*te.HolderTTL + 2*time.Second)
			cfg.Logger.InfoContext(ctx, "the durable's lease is held by a run of another timing: waiting until its holder renews it no more",
				"stream", cfg.Stream.Name, "holder", te.Holder, "holder_ttl", te.HolderTTL, "ttl", ttl)
		}
		if time.Now().After(until) {
			return nil, err
		}
		if !ackwait.Sleep(ctx, ttl/4) {
			return nil, ctx.Err()
		}
		err = jsretry.Do(ctx, cfg.Logger, "read the lease of "+durable, func(ctx context.Context) error {
			_, err := lease.Holder(ctx)
			return err
		})
	}
	if err != nil {
		return nil, err
	}
	return lease, waitLease(ctx, cfg, lease)
}

// waitLease takes the lease, waiting through two TTLs and 2 s while
// another holds it (a key's TTL counts in whole seconds, and a take whose
// answer was lost holds it for one); still held then, it is another live
// run's: refused.
func waitLease(ctx context.Context, cfg Config, lease *changelog.Lease) error {
	ttl := lease.TTL()
	until := time.Now().Add(2*ttl + 2*time.Second)
	said := false
	for {
		err := jsretry.Do(ctx, cfg.Logger, "take the lease", lease.Acquire)
		if !errors.Is(err, changelog.ErrLeaseHeld) || time.Now().After(until) {
			if errors.Is(err, changelog.ErrLeaseHeld) {
				return fmt.Errorf("%w: another run consumes this durable; one run per durable (a second would apply again what the first committed and has not acknowledged): stop that one, or give this one another durable", err)
			}
			return err
		}
		if !said {
			cfg.Logger.InfoContext(ctx, "the durable's lease is held: waiting until its holder renews it no more (a run stopped without giving it up lets it go within its TTL)",
				"stream", cfg.Stream.Name, "err", err, "ttl", ttl)
			said = true
		}
		if !ackwait.Sleep(ctx, ttl/4) {
			return ctx.Err()
		}
	}
}

// leaveRetrying is catchUpToLeave, tried again for a minute while
// JetStream cannot answer, or after the lease lapsed meanwhile (a server
// restarted, a long catch-up) and nobody else took it: taken again, the
// leave goes on from where the file stands.
func leaveRetrying(ctx context.Context, cfg Config, js jetstream.JetStream, durable string, lease *changelog.Lease) error {
	passing := func(err error) bool {
		return !errors.Is(err, changelog.ErrWaiting) && !errors.Is(err, changelog.ErrLeaseHeld) && (jsretry.Transient(err) || !lease.Held())
	}
	return forAMinute(ctx, cfg, "the ledger cannot leave its changelog", passing, func() error {
		if !lease.Held() {
			if err := jsretry.Do(ctx, cfg.Logger, "take the lease again", lease.Acquire); err != nil {
				return fmt.Errorf("the lease lapsed while the ledger left its changelog, and cannot be taken again: %w", err)
			}
		}
		return catchUpToLeave(ctx, cfg, js, durable, lease)
	})
}

// forAMinute runs try until it succeeds or fails for good (passing says
// no), ctx ends, or a minute has passed, waiting 100 ms doubling to 5 s
// between tries. It is for a leave, which refused for a passing fault (a
// leader being elected) is refused for nothing; each try goes on from
// where the file stands.
func forAMinute(ctx context.Context, cfg Config, what string, passing func(error) bool, try func() error) error {
	until := time.Now().Add(time.Minute)
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		err := try()
		if err == nil || !passing(err) || ctx.Err() != nil || time.Now().After(until) {
			return err
		}
		cfg.Logger.WarnContext(ctx, what+" now; trying again", "err", err)
		if !ackwait.Sleep(ctx, wait) {
			return ctx.Err()
		}
	}
}

// catchUpToLeave brings a ledger file kept by the partition's changelog
// up to its log's last entry before the run takes it out of the log
// (Config.LeaveChangelog): a copy behind its log would otherwise lose
// what it lacks, which the stream has acknowledged. The lease is held, so
// no owner writes the log meanwhile. A copy the log cannot bring up to
// date is refused; a log no longer there leaves the file as it is.
func catchUpToLeave(ctx context.Context, cfg Config, js jetstream.JetStream, durable string, lease *changelog.Lease) error {
	name, _ := changelog.Names(cfg.Stream.Name, durable)
	if _, err := js.Stream(ctx, name); errors.Is(err, jetstream.ErrStreamNotFound) {
		if err := leavesHoldingAcked(ctx, cfg, js, durable, nil, true); err != nil {
			return err
		}
		cfg.Logger.WarnContext(ctx, "the partition's changelog is gone: the ledger leaves it as it stands", "changelog", name, "db", cfg.DB)
		return nil
	}
	roles := changelog.NewRoles(cfg.Logger, nil)
	log, err := changelog.Ensure(ctx, js, changelog.Config{Stream: cfg.Stream.Name, Durable: durable, Logger: cfg.Logger, Roles: roles,
		Acked: ackedAfter(js, cfg.Stream.Name, durable)})
	if err != nil {
		return err
	}
	if err := log.Move(ctx, changelog.RoleLeaving, changelog.Facts{Lease: lease}); err != nil {
		return err
	}
	lcfg := cfg.Ledger
	lcfg.LeaveChangelog, lcfg.Changelog = false, nil
	st, err := ledger.Open(cfg.DB, lcfg)
	if err != nil {
		return err
	}
	defer st.Close()
	if pos, err := st.ChangelogPosition(ctx); err != nil || pos.Log != log.Instance() {
		// Not a copy of this log: nothing in it is this file's.
		return cmp.Or(err, leavesHoldingAcked(ctx, cfg, js, durable, st, false))
	}
	applied, last, err := catchUpRetrying(ctx, cfg, log, st)
	if err != nil {
		return fmt.Errorf("the ledger cannot leave its changelog yet: it stands at entry %d, its log at %d, and the log cannot bring it up to date (%w): run it with the standby setting until it holds the log's last entry, then leave", applied, last, err)
	}
	// A copy that lacks what another run applied out of the log would
	// split the partition's messages over two ledgers.
	if err := log.HoldsAcked(ctx, st, last); err != nil {
		return fmt.Errorf("the ledger cannot leave its changelog: %w", err)
	}
	cfg.Logger.InfoContext(ctx, "the ledger holds its changelog's last entry before it leaves it", "changelog", name, "db", cfg.DB, "entry", applied)
	return log.Move(ctx, changelog.RoleLeft, changelog.Facts{Lease: lease, CaughtUp: true}) // CatchUp returned: every whole entry is in the file
}

// leavesHoldingAcked refuses the leave of a ledger (st, or cfg.DB opened
// when nil) with no log to catch up with (deleted, or begun again from
// another file) that lacks a message the durable acknowledged: a copy
// behind the owner's, consuming on its own, would lose those messages.
// With the log gone, it also refuses a copy behind what the log's owner
// said its ledger held, as a begin from it is (changelog.ReadOwner).
func leavesHoldingAcked(ctx context.Context, cfg Config, js jetstream.JetStream, durable string, st *ledger.Store, gone bool) error {
	if st == nil {
		lcfg := cfg.Ledger
		lcfg.LeaveChangelog, lcfg.Changelog = false, nil
		var err error
		if st, err = ledger.Open(cfg.DB, lcfg); err != nil {
			return err
		}
		defer st.Close()
	}
	if gone {
		if err := notBehindOwner(ctx, cfg, js, durable, st); err != nil {
			return err
		}
	}
	seen, acked, err := changelog.LacksAcked(ctx, st, ackedAfter(js, cfg.Stream.Name, durable))
	if err != nil || acked == 0 {
		return err
	}
	return fmt.Errorf("the ledger cannot leave its changelog: %w: it holds messages through stream sequence %d, its changelog cannot bring it up to date, and it lacks a message the partition's durable acknowledged (the first it lacks is at %d): another host's copy holds it; start that host (it begins a new log), or have a person settle the partition", changelog.ErrWaiting, seen, acked)
}

// notBehindOwner refuses the leave of st, a copy of a log that is gone,
// behind what that log's owner said its ledger held.
func notBehindOwner(ctx context.Context, cfg Config, js jetstream.JetStream, durable string, st *ledger.Store) error {
	pos, err := st.ChangelogPosition(ctx)
	if err != nil || pos.Log == "" {
		return err
	}
	owner, err := changelog.ReadOwner(ctx, js, cfg.Stream.Name, durable)
	if err != nil || !owner.Ahead(pos) {
		return err
	}
	return fmt.Errorf("the ledger cannot leave its changelog: %w: it holds entry %d of %s, whose owner %s said its ledger held entry %d, and that log is gone: what the entries between did (sends, a person's actions) is in that host's file alone; leave from that file, or start that host (it begins a new log)",
		changelog.ErrWaiting, pos.Seq, pos.Log, owner.Owner, owner.Seq)
}

// catchUpRetrying is log.CatchUp of st, tried again for a minute while
// JetStream cannot answer.
func catchUpRetrying(ctx context.Context, cfg Config, log *changelog.Log, st *ledger.Store) (applied, last uint64, err error) {
	err = forAMinute(ctx, cfg, "the ledger cannot catch up with its changelog before it leaves it", jsretry.Transient, func() error {
		applied, last, err = log.CatchUp(ctx, st)
		return err
	})
	return applied, last, err
}

// keepPlain renews a plain run's lease every quarter TTL until ctx ends
// (then gives it up), and returns ErrLeaseHeld once another run holds it.
// A lease that lapsed while the server could not be reached (a network
// partition, which stops the consumer too) is taken again when it can be:
// with no changelog to fence, what matters is that two runs never consume
// the durable together for longer than a renewal takes to find out.
func keepPlain(ctx context.Context, cfg Config, lease *changelog.Lease) error {
	ttl := lease.TTL()
	defer lease.Release()
	said := false
	for ackwait.Sleep(ctx, ttl/4) {
		rctx, cancel := context.WithTimeout(ctx, ttl/4)
		err := lease.Renew(rctx)
		if errors.Is(err, changelog.ErrLeaseLost) {
			err = lease.Acquire(rctx)
		}
		cancel()
		switch {
		case err == nil:
			if said {
				cfg.Logger.InfoContext(ctx, "the durable's lease is held again", "stream", cfg.Stream.Name)
			}
			said = false
		case errors.Is(err, changelog.ErrLeaseHeld):
			return err
		case errors.As(err, new(*changelog.TimingError)):
			// A run of other flags took the key this run's hold lapsed from
			// (a pause, a partition, the key deleted): it is held.
			return fmt.Errorf("%w: %w", changelog.ErrLeaseHeld, err)
		case !said && ctx.Err() == nil:
			cfg.Logger.WarnContext(ctx, "the durable's lease cannot be renewed now; trying again", "stream", cfg.Stream.Name, "err", err)
			said = true
		}
	}
	return nil
}

// leaseReplicas is the lease bucket's replicas when a plain run makes it:
// the stream's, or on a cluster (servers the client knows of) up to 3,
// so that the lease, which every run now needs to consume, is not on one
// server of a cluster whose stream outlives it.
func leaseReplicas(cfg Config, servers int) int {
	return max(cfg.Stream.Limits.Replicas, min(servers, 3), 1)
}

// runName names this run in a lease: host, process and a random tag, as
// two runs of one process (a Go program's, a test's) must differ: a lease
// that names this run is taken to be its own.
func runName(host string) string {
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), rand.Text()[:6])
}
