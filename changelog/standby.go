package changelog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer/jsretry"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// PollDefault is how often a standby looks for new entries and for the
// lease going free.
const PollDefault = 250 * time.Millisecond

// Standby keeps the ledger at file a current copy of the partition's
// until the lease is free and this process takes it. It returns with the
// lease held and the file closed, caught up as far as the log was when
// the lease was taken; the owner's Start (TakeOver) applies what came
// after. Before it follows, the file takes the step of the lifecycle
// (Prepare): restored from the snapshot (set aside, never deleted, unless
// the snapshot holds it whole), or a wait that says why, with a growing
// pause. lag, if set, is told at each look (every PollDefault) how many
// of the log's entries the copy lacks, before it applies them.
func Standby(ctx context.Context, l *Log, lease *Lease, file string, cfg ledger.Config, lag func(uint64)) error {
	// A wait said by an earlier call (of the log before this one, deleted
	// since) ends with this call's first look that goes on.
	w := &waiter{l: l, reason: waitUnknown}
	for {
		begin, err := l.Prepare(ctx, file)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, ErrWaiting):
			if !w.wait(ctx, err) {
				return ctx.Err()
			}
			continue
		case transient(ctx, err):
			if !l.retry(ctx, err) {
				return ctx.Err()
			}
			continue
		case err != nil:
			return err
		}
		st, err := openCopy(ctx, l, file, cfg, begin)
		if err != nil {
			return err
		}
		stop := func() {}
		if st != nil && l.cfg.Copy != nil {
			stop = l.cfg.Copy(ctx, st)
		}
		err = follow(ctx, l, lease, st, lag, begin, w)
		stop()
		if st != nil {
			st.Close()
		}
		switch {
		case errors.Is(err, errBegunElsewhere):
			continue // its snapshot is next: decided again at once
		case errors.Is(err, ErrNeedSnapshot):
			// Decided again after a pause: a log trimmed between the look
			// and the catch-up is normal, a loop of it is not.
			err = fmt.Errorf("%w: the copy cannot follow its log by entries: %w", ErrWaiting, err)
		case !errors.Is(err, ErrWaiting):
			return err
		}
		if merr := l.Move(ctx, RoleWaiting, Facts{Step: stepWait}); merr != nil {
			return merr
		}
		if !w.wait(ctx, err) {
			return ctx.Err()
		}
	}
}

// errBegunElsewhere: a copy that might have begun the log found it begun
// by another host.
var errBegunElsewhere = fmt.Errorf("%w: the log was begun by another host", ErrNeedSnapshot)

// openCopy opens the standby's copy at file, with the run's schema, or
// nil when there is no file and it may begin the log: none is made until
// it is this host's to begin, or another's snapshot to restore.
func openCopy(ctx context.Context, l *Log, file string, cfg ledger.Config, begin bool) (*ledger.Store, error) {
	if _, err := os.Stat(file); begin && errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	cfg.Changelog = nil
	st, err := ledger.Open(file, cfg)
	if err != nil {
		return nil, err
	}
	if l.cfg.Schema != nil {
		if err := l.cfg.Schema(ctx, st); err != nil {
			st.Close()
			return nil, fmt.Errorf("changelog: the run's schema on the standby's copy %s: %w", file, err)
		}
	}
	return st, nil
}

// retry says that the standby cannot reach its log or lease now (the
// server's error, err), or use its ledger file (the file system's or
// the disk's), and waits before it tries again; false once ctx has ended.
func (l *Log) retry(ctx context.Context, err error) bool {
	what := "changelog: the standby cannot reach its log or its lease now; retrying"
	if localFault(err) {
		what = "changelog: the standby cannot use its ledger file now; retrying"
	}
	l.log.WarnContext(ctx, what, "log", l.name, "err", err)
	return ackwait.Sleep(ctx, 4*PollDefault)
}

// localFault says whether err is this host's file system's or disk's,
// not the server's: said as the network's, a person looked in vain there.
func localFault(err error) bool {
	var pe *fs.PathError
	var le *os.LinkError
	return errors.As(err, &pe) || errors.As(err, &le) || errors.Is(err, ledger.ErrIO) ||
		errors.Is(err, ledger.ErrFull) || errors.Is(err, ledger.ErrReadOnly)
}

