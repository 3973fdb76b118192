package changelog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Role is where a host's run of a partition kept by a changelog stands.
// A run moves between roles only along a row of moves, whose check (an
// invariant) must hold: the lifecycle's whole state machine is that
// table, and a move it lacks is refused (ErrIllegalMove), never taken.
// The copy's steps before it follows (restore, begin, wait) are decided by
// the rules of lifecycle; this table says what a run may do next.
type Role string

const (
	RoleNew       Role = "new"       // opened: its copy's step not decided yet
	RoleWaiting   Role = "waiting"   // its copy may neither follow, be restored nor begin the log: it says why
	RoleRestoring Role = "restoring" // its file is being replaced by the snapshot (set aside unless the snapshot holds it)
	RoleFollowing Role = "following" // its copy follows the log, or may begin it: a standby, or a run about to own
	RoleTaking    Role = "taking"    // it holds the lease and brings its copy to the log's last entry, to take over after it
	RoleOwner     Role = "owner"     // it commits, each change through the log, while the lease is held
	RoleFenced    Role = "fenced"    // it lost the lease or its log: it commits nothing more
	RoleLeaving   Role = "leaving"   // it takes its file out of the log (--leave-changelog), caught up first
	RoleLeft      Role = "left"      // its file is out of the log: a plain ledger
	RoleStopped   Role = "stopped"   // the run ended
)

// ErrIllegalMove: a run tried a move the table lacks, or one whose
// invariant does not hold. It is a bug, and the run stops rather than go
// on from a state nobody reasoned about.
var ErrIllegalMove = errors.New("changelog: a move the partition's lifecycle does not allow")

// Facts are what a move's invariant is checked against, as the mover
// knows them at the move.
type Facts struct {
	Lease    *Lease // the partition's lease, if the move needs it held
	Step     step   // the step the lifecycle decided, for moves that follow one
	TookOver bool   // the store took the log over, and it has a snapshot
	CaughtUp bool   // the file holds the log's last entry
}

// move is a row of the table: from, to, and the invariant that must hold.
type move struct {
	from, to Role
	check    func(Facts) error
}

var (
	leaseHeld = func(f Facts) error {
		if f.Lease == nil || !f.Lease.Held() {
			return errors.New("the lease is not held")
		}
		return nil
	}
	decided = func(s ...step) func(Facts) error {
		return func(f Facts) error {
			for _, x := range s {
				if f.Step == x {
					return nil
				}
			}
			return fmt.Errorf("the lifecycle decided step %d", f.Step)
		}
	}
	always = func(Facts) error { return nil }
	// withLease is check, the lease held first.
	withLease = func(check func(Facts) error) func(Facts) error {
		return func(f Facts) error {
			if err := leaseHeld(f); err != nil {
				return err
			}
			return check(f)
		}
	}
)

// moves is the table. Every role may stop; nothing else is allowed.
// Its invariants: a copy follows only when the lifecycle said follow or
// begin, and is restored only when it said restore; a run takes over only
// holding the lease, from a copy that follows; it owns only once its
// store took the log over and the log has a snapshot; after a fence it
// starts again from new (its copy's step decided again), never back to
// owner; it leaves the log only holding the lease, caught up.
var moves = []move{
	{RoleNew, RoleWaiting, decided(stepWait)},
	{RoleNew, RoleRestoring, decided(stepRestore)},
	{RoleNew, RoleFollowing, decided(stepFollow, stepBegin)},
	{RoleNew, RoleLeaving, leaseHeld},
	{RoleWaiting, RoleWaiting, decided(stepWait)},
	{RoleWaiting, RoleRestoring, decided(stepRestore)},
	{RoleWaiting, RoleFollowing, decided(stepFollow, stepBegin)},
	{RoleRestoring, RoleRestoring, decided(stepRestore)}, // a restore the server broke off, tried again
	{RoleRestoring, RoleFollowing, decided(stepFollow, stepBegin)},
	{RoleRestoring, RoleWaiting, decided(stepWait)},
	{RoleFollowing, RoleWaiting, decided(stepWait)}, // a copy that cannot apply its log, or one begun elsewhere
	{RoleFollowing, RoleRestoring, decided(stepRestore)},
	{RoleFollowing, RoleFollowing, decided(stepFollow, stepBegin)},
	{RoleFollowing, RoleTaking, leaseHeld},
	{RoleFollowing, RoleFenced, always},          // a run that took the lease loses it before its take-over
	{RoleTaking, RoleWaiting, decided(stepWait)}, // a copy that lacks acknowledged messages gives the lease up
	{RoleTaking, RoleOwner, withLease(func(f Facts) error {
		if !f.TookOver {
			return errors.New("the store has not taken the log over")
		}
		return nil
	})},
	{RoleTaking, RoleFenced, always},
	{RoleOwner, RoleFenced, always},
	{RoleFenced, RoleNew, always},
	{RoleLeaving, RoleLeft, withLease(func(f Facts) error {
		if !f.CaughtUp {
			return errors.New("the file lacks entries of the log")
		}
		return nil
	})},
}

// Roles keeps a run's role in its partition's lifecycle, for one run
// across the logs it opens (a log deleted and made again).
type Roles struct {
	mu      sync.Mutex
	role    Role
	since   time.Time
	log     *slog.Logger
	observe func(Role)
}

// NewRoles starts a run's lifecycle at RoleNew. observe, if set, is told
// each role moved to (for metrics and health); log says each move.
func NewRoles(log *slog.Logger, observe func(Role)) *Roles {
	r := &Roles{role: RoleNew, since: time.Now(), log: cmpLogger(log), observe: observe}
	if observe != nil {
		observe(RoleNew)
	}
	return r
}

// Role is the run's role now, and since when.
func (r *Roles) Role() (Role, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.role, r.since
}

// Move moves the run to role to, if the table has the move and its
// invariant holds on f; else ErrIllegalMove, and the role is unchanged.
// Moving to RoleStopped is always allowed.
func (r *Roles) Move(ctx context.Context, to Role, f Facts) error {
	r.mu.Lock()
	from := r.role
	r.mu.Unlock()
	if err := allowed(from, to, f); err != nil {
		r.log.ErrorContext(ctx, "changelog: a move the lifecycle does not allow: refused", "from", from, "to", to, "err", err)
		return err
	}
	r.mu.Lock()
	r.role = to
	if from != to {
		r.since = time.Now()
	}
	r.mu.Unlock()
	if from != to {
		r.log.DebugContext(ctx, "changelog: the partition's run moves", "from", from, "to", to)
	}
	if r.observe != nil {
		r.observe(to)
	}
	return nil
}

// allowed checks the move from → to against the table.
func allowed(from, to Role, f Facts) error {
	if to == RoleStopped {
		return nil
	}
	for _, m := range moves {
		if m.from != from || m.to != to {
			continue
		}
		if err := m.check(f); err != nil {
			return fmt.Errorf("%w: %s to %s: %w", ErrIllegalMove, from, to, err)
		}
		return nil
	}
	return fmt.Errorf("%w: %s to %s is not a move of the table", ErrIllegalMove, from, to)
}

func cmpLogger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.Default()
	}
	return l
}
