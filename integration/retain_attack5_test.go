package integration

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
)

// Attack 5 on 1275ec7 (the lease key kept, Lease.Retain, when a
// standby-mode owner's log is deleted). A clean SIGTERM that arrives
// right after the owner lost its partition to the deletion (its "lost"
// record: the key already kept, not yet taken again) stops the run with
// the key still naming it: dacc95a lets the lease go only for a stop
// that came before the loss, and the standby waited the whole TTL for a
// lease whose holder stopped cleanly (4 of 6 runs). Now a stop lets a
// kept key go as the run ends (runOwned's deferred Lease.Release).
func TestAttack5SIGTERMRightAfterTheLogsDeletion(t *testing.T) {
	sigtermRightAfterTheLogsDeletion(t) // in ops_attack11_retainflake_test.go, which loops it
}

// The owner paused (SIGSTOP) right after it lost its partition to the
// log's deletion (the key kept, not yet taken again), past the lease's
// TTL, with queued rows and a destination that does not honour keys: the
// kept key expires, the standby takes the partition in the gap and
// begins the new log from its copy; the owner wakes to a key that is not
// at the revision it kept. No row sent twice, every event once.
func TestAttack5OwnerPausedInTheRetainGap(t *testing.T) {
	a := newA2(t, "PAY")
	dest, dirs, _, hosts := a.slowWebhookPair(t, 150*time.Millisecond, 1)
	evs := makeEvents(randFor(t), a.r.pub, 120)
	a.r.publish(evs)
	a.r.waitApplied("every event applied", len(evs), dirs[0])
	a.deleteLogs(0, 1)
	deadline := time.Now().Add(2 * time.Minute)
	for !logged(hosts[0], "lost", 0) {
		if time.Now().After(deadline) {
			t.Fatalf("A never logged the loss of partition 0:\n%s", tail(hosts[0].output()))
		}
	}
	hosts[0].signal(syscall.SIGSTOP)
	paused := time.Now()
	time.Sleep(10 * time.Second) // the pause is the operation: well past the TTL (about 3 s), for B to take over
	hosts[0].signal(syscall.SIGCONT)
	dest.SetDelay(0)
	for i := range ownedDurables {
		consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("partition %d's new log begun", i), func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			s, err := a.r.c.js.Stream(ctx, a.r.changelogStream(i))
			return err == nil && s.CachedInfo().State.LastSeq > 0 && a.holderPid(i) != 0
		})
	}
	alive(t, hosts[0], "A")
	alive(t, hosts[1], "B")
	o0, o1 := a.ownerOf("after the pause", 0, hosts...), a.ownerOf("after the pause", 1, hosts...)
	finals := openLedgers(t, partDB(dirs[o0], 0), partDB(dirs[o1], 1))
	waitSettled(t, finals...)
	rows := append(outboxRows(t, finals[0]), outboxRows(t, finals[1])...)
	review := checkSentAtMostOnce(t, dest, rows, len(evs))
	never := reviewBreakdown(t, dest, rows)
	bOwned := 0
	for i := range ownedDurables {
		bOwned += roleRecordsSince(hosts[1], "owner", i, paused)
	}
	t.Logf("owners after: %d %d (B's owner records since the pause: %d); %d items at the destination, %d rows in review, %d of them never sent",
		o0, o1, bOwned, len(dest.Items()), review, never)
	if bOwned == 0 {
		w := grepLines(hosts[1].output(), copyWaits)
		if len(w) > 1500 {
			w = w[:1500]
		}
		t.Logf("B did not take over in the gap; its waits:\n%s", w)
	}
	a.finish(t, dirs, hosts, evs, nil)
}

// The log deleted twice quickly under a busy owner with queued rows and a
// destination that does not honour keys: the second deletion lands just
// after the owner began the first new log itself (resumed, its rows left
// queued). No row sent twice, every event once, nobody exits.
func TestAttack5LogDeletedTwiceQuickly(t *testing.T) {
	a := newA2(t, "PAY")
	dest, dirs, _, hosts := a.slowWebhookPair(t, 100*time.Millisecond, 2)
	evs := makeEvents(randFor(t), a.r.pub, 200)
	tr := a.traffic(evs, 5, 10*time.Millisecond)
	a.atLeast("the first 60 applied", 60, dirs[0])
	first := time.Now()
	a.deleteLogs(0, 1)
	deadline := time.Now().Add(2 * time.Minute)
	for roleRecordsSince(hosts[0], "owner", 0, first) == 0 && roleRecordsSince(hosts[1], "owner", 0, first) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("nobody owned partition 0 again after the first deletion:\n%s", tail(hosts[0].output()))
		}
	}
	a.deleteLogs(0, 1)
	a.settleWebhookPair(t, "after two deletions", tr, dest, dirs, hosts, evs)
}
