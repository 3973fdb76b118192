package changelog

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// The table of moves: each row is taken when its invariant holds and
// refused when it does not; a move the table lacks is refused, and the
// role stays as it was.
func TestRolesMoveOnlyAlongTheTable(t *testing.T) {
	t.Parallel()
	held := &Lease{rev: 1, renewed: time.Now(), ttl: time.Hour}
	lapsed := &Lease{rev: 1, renewed: time.Now().Add(-time.Hour), ttl: time.Second}
	tests := []struct {
		name     string
		from, to Role
		f        Facts
		ok       bool
	}{
		{"a copy the lifecycle says follows", RoleNew, RoleFollowing, Facts{Step: stepFollow}, true},
		{"a copy the lifecycle says waits does not follow", RoleNew, RoleFollowing, Facts{Step: stepWait}, false},
		{"a restore the lifecycle said", RoleWaiting, RoleRestoring, Facts{Step: stepRestore}, true},
		{"a restore the lifecycle did not say", RoleWaiting, RoleRestoring, Facts{Step: stepBegin}, false},
		{"a take-over with the lease", RoleFollowing, RoleTaking, Facts{Lease: held}, true},
		{"a take-over with a lapsed lease", RoleFollowing, RoleTaking, Facts{Lease: lapsed}, false},
		{"a take-over with no lease", RoleFollowing, RoleTaking, Facts{}, false},
		{"an owner that took the log over", RoleTaking, RoleOwner, Facts{Lease: held, TookOver: true}, true},
		{"an owner that did not take the log over", RoleTaking, RoleOwner, Facts{Lease: held}, false},
		{"an owner without the lease", RoleTaking, RoleOwner, Facts{Lease: lapsed, TookOver: true}, false},
		{"a waiting copy never owns", RoleWaiting, RoleOwner, Facts{Lease: held, TookOver: true}, false},
		{"a waiting copy never takes over", RoleWaiting, RoleTaking, Facts{Lease: held}, false},
		{"a new run never owns at once", RoleNew, RoleOwner, Facts{Lease: held, TookOver: true}, false},
		{"a fenced run never owns again without starting anew", RoleFenced, RoleOwner, Facts{Lease: held, TookOver: true}, false},
		{"a fenced run never follows without starting anew", RoleFenced, RoleFollowing, Facts{Step: stepFollow}, false},
		{"a fenced run starts anew", RoleFenced, RoleNew, Facts{}, true},
		{"an owner never stands by without a fence", RoleOwner, RoleFollowing, Facts{Step: stepFollow}, false},
		{"a run leaves holding the lease, caught up", RoleLeaving, RoleLeft, Facts{Lease: held, CaughtUp: true}, true},
		{"a run never leaves behind its log", RoleLeaving, RoleLeft, Facts{Lease: held}, false},
		{"a run never leaves without the lease", RoleNew, RoleLeaving, Facts{Lease: lapsed}, false},
		{"a run that left is no copy", RoleLeft, RoleFollowing, Facts{Step: stepFollow}, false},
		{"every role may stop", RoleOwner, RoleStopped, Facts{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := &Roles{role: tt.from, log: cmpLogger(nil)}
			err := r.Move(t.Context(), tt.to, tt.f)
			if (err == nil) != tt.ok || err != nil && !errors.Is(err, ErrIllegalMove) {
				t.Fatalf("%s to %s: %v, want allowed %v", tt.from, tt.to, err, tt.ok)
			}
			want := tt.from
			if tt.ok {
				want = tt.to
			}
			if got, _ := r.Role(); got != want {
				t.Fatalf("role %s after the move, want %s", got, want)
			}
		})
	}
}

// Whatever moves a run tries, in any order and with any facts, the ones
// taken keep the lifecycle's invariants over the whole history: a run
// owns only after a take-over with the lease from a copy that follows the
// log, and after a fence it owns again only by way of new.
func TestRolesInvariantsHoldOverAnyHistory(t *testing.T) {
	t.Parallel()
	held := &Lease{rev: 1, renewed: time.Now(), ttl: time.Hour}
	all := []Role{RoleNew, RoleWaiting, RoleRestoring, RoleFollowing, RoleTaking, RoleOwner, RoleFenced, RoleLeaving, RoleLeft}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		r := NewRoles(nil, nil)
		history := []Role{RoleNew}
		for range 40 {
			f := Facts{Step: step(rng.IntN(4)), TookOver: rng.IntN(2) == 0, CaughtUp: rng.IntN(2) == 0}
			if rng.IntN(2) == 0 {
				f.Lease = held
			}
			to := all[rng.IntN(len(all))]
			if r.Move(t.Context(), to, f) == nil {
				history = append(history, to)
			}
		}
		checkHistory(t, history)
	}
}

// checkHistory fails t if h breaks an invariant of the lifecycle.
func checkHistory(t *testing.T, h []Role) {
	t.Helper()
	for i, r := range h {
		if i == 0 {
			continue
		}
		prev := h[i-1]
		switch r {
		case RoleOwner:
			if prev != RoleTaking {
				t.Fatalf("owner after %s: %v", prev, h)
			}
		case RoleTaking:
			if prev != RoleFollowing {
				t.Fatalf("a take-over after %s: %v", prev, h)
			}
		case RoleLeft:
			if prev != RoleLeaving {
				t.Fatalf("left after %s: %v", prev, h)
			}
		}
		if prev == RoleFenced && r != RoleNew {
			t.Fatalf("%s straight after a fence: %v", r, h)
		}
		if prev == RoleLeft {
			t.Fatalf("%s after leaving the log: %v", r, h)
		}
	}
}