// follow applies the log to st until the lease is taken. A copy that may
// begin the log (begin: of an earlier instance, the log still empty)
// applies nothing and returns ErrNeedSnapshot once the log has entries,
// another host having begun it, for its step to be decided again.
func follow(ctx context.Context, l *Log, lease *Lease, st *ledger.Store, lag func(uint64), begin bool, w *waiter) error {
	said := ""
	for {
		var from ledger.ChangelogPosition
		var perr error
		if st != nil {
			from, perr = st.ChangelogPosition(ctx) // the file's: CatchUp reads the log's last
		}
		var applied, last uint64
		var err error
		if begin {
			// Nothing to apply: a copy that may begin the log waits for
			// the lease, or for another host to begin it (then its step
			// is decided again: it restores that host's snapshot).
			if last, err = l.Last(ctx); err == nil && last > 0 {
				return errBegunElsewhere
			}
		} else {
			applied, last, err = l.CatchUp(ctx, st)
		}
		if err == nil {
			w.clear() // the copy goes on
		}
		if cannotApply(ctx, err) {
			// Not the server's passing trouble: the copy itself (a full
			// disk, an entry it cannot decode or fit). It is waited on,
			// reported, and never taken over from while it lasts.
			return fmt.Errorf("%w: the copy cannot apply its log, and no standby takes a partition over while it cannot: %w", ErrWaiting, err)
		}
		if lag != nil && err == nil && perr == nil {
			lag(last - min(last, from.Seq)) // what this look found to apply: a standby falling behind finds more each time
		}
		holder := ""
		if err == nil {
			holder, err = lease.Holder(ctx)
		}
		// A key naming this run was written by its own take whose answer
		// was lost: taken at once, not stood by for until its TTL ends.
		if err == nil && (holder == "" && l.mayTake() || holder == lease.owner) {
			if err = lease.Acquire(ctx); err == nil {
				// holder: "", or this run's name (its own take, whose answer was lost).
				l.log.InfoContext(ctx, "changelog: the partition had no owner: taking it over", "log", l.name, "applied", applied, "last", last, "holder", holder)
				return nil
			}
			if errors.Is(err, ErrLeaseHeld) {
				err = nil // taken by another standby first
			}
		}
		if transient(ctx, err) {
			if !l.retry(ctx, err) {
				return ctx.Err()
			}
			continue
		}
		if err != nil {
			return err
		}
		switch {
		case holder == "" || holder == said:
		case begin:
			l.log.InfoContext(ctx, "changelog: waiting for the partition's owner to begin its log", "log", l.name, "owner", holder)
		default:
			l.log.InfoContext(ctx, "changelog: standing by; the partition is owned", "log", l.name, "owner", holder)
		}
		said = cmp.Or(holder, said)
		if !ackwait.Sleep(ctx, PollDefault) {
			return ctx.Err()
		}
	}
}

// mayTake says whether this run may take a lease nobody holds (Config.MayTake).
func (l *Log) mayTake() bool { return l.cfg.MayTake == nil || l.cfg.MayTake() }

// soleWriter says whether this owner took the lease again right after the
// revision it left (Lease.Resumed: nobody owned the partition between)
// and st's file stands exactly where this owner last said it stood
// (RecordOwner at its drain): not a copy restored since, nor one that
// moved on without it.
func (l *Log) soleWriter(ctx context.Context, lease *Lease, st *ledger.Store) (bool, error) {
	if !lease.Resumed() {
		return false, nil
	}
	pos, err := st.ChangelogPosition(ctx)
	if err != nil {
		return false, err
	}
	said, err := l.lastOwner(ctx)
	return err == nil && said.Owner == lease.owner && said.Log == pos.Log && said.Seq == pos.Seq, err
}

