package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/jetledger/jetledger/admin"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/jsretry"
	"github.com/jetledger/jetledger/consumer/partition"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/node"
	"github.com/jetledger/jetledger/sqlhandler"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
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
	// Default host name, process id and a random tag.
	Name string
	// Replicas of the changelog, the lease bucket and the snapshots.
	// Default Stream.Limits.Replicas, at least 1.
	Replicas int
	// SnapshotInterval is how often the owner snapshots the ledger, which
	// bounds the changelog a new standby applies. Default 10 minutes.
	SnapshotInterval time.Duration
	// MayTake, if set, is asked before a standby takes a lease nobody
	// holds (changelog.Config.MayTake): a group's member owns only what
	// it is assigned. Default nil: any free lease is taken.
	MayTake func() bool
	// Observe, if set, is told each role the run moves to and each lag
	// its copy reports: a group's member says which copies are ready to
	// take over. Default nil.
	Observe func(role changelog.Role, lag uint64)
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

// runOwned runs cfg as its partition's owner, or stands by first. Its
// own errors are said here; those of the Service it runs while owning
// are said by it.
func runOwned(ctx context.Context, cfg Config) error {
	cfg, release, err := cfg.ownedBegin()
	if err != nil {
		return err
	}
	defer release()
	o := ownerDefaults(cfg)
	if closeMetrics, err := cfg.listenMetrics(); err != nil {
		return err
	} else if closeMetrics != nil {
		defer closeMetrics()
	}
	nc, js, err := cfg.Dial(ctx, *cfg.NATS)
	if err != nil {
		return cfg.Say(step(StepConnect, err))
	}
	defer nc.Close()
	watch, lag, unwatch, err := watchOwned(&cfg, nc)
	if err != nil {
		return step(StepMetrics, err)
	}
	defer unwatch()
	log, lease, err := openOwned(ctx, cfg, o, js, watch)
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return cfg.Say(step(StepLedger, err))
	}
	// A key kept for the take after a lost log (Lease.Retain) goes if a
	// stop comes first: the other host takes the partition at once.
	defer lease.Release()
	for {
		err := acquire(ctx, cfg, o, lease)
		if err == nil {
			err = prepareOwned(ctx, cfg, o, log, lease)
		}
		if (errors.Is(err, changelog.ErrLeaseHeld) || errors.Is(err, changelog.ErrWaiting)) && o.Standby {
			err = changelog.Standby(ctx, log, lease, cfg.DB, cfg.Ledger, lag)
		}
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, changelog.ErrLogGone) && o.Standby {
			if log, err = reopenLog(ctx, cfg, o, js, watch, err); err == nil {
				continue
			}
		}
		if err != nil {
			return cfg.Say(step(StepLedger, err))
		}
		err = runOwner(ctx, cfg, o, log, lease)
		settleLost(ctx, cfg, log, err)
		if ctx.Err() != nil {
			return stopped(ctx, cfg, o, err)
		}
		if errors.Is(err, changelog.ErrWaiting) && o.Standby {
			continue // the take-over gave the lease up (changelog.Own): its copy's step is decided again, a wait
		}
		if !lostOwnership(err) && !connectFailed(err) {
			return err
		}
		lost := err
		sayLost(ctx, cfg, o, err)
		if merr := log.Move(ctx, changelog.RoleFenced, changelog.Facts{}); merr != nil || !o.Standby {
			return cmp.Or(merr, err)
		}
		// The log may be gone (deleted): the next look is at the one
		// there now, begun again if need be, from the fullest copy.
		if log, err = reopenLog(ctx, cfg, o, js, watch, err); err == nil {
			err = log.Move(ctx, changelog.RoleNew, changelog.Facts{})
		}
		if err != nil {
			return cfg.Say(step(StepLedger, err))
		}
		if connectFailed(lost) && !ackwait.Sleep(ctx, redialPause) {
			return nil // stopped while it paused: nothing of the partition held
		}
	}
}

// redialPause is how long an owner whose own connection failed as its run
// began waits before it takes the partition again: a server that refuses
// new connections (at its limit, a firewall) while the run's others live
// had it spin 15-19 rounds a second, each a lease write and a log line
// (helper-25).
const redialPause = 2 * time.Second

