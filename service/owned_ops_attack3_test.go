package service

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats.go/jetstream"
)

// Attack 3, 5c: the changelog of an idle owner deleted again and again,
// closer together and further apart than the owner's look at its log
// (5 s), with a standby beside it; then messages: both copies hold each
// once, neither run stopped.
func TestAttack3IdleOwnersLogDeletedRepeatedly(t *testing.T) {
	for _, gap := range []time.Duration{500 * time.Millisecond, 2 * time.Second, 6 * time.Second} {
		t.Run(gap.String(), func(t *testing.T) {
			t.Parallel()
			srv := consumertest.RunServer(t)
			_, js := consumertest.Connect(t, srv)
			a, b := ownedPair(t, srv, js, ackwait.Plan{}, 20)
			name, _ := changelog.Names("S", "d")
			for round := range 3 {
				err := js.DeleteStream(t.Context(), name)
				if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
					t.Fatalf("round %d: %v", round, err)
				}
				time.Sleep(gap) // the operator's pace between deletions
			}
			publish(t, js, 20, 40)
			consumertest.Eventually(t, 3*time.Minute, "both copies hold 40", func() bool {
				for _, h := range []*ownedHost{a, b} {
					select {
					case err := <-h.done:
						t.Fatalf("%s stopped: %v", h.cfg.Owner.Name, err)
					default:
					}
				}
				return processed(t, a.cfg.DB) == 40 && processed(t, b.cfg.DB) == 40
			})
			// And the standby can take over from that copy.
			a.halt()
			publish(t, js, 40, 50)
			consumertest.Eventually(t, 2*time.Minute, "b owns and commits 50", func() bool { return processed(t, b.cfg.DB) == 50 })
			a.start()
			publish(t, js, 50, 60)
			consumertest.Eventually(t, 2*time.Minute, "both hold 60", func() bool {
				return processed(t, a.cfg.DB) == 60 && processed(t, b.cfg.DB) == 60
			})
			a.halt()
			b.halt()
		})
	}
}

// Attack 3, 5c: the changelog deleted just as a new standby starts (and
// restores the snapshot), the owner idle; the owner SIGTERMed after: the
// standby must not take over a copy it never finished.
func TestAttack3LogDeletedWhileAStandbyRestores(t *testing.T) {
	for _, delay := range []time.Duration{0, 100 * time.Millisecond, 300 * time.Millisecond, time.Second} {
		t.Run(fmt.Sprint(delay), func(t *testing.T) {
			t.Parallel()
			srv := consumertest.RunServer(t)
			_, js := consumertest.Connect(t, srv)
			a := newOwnedHost(t, srv.ClientURL(), "a", 0)
			a.start()
			consumertest.Eventually(t, time.Minute, "a owns the partition", func() bool { return hasSnapshot(t, js) })
			publish(t, js, 0, 300)
			consumertest.Eventually(t, 2*time.Minute, "a commits 300", func() bool { return processed(t, a.cfg.DB) == 300 })
			b := newOwnedHost(t, srv.ClientURL(), "b", 0)
			b.start()
			time.Sleep(delay) // where in b's start the deletion lands
			name, _ := changelog.Names("S", "d")
			if err := js.DeleteStream(t.Context(), name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
				t.Fatal(err)
			}
			publish(t, js, 300, 320)
			consumertest.Eventually(t, 3*time.Minute, "both hold 320", func() bool {
				return processed(t, a.cfg.DB) == 320 && processed(t, b.cfg.DB) == 320
			})
			a.halt()
			publish(t, js, 320, 340)
			consumertest.Eventually(t, 2*time.Minute, "b owns and commits 340", func() bool { return processed(t, b.cfg.DB) == 340 })
			b.halt()
		})
	}
}

// Beyond the brief's list: the partition's snapshot deleted (the whole
// bucket, or the object) under a running owner; then the standby's host
// replaced by an empty one. The owner is there and the log is whole from
// entry 1, yet the empty standby waits for a snapshot; the owner stores
// one only at its next SnapshotInterval (10 minutes by default): for that
// long the partition has no second copy.
func TestAttack3SnapshotDeletedThenStandbyReplaced(t *testing.T) {
	for _, what := range []string{"bucket", "object", "control-15s-interval"} {
		t.Run(what, func(t *testing.T) {
			t.Parallel()
			srv := consumertest.RunServer(t)
			_, js := consumertest.Connect(t, srv)
			var a, b *ownedHost
			if what == "control-15s-interval" {
				// The control: an owner that snapshots every 15 s mends it
				// by itself, so the wait above is the interval's alone.
				a, b = newOwnedHost(t, srv.ClientURL(), "a", 15*time.Second), newOwnedHost(t, srv.ClientURL(), "b", 0)
				a.start()
				consumertest.Eventually(t, time.Minute, "a owns the partition", func() bool { return hasSnapshot(t, js) })
				b.start()
				publish(t, js, 0, 20)
				consumertest.Eventually(t, time.Minute, "b's copy holds 20", func() bool { return processed(t, b.cfg.DB) == 20 })
			} else {
				a, b = ownedPair(t, srv, js, ackwait.Plan{}, 20)
			}
			name, _ := changelog.Names("S", "d")
			switch what {
			case "bucket", "control-15s-interval":
				if err := js.DeleteObjectStore(t.Context(), changelog.SnapshotBucket); err != nil {
					t.Fatal(err)
				}
			case "object":
				obs, err := js.ObjectStore(t.Context(), changelog.SnapshotBucket)
				if err != nil {
					t.Fatal(err)
				}
				if err := obs.Delete(t.Context(), name); err != nil {
					t.Fatal(err)
				}
			}
			publish(t, js, 20, 30)
			consumertest.Eventually(t, time.Minute, "both hold 30", func() bool {
				return processed(t, a.cfg.DB) == 30 && processed(t, b.cfg.DB) == 30
			})
			b.halt()
			for _, f := range b.files() {
				if err := os.Remove(f); err != nil {
					t.Fatal(err)
				}
			}
			b.start()
			publish(t, js, 30, 40)
			consumertest.Eventually(t, 90*time.Second, "the replaced standby's copy holds 40 (the owner running, its log whole)", func() bool {
				return processed(t, b.cfg.DB) == 40
			})
			a.halt()
			b.halt()
		})
	}
}
