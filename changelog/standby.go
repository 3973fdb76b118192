package changelog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/ledger"
)

// PollDefault is how often a standby looks for new entries and for the
// lease going free.
const PollDefault = 250 * time.Millisecond

// Standby keeps the ledger at file a current copy of the partition's
// (restoring the snapshot when it is new or too far behind) until the
// lease is free and this process takes it. It returns with the lease held
// and the file closed, caught up as far as the log was when the lease was
// taken; the owner's Start (TakeOver) applies what came after. lag, if
// set, is told at each look (every PollDefault) how many of the log's
// entries the copy lacks, before it applies them. A snapshot not made yet
// is waited for.
func Standby(ctx context.Context, l *Log, lease *Lease, file string, cfg ledger.Config, lag func(uint64)) error {
	for {
		st, err := openCopy(ctx, l, lease, file, cfg)
		if err != nil || st == nil {
			return err // or the lease taken before any snapshot: the owner's Start makes the file
		}
		err = follow(ctx, l, lease, st, lag)
		st.Close()
		if !errors.Is(err, ErrNeedSnapshot) {
			return err
		}
		l.log.InfoContext(ctx, "changelog: the standby's copy is too far behind its log: restoring the snapshot", "log", l.name, "db", file, "err", err)
		if err := os.Remove(file); err != nil {
			return fmt.Errorf("changelog: restore %s: %w", file, err)
		}
	}
}

// openCopy opens file, restoring the snapshot first when there is no
// file. A copy starts from a snapshot only, which holds the owner's
// tables: one begun from an empty log would lack them. Until the owner has
// stored one it waits, and takes the lease if it goes free meanwhile (an
// owner lost before its first snapshot), returning no store: the new
// owner's ledger, with its schema, catches up from the log's start.
func openCopy(ctx context.Context, l *Log, lease *Lease, file string, cfg ledger.Config) (*ledger.Store, error) {
	if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) {
		for said := false; ; {
			ok, err := l.Restore(ctx, file)
			holder := ""
			if err == nil && !ok {
				holder, err = lease.Holder(ctx)
			}
			if err == nil && !ok && holder == "" {
				if err = lease.Acquire(ctx); err == nil {
					l.log.InfoContext(ctx, "changelog: the partition had no owner, nor a snapshot yet: taking it over from the log's start", "log", l.name)
					return nil, nil
				}
				if errors.Is(err, ErrLeaseHeld) {
					err = nil
				}
			}
			if transient(ctx, err) {
				if !l.retry(ctx, err) {
					return nil, ctx.Err()
				}
				continue
			}
			if err != nil {
				return nil, err
			}
			if ok {
				break
			}
			if !said {
				l.log.InfoContext(ctx, "changelog: waiting for the owner's first snapshot", "log", l.name, "owner", holder)
				said = true
			}
			if !ackwait.Sleep(ctx, PollDefault) {
				return nil, ctx.Err()
			}
		}
	}
	cfg.Changelog = nil
	return ledger.Open(file, cfg)
}

// retry says that the standby cannot reach its log or lease now (the
// server's error, err), and waits before it tries again; false once ctx
// has ended.
func (l *Log) retry(ctx context.Context, err error) bool {
	l.log.WarnContext(ctx, "changelog: the standby cannot reach its log or its lease now; retrying", "log", l.name, "err", err)
	return ackwait.Sleep(ctx, 4*PollDefault)
}

// follow applies the log to st until the lease is taken.
func follow(ctx context.Context, l *Log, lease *Lease, st *ledger.Store, lag func(uint64)) error {
	said := ""
	for {
		if lag != nil {
			if n, err := l.Lag(ctx, st); err == nil {
				lag(n) // what this look finds to apply: a standby falling behind finds more each time
			}
		}
		applied, last, err := l.CatchUp(ctx, st)
		holder := ""
		if err == nil {
			holder, err = lease.Holder(ctx)
		}
		if err == nil && holder == "" {
			if err = lease.Acquire(ctx); err == nil {
				l.log.InfoContext(ctx, "changelog: the partition had no owner: taking it over", "log", l.name, "applied", applied, "last", last)
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
		if holder != "" && holder != said {
			l.log.InfoContext(ctx, "changelog: standing by; the partition is owned", "log", l.name, "owner", holder)
			said = holder
		}
		if !ackwait.Sleep(ctx, PollDefault) {
			return ctx.Err()
		}
	}
}

// Own makes st, opened with this log as its Config.Changelog, the
// partition's writer once the lease is held: it applies the log's entries
// it lacks and takes over after the last (ledger.Store.TakeOver); an entry
// that lands meanwhile (an owner that has not stopped yet) is applied and
// the take-over tried again, while the lease is held.
func Own(ctx context.Context, l *Log, lease *Lease, st *ledger.Store) error {
	for {
		if !lease.Held() {
			return fmt.Errorf("%w: before the take-over", ErrLeaseLost)
		}
		applied, last, err := l.CatchUp(ctx, st)
		if transient(ctx, err) && ackwait.Sleep(ctx, PollDefault) {
			continue
		}
		if err != nil {
			return err
		}
		err = st.TakeOver(ctx, l.instance, lease.owner, applied, last)
		if errors.Is(err, ErrFenced) {
			continue
		}
		if err == nil {
			l.log.InfoContext(ctx, "changelog: took the log over: every entry after this one is this owner's", "log", l.name, "after", last)
		}
		return err
	}
}

// transient says whether err is the server's, worth trying again (a
// cluster electing a leader answers "no responders" or times out), not
// the ledger's or the log's shape.
func transient(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() == nil && !errors.Is(err, ErrNeedSnapshot) && !errors.Is(err, ErrLeaseLost) &&
		!errors.Is(err, ledger.ErrChangesDoNotFit) && !errors.Is(err, ledger.ErrChangelogBehind) && !errors.Is(err, ledger.ErrInvalidConfig)
}