// ownedBegin is cfg with its defaults and schema (SchemaFile: the standby
// runs it on its copy too), and the lock of its ledger file, which
// release gives back: two runs of a partition on one host's file would
// restore, set aside and open it under each other (helper-24's twins).
func (cfg Config) ownedBegin() (Config, func(), error) {
	cfg, err := cfg.withDefaults()
	if err == nil {
		err = cfg.load()
	}
	if err != nil {
		return cfg, nil, cfg.Say(err)
	}
	release, err := cfg.lockLedger()
	if err != nil {
		return cfg, nil, cfg.Say(step(StepLedger, err))
	}
	return cfg, release, nil
}

// lockLedger takes the lock of cfg.DB's lock file, unless the run of its
// partitions took it already (lockPartitions).
func (cfg Config) lockLedger() (func(), error) {
	if cfg.ledgerLocked {
		return func() {}, nil
	}
	return node.LockPath(cfg.DB + LedgerLockSuffix)
}

// lockPartitions takes the locks of the ledger files of parts that an
// owned or leaving run opens, in the partitions' order, all or none: two
// processes each taking its own partitions' locks could each take one and
// both be refused the other, leaving no run of either file (helper-25).
func lockPartitions(cfg Config, parts []int) (func(), error) {
	var held []func()
	release := func() {
		for _, r := range held {
			r()
		}
	}
	if !locksLedgers(cfg) {
		return release, nil
	}
	for _, i := range slices.Sorted(slices.Values(parts)) {
		r, err := node.LockPath(partition.Ledger(cfg.DB, i) + LedgerLockSuffix)
		if err != nil {
			release()
			return nil, fmt.Errorf("partition %d: %w", i, err)
		}
		held = append(held, r)
	}
	return release, nil
}

// locksLedgers says whether a run of cfg's partitions holds their ledger
// files' locks: an owned run's, or a leaving one's (lockPartitions); a
// partition then need not take its own (Partition.locked).
func locksLedgers(cfg Config) bool { return cfg.Owner != nil || cfg.Ledger.LeaveChangelog }

// LedgerLockSuffix names the file beside an owned run's ledger whose lock
// the run holds while it runs.
const LedgerLockSuffix = ".lock"

// watchOwned serves cfg.Metrics for an owned run (serveOwned) and
// returns what each log the run opens reports to: its waits, and its role,
// kept across logs by one table of moves (changelog.Roles), and the
// standby's lag. unwatch says the run stopped and stops serving.
func watchOwned(cfg *Config, nc *nats.Conn) (watch changelog.Config, lag func(uint64), unwatch func(), err error) {
	var observe func(changelog.Role)
	closeMetrics := func() {}
	if cfg.Metrics != nil {
		m, err := serveOwned(*cfg, nc)
		if err != nil {
			return watch, nil, nil, err
		}
		closeMetrics = m.close
		cfg.metricsTo, cfg.collectors, lag = m.mount, []prometheus.Collector{m.owner, m.lag, m.waiting, m.role}, m.setLag
		watch.Waiting, observe = m.setWaiting, m.setRole
	}
	if o := cfg.Owner; o != nil && o.Observe != nil {
		observe, lag = observed(o.Observe, observe, lag)
	}
	watch.Roles = changelog.NewRoles(cfg.Logger, observe)
	return watch, lag, func() {
		watch.Roles.Move(context.Background(), changelog.RoleStopped, changelog.Facts{}) //nolint:errcheck // always allowed
		closeMetrics()
	}, nil
}

// observed are role and lag (each nil or the metrics') told to o too.
func observed(o func(changelog.Role, uint64), role func(changelog.Role), lag func(uint64)) (func(changelog.Role), func(uint64)) {
	var mu sync.Mutex
	var last changelog.Role
	var behind uint64
	return func(r changelog.Role) {
			if role != nil {
				role(r)
			}
			mu.Lock()
			last = r
			n := behind
			mu.Unlock()
			o(r, n)
		}, func(n uint64) {
			if lag != nil {
				lag(n)
			}
			mu.Lock()
			behind = n
			r := last
			mu.Unlock()
			o(r, n)
		}
}

