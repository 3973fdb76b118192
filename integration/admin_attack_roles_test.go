package integration

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
)

var allRoles = []string{"jetledger-p0/owner", "jetledger-p0/standby", "jetledger-p1/owner", "jetledger-p1/standby"}

// Promise 4: owners restarted and paused keep exactly one owner's API per
// partition: discovery (micro's $SRV.INFO, what `nats micro ls` and the CLI
// use) lists one owner and one standby per partition after a SIGTERM and a
// restart, the CLI finds both; with the owner SIGSTOPped and taken over,
// every request to the owner's address is answered (by the new owner);
// after SIGCONT the old owner stands by, serving the standby's API only.
func TestAdminAttackRestartedAndPausedOwnersLeaveOneAPIEach(t *testing.T) {
	r := newOwnedRig(t, startCluster(t), "ADMDISC")
	nc := r.c.js.Conn()
	dirs := [2]string{t.TempDir(), t.TempDir()}
	a := r.run(dirs[0], r.c.urls(), "--standby")
	r.waitRole(a, "run A", "owner", 0, 1)
	b := r.run(dirs[1], r.c.urls(), "--standby")
	r.waitStandsBy(b, "run B")
	r.publish(makeEvents(randFor(t), r.pub, 50))
	r.waitDrained("the events applied")
	waitFound := func(what string, want ...string) {
		t.Helper()
		var got map[string][]string
		consumertest.Eventually(t, 2*time.Minute, what, func() bool {
			got = found(t, nc)
			return exactlyOneEach(got, want...)
		})
		t.Logf("%s: %v", what, got)
	}
	waitFound("one owner and one standby per partition", allRoles...)
	r.stop(a, "run A")
	r.waitRole(b, "run B", "owner", 0, 1)
	waitFound("B owning both, no standby", "jetledger-p0/owner", "jetledger-p1/owner")
	a = r.run(dirs[0], r.c.urls(), "--standby")
	r.waitStandsBy(a, "run A, restarted")
	waitFound("A restarted standing by", allRoles...)
	url := r.c.url(1)
	for _, args := range [][]string{{"--partition", "0"}, {"--partition", "1", "--standby"}} {
		if out, code := cli(t, append([]string{"outbox", "list", "--nats", url}, args...)...); code != 0 {
			t.Errorf("outbox list %v after the restart: exit %d\n%s", args, code, out)
		}
	}
	// The owner B paused; A takes over while B's connection still holds
	// its subscriptions.
	b.signal(syscall.SIGSTOP)
	r.waitRole(a, "run A", "owner", 0, 1)
	// A serves the owner's API once it consumes, a moment after it says it
	// owns: from its first answer on, every request is answered.
	consumertest.Eventually(t, time.Minute, "run A answering the owner's API", func() bool {
		var st admin.Status
		return callAdmin(nc, admin.Address{Stream: r.stream, Durable: ownedDurables[0]}, "status", nil, &st, 3*time.Second) == nil
	})
	unanswered := 0
	for range 20 {
		var st admin.Status
		if err := callAdmin(nc, admin.Address{Stream: r.stream, Durable: ownedDurables[0]}, "status", nil, &st, 3*time.Second); err != nil {
			unanswered++
		}
	}
	if unanswered > 0 {
		t.Errorf("with the old owner SIGSTOPped and taken over, %d of 20 requests to the owner's address went unanswered", unanswered)
	}
	list := start(t, nil, "outbox", "list", "--nats", url, "--partition", "0")
	select {
	case <-list.done:
		if code := list.wait(0); code != 0 {
			t.Errorf("the CLI with the old owner paused: exit %d: %.300s", code, list.output())
		}
	case <-time.After(time.Minute):
		t.Errorf("the CLI's outbox list with the old owner paused has not exited a minute later (output %q)", list.output())
		list.kill()
	}
	b.signal(syscall.SIGCONT)
	consumertest.Eventually(t, 2*time.Minute, "B lost its partitions", func() bool { return logged(b, "lost", 0) || logged(b, "lost", 1) })
	waitFound("B back, standing by", allRoles...)
	for range 20 {
		var st admin.Status
		if err := callAdmin(nc, admin.Address{Stream: r.stream, Durable: ownedDurables[0]}, "status", nil, &st, 3*time.Second); err != nil || st.Role != "owner" {
			t.Errorf("after B came back, a request to the owner's address: %v %s", err, st.Role)
		}
	}
	r.stop(b, "run B, standing by")
	r.stop(a, "run A")
	r.done()
}

