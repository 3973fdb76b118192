package changelog

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"
)

// A lease that lapsed while the copy was prepared (a slow server, a pause:
// helper-19's owner paused around its timings) makes the take-over a lost
// lease, which the run stands by on, not a move the roles table refuses,
// which ended the process (exit 1, "following to taking: the lease is not
// held").
func TestATakeOverWhoseLeaseLapsedIsALostLease(t *testing.T) {
	t.Parallel()
	roles := NewRoles(slog.New(slog.DiscardHandler), nil)
	if err := roles.Move(context.Background(), RoleFollowing, Facts{Step: stepFollow}); err != nil {
		t.Fatal(err)
	}
	l := &Log{cfg: Config{Roles: roles}}
	lapsed := &Lease{rev: 1, renewed: time.Now().Add(-time.Hour), ttl: time.Second}
	err := Own(context.Background(), l, lapsed, nil)
	if !errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrIllegalMove) {
		t.Fatalf("a take-over with a lapsed lease: %v, want ErrLeaseLost", err)
	}
	if r, _ := roles.Role(); r != RoleFollowing {
		t.Fatalf("the role is %v, want it still following", r)
	}
}