// stopped is the outcome of an owner's run told to stop that ended with
// err: a clean stop when it was stopped while it started, or when the
// batch in hand was refused by the log (another owner wrote it, or this
// one's own entry whose answer was lost): that batch is not acknowledged
// and goes to the partition's next owner, so nothing is lost.
func stopped(ctx context.Context, cfg Config, o Owner, err error) error {
	switch {
	case errors.Is(err, context.Canceled):
		return nil
	case lostOwnership(err):
		cfg.Logger.WarnContext(ctx, "lost the partition's ownership while stopping: the batch in hand is not acknowledged, and goes to the partition's next owner",
			"stream", cfg.Stream.Name, "durable", cfg.Consumer.Durable, "owner", o.Name, "role", "lost", "err", err)
		return nil
	}
	return err
}

// lostOwnership says whether err, a run's end, is the loss of its
// partition: the lease, the log's fence, or the log itself.
func lostOwnership(err error) bool {
	return errors.Is(err, changelog.ErrLeaseLost) || errors.Is(err, ledger.ErrNotChangelogOwner) || errors.Is(err, changelog.ErrLogGone)
}

// connectFailed says whether err, an owner's run's end, is its own
// connection failing as it began: this process reached the server before
// (its lease, its log), so it is the server's passing trouble (a stall, an
// election), and a standby stands by and takes the partition again rather
// than ending the process, and its other partitions, with it.
func connectFailed(err error) bool {
	var se *StepError
	return errors.As(err, &se) && se.Step == StepConnect
}

// sayLost logs that the partition's ownership was lost, and what comes next.
func sayLost(ctx context.Context, cfg Config, o Owner, err error) {
	next := "stopping (with " + cfg.Names.Say("Owner.Standby") + " it would stand by instead)"
	if o.Standby {
		next = "standing by"
	}
	cfg.Logger.WarnContext(ctx, "lost the partition's ownership: this process commits and acknowledges nothing more of it; "+next,
		"stream", cfg.Stream.Name, "durable", cfg.Consumer.Durable, "owner", o.Name, "role", "lost", "err", err)
}

// settleLost settles the file of a run that lost its partition (err;
// changelog.Log.Settle): its last batch, committed while its entry was on
// its way, is undone now if the log lacks the entry, so the file holds
// nothing the log lacks as this process leaves it or stands by. Also when
// the process stops with it (another partition's loss, a signal): it may
// not Prepare this file again. With the log out of reach, the next Prepare
// does it.
func settleLost(ctx context.Context, cfg Config, log *changelog.Log, err error) {
	if !lostOwnership(err) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := log.Settle(ctx, cfg.DB); err != nil {
		cfg.Logger.WarnContext(ctx, "the ledger's last batch cannot be settled against its log now; its next start does it", "db", cfg.DB, "err", err)
	}
}

// reopenLog opens the partition's changelog again after why: a log
// deleted since is made anew (another instance), which the lifecycle
// (changelog.Log.Prepare) lets only a copy holding all the old one's
// snapshot and acknowledged messages begin.
func reopenLog(ctx context.Context, cfg Config, o Owner, js jetstream.JetStream, watch changelog.Config, why error) (*changelog.Log, error) {
	if errors.Is(why, changelog.ErrLogGone) {
		cfg.Logger.WarnContext(ctx, "the partition's changelog stream is gone (deleted): opening it again", "stream", cfg.Stream.Name, "durable", cfg.Consumer.Durable, "err", why)
	}
	log, _, err := openOwned(ctx, cfg, o, js, watch)
	return log, err
}

// prepareOwned brings the ledger file, with the lease just taken, to
// where it may own the log (changelog.Log.Prepare): restored from the
// snapshot if it is behind it. A file that may neither follow the log nor
// begin it gives the lease up at once, for a host with a fuller copy, and
// the error (ErrWaiting) says why.
func prepareOwned(ctx context.Context, cfg Config, o Owner, log *changelog.Log, lease *changelog.Lease) error {
	// The lease is renewed meanwhile: a restore, or a snapshot bucket
	// made on a fresh cluster, can outlast its TTL.
	err := holding(ctx, lease, func() error {
		return jsretry.Do(ctx, cfg.Logger, "prepare the ledger of "+cfg.Consumer.Durable, func(ctx context.Context) error {
			_, err := log.Prepare(ctx, cfg.DB)
			return err
		})
	})
	if err != nil {
		lease.Release()
		if !o.Standby {
			return fmt.Errorf("%w (the lease was given up)", err)
		}
		cfg.Logger.WarnContext(ctx, "the partition's lease was free, but this host's copy may not own it: standing by", "stream", cfg.Stream.Name, "durable", cfg.Consumer.Durable, "err", err)
	}
	return err
}