// Own makes st, opened with this log as its Config.Changelog, the
// partition's writer once the lease is held: it applies the log's entries
// it lacks and takes over after the last (ledger.Store.TakeOver); an entry
// that lands meanwhile (an owner that has not stopped yet) is applied and
// the take-over tried again, while the lease is held. A store that begins
// the log (it had no entries), or whose log has no snapshot yet, has its
// snapshot stored before Own returns.
func Own(ctx context.Context, l *Log, lease *Lease, st *ledger.Store) error {
	// A lease that lapsed while the copy was prepared (a slow server, a
	// pause) is lost, not a move the table refuses: the run stands by.
	if !lease.Held() {
		return fmt.Errorf("%w: before the take-over, while the copy was prepared", ErrLeaseLost)
	}
	if err := l.Move(ctx, RoleTaking, Facts{Lease: lease}); err != nil {
		return err
	}
	for {
		if !lease.Held() {
			return fmt.Errorf("%w: before the take-over", ErrLeaseLost)
		}
		applied, last, err := l.CatchUp(ctx, st)
		if err == nil {
			err = l.HoldsAcked(ctx, st, last)
		}
		if errors.Is(err, ErrWaiting) {
			// Given up at once, for the host that holds the rest.
			lease.Release()
			return errors.Join(err, l.Move(ctx, RoleWaiting, Facts{Step: stepWait}))
		}
		if errors.Is(err, errLogMoved) || transient(ctx, err) && ackwait.Sleep(ctx, PollDefault) {
			continue
		}
		if err != nil {
			return err
		}
		if err := l.beginsEmpty(ctx, st, last); err != nil {
			return err
		}
		takeOver := st.TakeOver
		if sole, err := l.soleWriter(ctx, lease, st); err == nil && sole {
			takeOver = st.TakeOverAsSoleWriter
		}
		err = takeOver(ctx, l.instance, lease.owner, applied, last)
		l.setBeginEmpty(false)
		if errors.Is(err, ErrFenced) {
			continue
		}
		if err != nil {
			return err
		}
		l.log.InfoContext(ctx, "changelog: took the log over: every entry after this one is this owner's", "log", l.name, "after", last)
		if last == 0 || !l.hasSnapshot(ctx) {
			if err := l.firstSnapshot(ctx, lease, st); err != nil {
				return err
			}
		}
		// A lease that lapsed during the take-over or the first snapshot
		// (a stalled host) is lost too, not a move the table refuses.
		if !lease.Held() {
			return fmt.Errorf("%w: after the take-over, before owning", ErrLeaseLost)
		}
		return l.Move(ctx, RoleOwner, Facts{Lease: lease, TookOver: true})
	}
}

// beginsEmpty has the take-over's entry say the log begins from a ledger
// with nothing in it (HeaderBegun) when st is one and the log is empty
// (last 0): a new copy then follows the log from its first entry, even if
// this owner is lost before its first snapshot, where every new copy
// waited for a person (gap C). Said in the entry, fenced with it.
func (l *Log) beginsEmpty(ctx context.Context, st *ledger.Store, last uint64) error {
	empty := false
	if last == 0 {
		f, err := readState(ctx, st.DB())
		if err != nil {
			return err
		}
		// And nothing seen (a migrated ledger's rows once read as none
		// here: CI on f35e153).
		empty = f.empty() && f.seen == 0
	}
	l.setBeginEmpty(empty)
	return nil
}

func (l *Log) setBeginEmpty(on bool) {
	l.lastMu.Lock()
	l.beginEmpty = on
	l.lastMu.Unlock()
}

// errLogMoved: the log has entries after those a take-over applied (a
// writer that had not stopped yet): it catches up again.
var errLogMoved = errors.New("changelog: the log moved on during the take-over")

