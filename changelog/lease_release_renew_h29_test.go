package changelog_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
)

// Helper-30: Keep runs while another goroutine releases the lease (as Own
// does on ErrWaiting) and takes it again, many times, each release aimed
// at one of Keep's ticks so that a renewal is often on its way when it
// lands (76957e3, 94eda7b: such a renewal no longer holds the lease again,
// and ends Keep with ErrLeaseLost). After each release:
//   - the key does not name this owner (no Acquire of its since);
//   - the owner does not believe it holds the lease (Held, the fence);
//   - another owner takes the key at once, without waiting for a TTL,
//     and while it holds it this owner does not believe it holds it;
//   - Keep's error, if it ended, is ErrLeaseLost.
func TestAttackH29KeepWhileTheLeaseIsReleasedAndTakenAgain(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	s := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, s)
	const ttl = time.Second
	a := openLease(t, js, "pay-h29", "host-a:1", ttl)
	b := openLease(t, js, "pay-h29", "host-b:2", ttl)
	if err := a.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 30))

	type keeping struct {
		started time.Time
		stop    context.CancelFunc
		done    chan error
	}
	keep := func() *keeping {
		kctx, stop := context.WithCancel(ctx)
		k := &keeping{started: time.Now(), stop: stop, done: make(chan error, 1)}
		go func() { k.done <- a.Keep(kctx) }()
		return k
	}
	k := keep()
	defer func() {
		if k != nil {
			k.stop()
			<-k.done
		}
	}()
	// ended takes Keep's end, if it ended: its error must be ErrLeaseLost.
	raced, lostOther, keeps := 0, 0, 1
	ended := func(round int, what string) bool {
		select {
		case err := <-k.done:
			switch {
			case err == nil:
				t.Errorf("round %d (%s): Keep returned nil while its context was live", round, what)
			case !errors.Is(err, changelog.ErrLeaseLost):
				t.Errorf("round %d (%s): Keep ended with %v, want ErrLeaseLost", round, what, err)
			case strings.Contains(err.Error(), "released while its renewal was on its way"):
				raced++
			default:
				lostOther++
			}
			k.stop()
			k = nil
			return true
		default:
			return false
		}
	}

	const rounds = 60
	for round := range rounds {
		// Aim at one of Keep's ticks (every ttl/4 from its start): the
		// renewal begins there and takes a millisecond or so.
		period := ttl / 4
		since := time.Since(k.started)
		next := k.started.Add((since/period + 1) * period)
		offset := time.Duration(rng.IntN(4000)-1000) * time.Microsecond
		time.Sleep(time.Until(next.Add(offset)))

		a.Release()
		if holder, err := b.Holder(ctx); err != nil {
			t.Fatalf("round %d: read the key: %v", round, err)
		} else if holder == "host-a:1" {
			t.Errorf("round %d: right after the release returned the key names host-a:1, the owner that released it", round)
		}
		if a.Held() {
			t.Errorf("round %d: the owner believes it holds the lease (Held) right after its release", round)
		}
		if err := a.Fence(); err == nil {
			t.Errorf("round %d: the fence lets a commit through right after the release", round)
		}
		// Another owner takes it at once: the release freed the key.
		if err := b.Acquire(ctx); err != nil {
			holder, _ := b.Holder(ctx)
			t.Fatalf("round %d: another owner cannot take the key right after the release (it names %q): %v", round, holder, err)
		}
		// Let a renewal that was on its way land, then look again.
		time.Sleep(time.Duration(rng.IntN(int(ttl/4/time.Millisecond))) * time.Millisecond)
		if a.Held() {
			t.Errorf("round %d: the owner believes it holds the lease (Held) while another holds the key", round)
		}
		if holder, err := b.Holder(ctx); err != nil || holder != "host-b:2" {
			t.Errorf("round %d: while host-b:2 holds it the key names %q (%v)", round, holder, err)
		}
		if err := b.Renew(ctx); err != nil {
			t.Errorf("round %d: the other owner's renewal: %v", round, err)
		}
		b.Release()
		if holder, err := b.Holder(ctx); err != nil || holder != "" {
			t.Errorf("round %d: after the other's release the key names %q (%v), want nobody", round, holder, err)
		}
		// The owner takes it again, at once.
		if err := a.Acquire(ctx); err != nil {
			t.Fatalf("round %d: the owner cannot take the key again after the other's release: %v", round, err)
		}
		if holder, err := b.Holder(ctx); err != nil || holder != "host-a:1" {
			t.Errorf("round %d: after the owner's take the key names %q (%v)", round, holder, err)
		}
		if k != nil {
			ended(round, "after the round")
		}
		if k == nil {
			k = keep()
			keeps++
		}
	}
	// Keep's end with its context: it releases the lease.
	k.stop()
	if err := <-k.done; err != nil && !errors.Is(err, changelog.ErrLeaseLost) {
		t.Errorf("the last Keep ended with %v, want nil or ErrLeaseLost", err)
	}
	k = nil
	a.Release()
	if holder, err := b.Holder(ctx); err != nil || holder != "" {
		t.Errorf("after the last stop the key names %q (%v), want nobody", holder, err)
	}
	if err := b.Acquire(ctx); err != nil {
		t.Errorf("another owner after the last stop: %v", err)
	}
	b.Release()
	t.Logf("%d rounds, %d Keeps: %d ended by a renewal racing the release, %d lost otherwise", rounds, keeps, raced, lostOther)
}