// copySchema runs the run's schema on a standby's copy, and makes the
// handler's tables (changelog.Config.Schema).
func copySchema(cfg Config) func(context.Context, *ledger.Store) error {
	return func(ctx context.Context, st *ledger.Store) error {
		if cfg.SQL.Schema != "" {
			if _, err := st.Exec(ctx, cfg.SQL.Schema); err != nil {
				return err
			}
		}
		return sqlhandler.CopyTables(ctx, st)
	}
}

// standbyAPI serves the admin API of a standby's copy while it follows
// (changelog.Config.Copy): reads of the copy; actions refused, naming the
// owner, the lease's holder.
func standbyAPI(cfg Config, js jetstream.JetStream, lease **changelog.Lease) func(context.Context, *ledger.Store) func() {
	return func(_ context.Context, st *ledger.Store) func() {
		adm, err := admin.Serve(admin.Config{Conn: js.Conn(), Store: st, JetStream: js, Logger: cfg.Logger, Version: cfg.Stream.Version,
			Address: admin.Address{Site: cfg.site(), Stream: cfg.Stream.Name, Durable: cfg.Consumer.Durable},
			Standby: func(ctx context.Context) (string, error) { return (*lease).Holder(ctx) }})
		if err != nil {
			cfg.Logger.Warn("the standby's admin API is not served: it follows without it", "err", err)
			return func() {}
		}
		return func() { adm.Stop() } //nolint:errcheck // stopping
	}
}

// holding runs f while renewing lease every quarter of its TTL.
func holding(ctx context.Context, lease *changelog.Lease, f func() error) error {
	ttl := lease.TTL()
	hctx, stop := context.WithCancel(ctx)
	var renewals sync.WaitGroup
	renewals.Go(func() {
		for ackwait.Sleep(hctx, ttl/4) {
			rctx, cancel := context.WithTimeout(hctx, ttl/4)
			lease.Renew(rctx) //nolint:errcheck // Held says what came of it: Own checks it
			cancel()
		}
	})
	defer renewals.Wait()
	defer stop()
	return f()
}

// ackedAfter reads, for the lifecycle, a message the partition's durable
// has acknowledged that a copy lacks, the copy having seen messages
// through stream sequence seen and holding what holds says: its stream
// sequence, or 0 when there is none (or no durable yet). The ack floor
// alone is not it: it moves over the other partitions' messages too, and
// pipelined batches are acknowledged above it. Acks above the floor are
// not listed by the server, but counted: every message of the filter
// the stream holds in (floor, delivered] that was not acknowledged is
// pending (a NAK keeps it so), so when more of them than acks pending are
// missing from the copy, one of those missing was acknowledged, and the
// first missing stands for it (a nemesis schedule lost one so). Those the
// copy misses below seen count as well (failing ones, retried: an attack
// hid acknowledged ones behind them), at most holeScanLimit of them are
// read. Not on a durable with a server-side MaxDeliver: there the floor
// alone counts.
func ackedAfter(js jetstream.JetStream, stream, durable string) func(context.Context, uint64, changelog.Holds) (uint64, error) {
	return func(ctx context.Context, seen uint64, holds changelog.Holds) (uint64, error) {
		c, err := js.Consumer(ctx, stream, durable)
		if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		info := c.CachedInfo()
		s, err := js.Stream(ctx, stream)
		if err != nil {
			return 0, err
		}
		next := filteredNext(s, append([]string{info.Config.FilterSubject}, info.Config.FilterSubjects...))
		floor := info.AckFloor.Stream
		if floor > seen {
			if first, err := firstUnheld(ctx, next, holds, seen, floor); err != nil || first != 0 {
				return first, err
			}
		}
		if info.Config.MaxDeliver > 0 {
			// A durable made with a server-side MaxDeliver (jetledger warns
			// of it): the server drops a message at its last delivery, and
			// it is then neither pending nor acknowledged. Above the floor
			// the count cannot tell it from an acknowledged one, and a copy
			// would wait for ever (an attack SIGKILLed the owner holding
			// messages at their last delivery).
			return 0, nil
		}
		from := floor
		if seen > floor && seen-floor > holeScanLimit {
			from = seen // too many below to read at each decision
		}
		return ackedUnheld(ctx, next, holds, from, info.Delivered.Stream, info.NumAckPending)
	}
}