// HoldsAcked refuses a take-over or a leave (ErrWaiting) by st, caught up through
// the log's entry last, that lacks a message the partition's durable
// acknowledged: a run out of the log applied it (--leave-changelog on a
// file elsewhere), and owning without it would lose it. A log that moved
// past last meanwhile is caught up with first (errLogMoved).
func (l *Log) HoldsAcked(ctx context.Context, st *ledger.Store, last uint64) error {
	if l.cfg.Acked == nil {
		return nil
	}
	seen, acked, err := LacksAcked(ctx, st, l.cfg.Acked)
	if err != nil || acked == 0 {
		return err
	}
	if now, err := l.Last(ctx); err != nil || now > last {
		return cmp.Or(err, errLogMoved)
	}
	return fmt.Errorf("%w: the copy holds the log through its last entry, %d, and messages through stream sequence %d, but lacks one the partition's durable acknowledged (the first it lacks is at %d), which is in no entry: a run out of the log (--leave-changelog) applied it; start that file's host (its ledger joins again once the log is deleted: docs/scaling.md), or have a person settle the partition", ErrWaiting, last, seen, acked)
}

// LacksAcked returns st's highest stream sequence and the first message
// the partition's durable acknowledged that st lacks (0: none), as acked
// (Config.Acked) finds it.
func LacksAcked(ctx context.Context, st *ledger.Store, acked func(ctx context.Context, seen uint64, holds Holds) (uint64, error)) (seen, first uint64, err error) {
	if seen, err = st.Seen(ctx); err != nil {
		return 0, 0, err
	}
	first, err = acked(ctx, seen, st.Holds)
	return seen, first, err
}

// firstSnapshot stores the snapshot of a ledger that has just begun the
// log, or whose log has none yet, before its owner consumes anything: the
// rows its file held before the log are in no entry, and a standby starts
// from a snapshot only. It tries again every few seconds while the lease
// is held.
func (l *Log) firstSnapshot(ctx context.Context, lease *Lease, st *ledger.Store) error {
	for waited := false; ; waited = true {
		_, err := l.Snapshot(ctx, st)
		if err == nil {
			if waited && l.cfg.Waiting != nil {
				l.cfg.Waiting(nil)
			}
			return nil
		}
		if l.cfg.Waiting != nil { // nothing is consumed meanwhile: said where a person looks
			l.cfg.Waiting(fmt.Errorf("%w: the owner's first snapshot cannot be stored, and it consumes nothing until one is: %w", ErrWaiting, err))
		}
		if !lease.Held() {
			return fmt.Errorf("%w: before the first snapshot was stored (%v)", ErrLeaseLost, err)
		}
		l.log.WarnContext(ctx, "changelog: the ledger's first snapshot failed: nothing is consumed until one is stored, as a standby starts from it; retrying", "log", l.name, "err", err)
		if !ackwait.Sleep(ctx, 2*time.Second) {
			return ctx.Err()
		}
	}
}

// hasSnapshot says whether this log has a snapshot stored; a bucket that
// does not answer is taken to have one, so that its outage does not hold
// the owner back.
func (l *Log) hasSnapshot(ctx context.Context) bool {
	obs, err := l.snapshots(ctx)
	if err != nil {
		return true
	}
	info, err := obs.GetInfo(ctx, l.name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return false
	}
	return err != nil || info.Metadata[metaLog] == l.instance
}

// cannotApply says whether err, a catch-up's, is the copy's own trouble
// rather than the server's or a step for the lifecycle to decide.
func cannotApply(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() == nil && !jsretry.Transient(err) && !lifecycleAnswer(err)
}

// lifecycleAnswer says whether err is an answer the lifecycle acts on (a
// snapshot needed, the log gone, a configuration or a move refused), not
// trouble of the server's or the copy's.
func lifecycleAnswer(err error) bool {
	return errors.Is(err, ErrNeedSnapshot) || errors.Is(err, ErrLogGone) || errors.Is(err, ErrInvalidConfig) || errors.Is(err, ErrIllegalMove)
}

// transient says whether err is the server's, worth trying again (a
// cluster electing a leader answers "no responders" or times out), not
// the ledger's or the log's shape.
func transient(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() == nil && !lifecycleAnswer(err) && !errors.Is(err, ErrLeaseLost) &&
		!errors.Is(err, ledger.ErrChangesDoNotFit) && !errors.Is(err, ledger.ErrChangelogBehind) && !errors.Is(err, ledger.ErrInvalidConfig)
}
