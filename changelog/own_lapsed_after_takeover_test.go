package changelog_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats-server/v2/server"
)

// A lease that lapses after the store took the log over and before the
// run owns it (a stalled host: helper-24's whole-host stall) is a lost
// lease, which the run stands by on, not the move "taking to owner" the
// roles table refuses and logs as a move the lifecycle does not allow.
func TestALeaseLapsedAfterTheTakeOverIsALostLease(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := consumertest.RunServerWithOptions(t, &server.Options{StoreDir: t.TempDir(), Port: consumertest.FreePort(t)})
	_, js := consumertest.Connect(t, s)
	lease, err := changelog.OpenLease(ctx, js, "PAY", "pay-p0", "host-a", 2*time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	// Nobody renews the lease: once the store has taken the log over, the
	// run's logger waits until it lapses.
	var moves lapseAfter
	moves.lease, moves.next = lease, slog.NewTextHandler(&moves.out, nil)
	logger := slog.New(&moves)
	cfg := changelog.Config{Stream: "PAY", Durable: "pay-p0", Logger: logger, Roles: changelog.NewRoles(logger, nil)}
	log := ensure(t, js, cfg)
	if err := log.Move(ctx, changelog.RoleFollowing, changelog.Facts{}); err != nil { // the zero step: follow
		t.Fatal(err)
	}
	st := openLedger(t, filepath.Join(t.TempDir(), "a.db"), log.Owned(lease))
	err = changelog.Own(ctx, log, lease, st)
	if !errors.Is(err, changelog.ErrLeaseLost) || errors.Is(err, changelog.ErrIllegalMove) {
		t.Fatalf("a take-over whose lease lapsed before owning: %v, want ErrLeaseLost", err)
	}
	if !moves.tookOver() {
		t.Fatal("the store never took the log over: the test proves nothing")
	}
	if out := moves.text(); strings.Contains(out, "does not allow") {
		t.Fatalf("a refused move was logged:\n%s", out)
	}
}

// lapseAfter is a log handler that, at the take-over's record, waits
// until its lease lapses, and keeps every record.
type lapseAfter struct {
	lease *changelog.Lease
	next  slog.Handler
	mu    sync.Mutex
	out   strings.Builder
	took  bool
}

func (h *lapseAfter) Enabled(context.Context, slog.Level) bool { return true }
func (h *lapseAfter) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *lapseAfter) WithGroup(string) slog.Handler            { return h }

func (h *lapseAfter) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "took the log over") {
		for h.lease.Held() && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond) // polling the outcome: the lease's own clock
		}
		h.mu.Lock()
		h.took = true
		h.mu.Unlock()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.next.Handle(ctx, r)
}

func (h *lapseAfter) tookOver() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.took
}

func (h *lapseAfter) text() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.out.String()
}