// firstUnheld is the first of the filter's messages in (after, floor],
// every one acknowledged, that the copy does not hold (a later copy of an
// id it holds, published again past the duplicate window, it does), 0
// when there is none.
func firstUnheld(ctx context.Context, next func(context.Context, uint64) (streamMsg, error), holds changelog.Holds, after, floor uint64) (uint64, error) {
	for seq := after + 1; seq <= floor; {
		m, err := next(ctx, seq)
		if err != nil || m.seq == 0 || m.seq > floor {
			return 0, err
		}
		if held, err := holds(ctx, m.id, m.seq); err != nil || !held {
			return m.seq, err
		}
		seq = m.seq + 1
	}
	return 0, nil
}

// holeScanLimit bounds the messages below a copy's position ackedAfter
// reads for those it misses.
const holeScanLimit = 2000

// ackedUnheld is the first of the filter's messages in (after, delivered]
// the copy does not hold when more of them than pending acks are missing
// (so one was acknowledged), else 0. It stops once that many are.
func ackedUnheld(ctx context.Context, next func(context.Context, uint64) (streamMsg, error), holds changelog.Holds, after, delivered uint64, pending int) (uint64, error) {
	first, n := uint64(0), 0
	for seq := after + 1; seq <= delivered && n <= pending; {
		m, err := next(ctx, seq)
		if err != nil || m.seq == 0 || m.seq > delivered {
			return 0, err
		}
		held, err := holds(ctx, m.id, m.seq)
		if err != nil {
			return 0, err
		}
		if !held {
			if first == 0 {
				first = m.seq
			}
			n++
		}
		seq = m.seq + 1
	}
	if n > pending {
		return first, nil
	}
	return 0, nil
}

// streamMsg is a message of the stream as ackedAfter reads it: its
// sequence (0: none) and Nats-Msg-Id.
type streamMsg struct {
	seq uint64
	id  string
}

// filteredNext finds the lowest message at or after from of filters
// (none: any) the stream holds, seq 0 when there is none.
func filteredNext(s jetstream.Stream, filters []string) func(context.Context, uint64) (streamMsg, error) {
	return func(ctx context.Context, from uint64) (streamMsg, error) {
		var lowest streamMsg
		for _, f := range filters {
			if f == "" && len(filters) > 1 {
				continue
			}
			m, err := s.GetMsg(ctx, from, jetstream.WithGetMsgSubject(cmp.Or(f, ">")))
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				continue
			}
			if err != nil {
				return streamMsg{}, err
			}
			if lowest.seq == 0 || m.Sequence < lowest.seq {
				lowest = streamMsg{seq: m.Sequence, id: m.Header.Get(jetstream.MsgIDHeader)}
			}
		}
		return lowest, nil
	}
}

// ownerDefaults is cfg.Owner with its defaults.
func ownerDefaults(cfg Config) Owner {
	o := *cfg.Owner
	if o.Name == "" {
		host, _ := os.Hostname()
		o.Name = runName(host)
	}
	o.Replicas = max(cmp.Or(o.Replicas, cfg.Stream.Limits.Replicas), 1)
	o.SnapshotInterval = cmp.Or(o.SnapshotInterval, SnapshotIntervalDefault)
	return o
}

