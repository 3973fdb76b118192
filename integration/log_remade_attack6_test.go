package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
)

// Attack 6 on c6366ef and 069630b: the log deleted three times under a
// busy owner with queued rows and a destination that does not honour
// keys, each deletion once someone owned partition 0 again. Someone owns
// each partition within a bounded time, no row sent twice, every event
// once, nobody exits.
func TestAttack6LogDeletedThreeTimes(t *testing.T) {
	aaLong(t)
	a := newA2(t, "PAY")
	dest, dirs, _, hosts := a.slowWebhookPair(t, 100*time.Millisecond, 2)
	evs := makeEvents(randFor(t), a.r.pub, 240)
	tr := a.traffic(evs, 5, 10*time.Millisecond)
	a.atLeast("the first 50 applied", 50, dirs[0])
	for round := 1; round <= 3; round++ {
		since := time.Now()
		a.deleteLogs(0, 1)
		if round == 3 {
			break
		}
		consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("partition 0 owned again after deletion %d", round), func() bool {
			return roleRecordsSince(hosts[0], "owner", 0, since) > 0 || roleRecordsSince(hosts[1], "owner", 0, since) > 0
		})
	}
	a.settleWebhookPair(t, "after three deletions", tr, dest, dirs, hosts, evs)
}

// The log deleted again as soon as it exists again (made by either host's
// look, the standby's reopen or the owner's), three times, under traffic:
// the new empty log is the one a host just opened (or is beginning). The
// partition is owned again within a bounded time, every event once.
func TestAttack6LogDeletedRightAfterItIsMadeAgain(t *testing.T) {
	aaLong(t)
	a := newA2(t, "PAY")
	dest, dirs, _, hosts := a.slowWebhookPair(t, 50*time.Millisecond, 2)
	evs := makeEvents(randFor(t), a.r.pub, 200)
	tr := a.traffic(evs, 5, 10*time.Millisecond)
	a.atLeast("the first 50 applied", 50, dirs[0])
	name := a.r.changelogStream(0)
	var prev time.Time
	for round := 1; round <= 3; round++ {
		if round > 1 {
			consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("partition 0's log made again after deletion %d", round-1), func() bool {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				s, err := a.r.c.js.Stream(ctx, name)
				return err == nil && !s.CachedInfo().Created.Equal(prev)
			})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s, err := a.r.c.js.Stream(ctx, name)
		cancel()
		if err == nil {
			prev = s.CachedInfo().Created
		}
		a.deleteLogs(0)
	}
	a.settleWebhookPair(t, "after the deletions", tr, dest, dirs, hosts, evs)
}

// settleWebhookPair ends an attack on slowWebhookPair's hosts under tr:
// the traffic done and the destination fast again, every event applied,
// both hosts alive, every outbox row sent or in review, none sent twice,
// and each event once in the final ledgers.
func (a *a2) settleWebhookPair(t *testing.T, when string, tr *traffic, dest *webhooktest.Destination, dirs []string, hosts []*proc, evs []event) {
	t.Helper()
	tr.wait(t)
	dest.SetDelay(0)
	a.r.waitApplied("every event applied", len(evs), dirs...)
	alive(t, hosts[0], "A")
	alive(t, hosts[1], "B")
	o0, o1 := a.ownerOf(when, 0, hosts...), a.ownerOf(when, 1, hosts...)
	finals := openLedgers(t, partDB(dirs[o0], 0), partDB(dirs[o1], 1))
	waitSettled(t, finals...)
	rows := append(outboxRows(t, finals[0]), outboxRows(t, finals[1])...)
	review := checkSentAtMostOnce(t, dest, rows, len(evs))
	never := reviewBreakdown(t, dest, rows)
	t.Logf("owners %s: %d %d; %d items at the destination, %d rows in review, %d of them never sent", when, o0, o1, len(dest.Items()), review, never)
	a.finish(t, dirs, hosts, evs, nil)
}