// Promise 5: a standby never changes its copy through the API: every
// action at its address is refused with 421; after a take-over the new
// owner takes actions; the old owner, restarted as a standby, refuses them
// with 421 naming the new owner, and its copy gets the new owner's actions
// through the log.
func TestAdminAttackStandbyRefusesActionsBeforeAndAfterTakeOver(t *testing.T) {
	r := newOwnedRig(t, startCluster(t), "ADMSTANDBY")
	owner, standby, dirs, dry := reviewed(t, r, 60)
	nc := r.c.js.Conn()
	sb := admin.Address{Stream: r.stream, Durable: ownedDurables[0], Standby: true}
	actions := map[string]any{
		"outbox.resolve":   admin.Act{Who: "sb-ops", IDs: dry[0].IDs, Seen: dry[0].Seen, As: ledger.StatusFailed},
		"outbox.retry":     admin.Act{Who: "sb-ops", IDs: dry[0].IDs, Seen: dry[0].Seen},
		"outbox.cancel":    admin.Act{Who: "sb-ops", IDs: dry[0].IDs, Seen: dry[0].Seen},
		"dlq.discard":      admin.ByID{ID: 1, Who: "sb-ops"},
		"dlq.requeue":      admin.ByID{ID: 1, Who: "sb-ops"},
		"conflicts.ack":    admin.ByID{ID: 1, Who: "sb-ops"},
		"consumers.forget": admin.Forget{Stream: "X", Durable: "y", Who: "sb-ops"},
	}
	refused := func(stage, mustName string) {
		t.Helper()
		for ep, req := range actions {
			err := callAdmin(nc, sb, ep, req, nil, 10*time.Second)
			var e *admin.Error
			if !errors.As(err, &e) || e.Code != admin.CodeNotOwner || (mustName != "" && !strings.Contains(e.Error(), mustName)) {
				t.Errorf("%s: %s at the standby: %v, want %s naming %q", stage, ep, err, admin.CodeNotOwner, mustName)
			}
		}
		var st admin.Status
		if err := callAdmin(nc, sb, "status", nil, &st, 10*time.Second); err != nil || st.Role != "standby" || (mustName != "" && st.Owner != mustName) {
			t.Errorf("%s: the standby's status: %v %+v", stage, err, st)
		}
	}
	refused("before the take-over", "")
	for i, db := range r.ledgers(dirs[1]) {
		if n := count(t, db, `SELECT count(*) FROM jetledger_audit`); n != 0 {
			t.Errorf("partition %d: the standby's copy holds %d records", i, n)
		}
	}
	owner.kill()
	r.waitRole(standby, "the standby", "owner", 0, 1)
	recOf := func(p *proc) string {
		rec, _ := p.record(func(m map[string]any) bool { return m["role"] == "owner" && m["partition"] == float64(0) })
		return fmt.Sprint(rec["owner"])
	}
	name, oldName := recOf(standby), recOf(owner)
	t.Logf("the new owner logs itself as %q, the old one as %q", name, oldName)
	var done admin.Acted
	consumertest.Eventually(t, time.Minute, "the new owner takes the action", func() bool {
		return callAdmin(nc, admin.Address{Stream: r.stream, Durable: ownedDurables[0]}, "outbox.resolve",
			admin.Act{Who: "new-ops", IDs: dry[0].IDs, Seen: time.Now(), As: ledger.StatusFailed}, &done, 30*time.Second) == nil
	})
	// A try that failed (the owner still settling in, or its answer late)
	// may have resolved rows all the same, which the try that answered
	// then skips: each row must be resolved once, by new-ops, whichever
	// try did it (the audit count below).
	if len(done.Done)+done.SkippedCount != dry[0].Matched {
		t.Fatalf("the new owner's resolve: %+v", done)
	}
	if done.SkippedCount > 0 {
		t.Logf("resolved by an earlier try: %+v", done.Skipped)
	}
	old := r.run(dirs[0], r.c.urls(), "--standby")
	r.waitStandsBy(old, "the old owner, restarted")
	consumertest.Eventually(t, time.Minute, "the old owner's standby API answering", func() bool {
		var st admin.Status
		return callAdmin(nc, sb, "status", nil, &st, 5*time.Second) == nil && st.Owner != ""
	})
	refused("after the take-over", name)
	copies := r.ledgers(dirs[0])
	consumertest.Eventually(t, time.Minute, "the old owner's copy holding the new owner's action", func() bool {
		return count(t, copies[0], `SELECT count(*) FROM jetledger_audit WHERE who = 'new-ops'`) == dry[0].Matched
	})
	if n := count(t, copies[0], `SELECT count(*) FROM jetledger_audit WHERE who = 'sb-ops'`) + count(t, r.ledgers(dirs[1])[0], `SELECT count(*) FROM jetledger_audit WHERE who = 'sb-ops'`); n != 0 {
		t.Errorf("%d records of actions asked of standbys", n)
	}
	if got := found(t, nc); !exactlyOneEach(got, allRoles...) {
		t.Errorf("discovery after the take-over: %v", got)
	}
	r.stop(old, "the old owner, standing by")
	r.stop(standby, "the new owner")
	r.done()
}