// openOwned opens the partition's changelog and its lease. A cluster
// electing a leader, or just started, does not answer at once: waited
// for, as the consumer's own calls are (jsretry). watch's Waiting and
// Roles are the log's.
func openOwned(ctx context.Context, cfg Config, o Owner, js jetstream.JetStream, watch changelog.Config) (*changelog.Log, *changelog.Lease, error) {
	ttl := LeaseTTL(cfg.Consumer.Plan.WithDefaults().AckWait())
	var log *changelog.Log
	var lease *changelog.Lease
	err := jsretry.Do(ctx, cfg.Logger, "open the changelog and the lease of "+cfg.Consumer.Durable, func(ctx context.Context) error {
		var err error
		if log, err = changelog.Ensure(ctx, js, changelog.Config{Stream: cfg.Stream.Name, Durable: cfg.Consumer.Durable, Replicas: o.Replicas, Logger: cfg.Logger,
			Acked: ackedAfter(js, cfg.Stream.Name, cfg.Consumer.Durable), Waiting: watch.Waiting, Roles: watch.Roles, Schema: copySchema(cfg),
			Copy: standbyAPI(cfg, js, &lease), MayTake: o.MayTake}); err != nil {
			return err
		}
		lease, err = changelog.OpenLease(ctx, js, cfg.Stream.Name, cfg.Consumer.Durable, o.Name, ttl, o.Replicas, changelog.LeaseLogger(cfg.Logger))
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return log, lease, nil
}

// acquire takes the lease, waiting out a cluster that does not answer (a
// run that has just lost the partition to a cut may still be cut off);
// held by another, it says so (ErrLeaseHeld). A run that is not a standby
// waits for a lease held by a run that stopped without giving it up (a
// supervisor restarting a SIGKILLed owner within its TTL), as a plain run
// does (waitLease).
func acquire(ctx context.Context, cfg Config, o Owner, lease *changelog.Lease) error {
	if !o.Standby {
		return waitLease(ctx, cfg, lease)
	}
	if o.MayTake != nil && !o.MayTake() {
		return fmt.Errorf("%w: the group assigns %s to another member", changelog.ErrLeaseHeld, cfg.Consumer.Durable)
	}
	return jsretry.Do(ctx, cfg.Logger, "take the lease of "+cfg.Consumer.Durable, lease.Acquire)
}

// runOwner runs the partition while the lease is held.
func runOwner(ctx context.Context, cfg Config, o Owner, log *changelog.Log, lease *changelog.Lease) error {
	cfg.Owner, cfg.leaseHeld = nil, true
	// A log deleted under this owner: a standby keeps the lease's key as it
	// is, and takes it again at once, which proves (by its revision) that
	// nobody owned the partition between, so the new log it begins from its
	// file needs no row marked maybe sent (changelog.Own).
	if o.Standby {
		cfg.retainLease = lease.Retain
	}
	// Each entry is published only while the lease is held, and a commit
	// whose entry landed after it ended is rolled back (Log.Owned).
	cfg.Ledger.Changelog = log.Owned(lease)
	cfg.afterOpen = func(ctx context.Context, st *ledger.Store) (func(), error) {
		if err := changelog.Own(ctx, log, lease, st); err != nil {
			return nil, err
		}
		cfg.Logger.InfoContext(ctx, "owning the partition: its changes go to its changelog before each commit",
			"stream", cfg.Stream.Name, "durable", cfg.Consumer.Durable, "owner", o.Name, "role", "owner")
		snapCtx, stopSnapshots := context.WithCancel(ctx) // the run's: Start's
		var snapshots sync.WaitGroup
		rec := &ownerRecord{cfg: cfg, o: o, log: log, lease: lease, st: st}
		snapshots.Go(func() { keepSnapshots(snapCtx, cfg, o, log, st) })
		snapshots.Go(func() { rec.keep(snapCtx) })
		return func() {
			stopSnapshots()
			snapshots.Wait()
			rec.once(context.WithoutCancel(ctx), true) // drained: where it stops, for a hand-over
		}, nil
	}
	err, cause := runKept(ctx, cfg, lease.Keep, func(ctx context.Context) error { return watchLog(ctx, log) })
	// A take-over that gave the lease up itself (changelog.Own: ErrWaiting)
	// lost nothing: a renewal on its way as it did ends Keep lost
	// (Lease.renewedAfter), which is not this run's loss to settle or say.
	if (errors.Is(cause, changelog.ErrLeaseLost) || errors.Is(cause, changelog.ErrLogGone)) && !errors.Is(err, changelog.ErrWaiting) {
		return errors.Join(cause, err)
	}
	return err
}

// logLook is how often an owner looks whether its log is still there.
const logLook = 5 * time.Second

// watchLog returns ErrLogGone once the owner's log is deleted: an owner
// with nothing to commit learns it now, not at its next batch, and begins
// the new log (its standby waits for that, and its pruner's entries are
// refused meanwhile).
func watchLog(ctx context.Context, log *changelog.Log) error {
	for ackwait.Sleep(ctx, logLook) {
		// Gone on two looks a second apart: a cluster electing its
		// leaders may say "not found" for a moment.
		if err := log.Check(ctx); !errors.Is(err, changelog.ErrLogGone) || !ackwait.Sleep(ctx, time.Second) {
			continue
		}
		if err := log.Check(ctx); errors.Is(err, changelog.ErrLogGone) {
			return err
		}
	}
	return nil
}

// runKept runs cfg (Run) while keep holds the partition's lease. keep goes
// on until the run has drained, not only until it is told to stop: the
// batch in hand at a SIGTERM commits (through the log, on an owned
// partition, which takes an entry only while the lease is held). A keep
// that returns an error stops the run, which is its cause; the lease goes
// once the run has drained, to another host at once. A watch (run for as
// long as the run) that returns an error stops the run too, as its cause,
// while keep goes on until the run has drained.
func runKept(ctx context.Context, cfg Config, keep func(context.Context) error, watches ...func(context.Context) error) (err, cause error) {
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	keepCtx, stopKeeping := context.WithCancel(context.WithoutCancel(ctx))
	defer stopKeeping()
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		if err := keep(keepCtx); err != nil {
			stop(err) // the consumer stops fetching before the lease can pass
		}
	}()
	var watching sync.WaitGroup
	for _, w := range watches {
		watching.Go(func() {
			if err := w(runCtx); err != nil {
				stop(err)
			}
		})
	}
	err = Run(runCtx, cfg)
	stop(nil)
	watching.Wait()
	// A partition lost keeps the lease's key for the take that follows;
	// not at a stop, where the lease goes at once, for another host.
	if cfg.retainLease != nil && ctx.Err() == nil && (lostOwnership(err) || lostOwnership(context.Cause(runCtx))) {
		cfg.retainLease()
	}
	stopKeeping()
	<-kept
	return err, context.Cause(runCtx)
}

// ownerRecord says where the owner's ledger stands in its log
// (changelog.Log.RecordOwner), while the lease is held: a zombie owner
// must not say less than the owner after it.
type ownerRecord struct {
	cfg    Config
	o      Owner
	log    *changelog.Log
	lease  *changelog.Lease
	st     *ledger.Store
	said   ledger.ChangelogPosition
	saidAt time.Time
	failed bool
}

// keep records the position every second while it moves, and every
// changelog.OwnerRewrite while it does not (a bucket deleted, a key
// overwritten), until ctx ends.
func (r *ownerRecord) keep(ctx context.Context) {
	for r.once(ctx, false); ackwait.Sleep(ctx, time.Second); {
		r.once(ctx, false)
	}
}

// once records the position if it moved since it was said, or it is due
// again, or always.
func (r *ownerRecord) once(ctx context.Context, always bool) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	pos, err := r.st.LoggedPosition(ctx)
	if err != nil || !r.lease.Held() || pos == r.said && !always && time.Since(r.saidAt) < changelog.OwnerRewrite {
		return
	}
	if err := r.log.RecordOwner(ctx, r.o.Name, pos); err != nil {
		if !r.failed && ctx.Err() == nil {
			r.cfg.Logger.WarnContext(ctx, "the owner cannot record where its ledger stands in its changelog; trying again", "err", err)
		}
		r.failed = true
		return
	}
	r.said, r.saidAt, r.failed = pos, time.Now(), false
}

// keepSnapshots snapshots the ledger at the take-over (unless Own stored
// one, and nothing has changed since), every SnapshotInterval, and as soon
// as the log lacks entries after the stored snapshot (purged: a standby
// behind it can go on only from a newer snapshot) until ctx ends; a
// snapshot that fails is tried again every few seconds until one is
// stored.
func keepSnapshots(ctx context.Context, cfg Config, o Owner, log *changelog.Log, st *ledger.Store) {
	look := min(o.SnapshotInterval, 5*time.Second)
	for due := time.Now(); ; {
		if time.Now().Before(due) {
			if gap, err := log.Gap(ctx); err != nil || !gap {
				if !ackwait.Sleep(ctx, min(look, time.Until(due))) {
					return
				}
				continue
			}
			cfg.Logger.WarnContext(ctx, "the changelog lacks entries after the stored snapshot (purged?), or has no snapshot (deleted?): snapshotting now, for standbys behind it or new")
		}
		due = time.Now().Add(o.SnapshotInterval)
		if _, err := log.Snapshot(ctx, st); err != nil {
			if ctx.Err() != nil {
				return
			}
			cfg.Logger.WarnContext(ctx, "snapshot of the ledger failed; tried again", "err", err)
			due = time.Now().Add(look)
		}
		if !ackwait.Sleep(ctx, min(look, time.Until(due))) {
			return
		}
	}
}
