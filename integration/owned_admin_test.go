package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
)

// reviewed starts an owner (--changelog) and a standby (--standby) of
// the rig's two partitions, each sending to a destination that answers
// 500 (an unknown outcome: review), publishes n events and waits until
// each partition has rows in review, seen through the admin API; it
// returns the runs, their hosts' directories and each partition's dry
// run of a resolve (the rows' ids, when they were seen).
func reviewed(t *testing.T, r *ownedRig, n int) (owner, standby *proc, dirs [2]string, dry [2]admin.Acted) {
	t.Helper()
	dest := webhooktest.NewDestination(t, false)
	dest.FailWith(http.StatusInternalServerError)
	dirs = [2]string{t.TempDir(), t.TempDir()}
	owner = r.run(dirs[0], r.c.urls(), webhookArgs(dest, "--changelog")...)
	r.waitRole(owner, "the owner", "owner", 0, 1)
	standby = r.run(dirs[1], r.c.urls(), webhookArgs(dest, "--standby")...)
	r.waitStandsBy(standby, "the standby")
	r.publish(makeEvents(randFor(t), r.pub, n))
	r.waitDrained("every event applied")
	nc := r.c.js.Conn()
	for i, durable := range ownedDurables {
		addr := admin.Address{Stream: r.stream, Durable: durable}
		consumertest.Eventually(t, 2*time.Minute, durable+"'s rows in review, through the API", func() bool {
			var pending admin.Status
			if err := callAdmin(nc, addr, "status", nil, &pending, 5*time.Second); err != nil || pending.Outbox[ledger.StatusQueued]+pending.Outbox[ledger.StatusSending] > 0 {
				return false
			}
			err := callAdmin(nc, addr, "outbox.resolve", admin.Act{Who: "ops", Status: ledger.StatusReview, As: ledger.StatusFailed, DryRun: true}, &dry[i], 5*time.Second)
			return err == nil && dry[i].Matched > 0
		})
	}
	return owner, standby, dirs, dry
}

// callAdmin asks endpoint at addr within timeout.
func callAdmin(nc *nats.Conn, addr admin.Address, endpoint string, req, resp any, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return admin.Call(ctx, nc, addr, endpoint, req, resp)
}

// resolveAll resolves every row in review at addr as failed, as who: a
// dry run, then the action on the rows it saw.
func resolveAll(nc *nats.Conn, addr admin.Address, who string) (dry, done admin.Acted, err error) {
	err = callAdmin(nc, addr, "outbox.resolve", admin.Act{Who: who, Status: ledger.StatusReview, As: ledger.StatusFailed, DryRun: true}, &dry, time.Minute)
	if err != nil {
		return dry, done, err
	}
	err = callAdmin(nc, addr, "outbox.resolve", admin.Act{Who: who, IDs: dry.IDs, Seen: dry.Seen, As: ledger.StatusFailed}, &done, time.Minute)
	return dry, done, err
}

// audited counts the records of who's actions in db.
func audited(t *testing.T, db *sql.DB, who string) int {
	return count(t, db, `SELECT count(*) FROM jetledger_audit WHERE who = ?`, who)
}

// Issue 43: review rows of an owned partition resolved through the
// owner's admin API, and the owner SIGKILLed as soon as the answer came:
// the standby takes over holding every row acted on as failed, with one
// record each, and serves the API itself.
func TestAnActionJustBeforeTheOwnersSIGKILLIsHeldOnceByTheStandby(t *testing.T) {
	r := newOwnedRig(t, startCluster(t), "ADMKILL")
	owner, standby, dirs, dry := reviewed(t, r, 60)
	nc := r.c.js.Conn()
	done := 0
	for i, durable := range ownedDurables {
		var out admin.Acted
		err := callAdmin(nc, admin.Address{Stream: r.stream, Durable: durable}, "outbox.resolve",
			admin.Act{Who: "ops@example", IDs: dry[i].IDs, Seen: dry[i].Seen, As: ledger.StatusFailed, Note: "not at the destination"}, &out, time.Minute)
		if err != nil || len(out.Done) != dry[i].Matched {
			t.Fatalf("%s: the resolve: %v %+v", durable, err, out)
		}
		done += len(out.Done)
	}
	owner.kill()
	r.waitRole(standby, "the standby", "owner", 0, 1)
	now := r.ledgers(dirs[1])
	records := 0
	for i, db := range now {
		if n := count(t, db, `SELECT count(*) FROM outbox WHERE status = 'review'`); n != 0 {
			t.Errorf("partition %d: %d rows still in review in the new owner's ledger", i, n)
		}
		if n := count(t, db, `SELECT count(*) FROM (SELECT target FROM jetledger_audit WHERE who = 'ops@example' GROUP BY target HAVING count(*) > 1)`); n != 0 {
			t.Errorf("partition %d: %d rows with more than one record of the action", i, n)
		}
		records += audited(t, db, "ops@example")
	}
	if records != done {
		t.Fatalf("the new owner's ledgers hold %d records of the action, want %d (one per row done)", records, done)
	}
	var st admin.Status
	consumertest.Eventually(t, time.Minute, "the new owner answering the API", func() bool {
		return callAdmin(nc, admin.Address{Stream: r.stream, Durable: ownedDurables[0]}, "status", nil, &st, 5*time.Second) == nil
	})
	if st.Outbox[ledger.StatusReview] != 0 {
		t.Fatalf("the new owner's status: %+v", st)
	}
	t.Logf("%d rows resolved through the API just before the owner's SIGKILL; the new owner holds each once", done)
	r.stop(standby, "the new owner")
	r.done()
}

// Issue 43: an owner SIGSTOPped with actions of the admin API on their way
// to it (only it serves the API then); the standby takes over; the old
// owner is SIGCONTed. No action reaches either ledger through the paused
// owner: each is refused (the log fences the old owner) or unanswered,
// never answered done; the new owner then takes the same action itself.
func TestAPausedOwnersActionsAreRefusedOnceTakenOver(t *testing.T) {
	r := newOwnedRig(t, startCluster(t), "ADMPAUSE")
	zombie, standby, dirs, dry := reviewed(t, r, 60)
	nc := r.c.js.Conn()
	zombie.signal(syscall.SIGSTOP)
	consumertest.Eventually(t, time.Minute, "the owner stopped", func() bool { return isStopped(zombie) })
	type answer struct {
		out admin.Acted
		err error
	}
	answers := make([]answer, len(ownedDurables))
	var wg sync.WaitGroup
	for i, durable := range ownedDurables {
		wg.Go(func() {
			answers[i].err = callAdmin(nc, admin.Address{Stream: r.stream, Durable: durable}, "outbox.resolve",
				admin.Act{Who: "zombie-ops", IDs: dry[i].IDs, Seen: dry[i].Seen, As: ledger.StatusFailed}, &answers[i].out, 2*time.Minute)
		})
	}
	r.waitRole(standby, "the standby", "owner", 0, 1)
	zombie.signal(syscall.SIGCONT)
	if code := zombie.wait(time.Minute); code == 0 {
		t.Fatalf("the old owner exited 0 after losing its partitions:\n%s", zombie.output())
	}
	wg.Wait()
	for i, a := range answers {
		var e *admin.Error
		switch {
		case a.err == nil:
			t.Errorf("partition %d: the paused owner's action was answered done after the take-over: %+v", i, a.out)
		case errors.As(a.err, &e) && e.Code != admin.CodeNotOwner:
			t.Errorf("partition %d: the paused owner's refusal has code %s, want %s: %v", i, e.Code, admin.CodeNotOwner, a.err)
		case e == nil && !errors.Is(a.err, admin.ErrNoRun):
			t.Errorf("partition %d: the paused owner's action: %v, want a refusal or no answer", i, a.err)
		}
		t.Logf("partition %d: the action sent to the paused owner: %v", i, a.err)
	}
	now, old := r.ledgers(dirs[1]), r.ledgers(dirs[0])
	for i := range now {
		if n := audited(t, now[i], "zombie-ops") + audited(t, old[i], "zombie-ops"); n != 0 {
			t.Errorf("partition %d: %d records of the paused owner's action", i, n)
		}
		checkHoldsOnlyTheLog(t, old[i], now[i], i, tookOverAfter(t, standby, i))
	}
	// The new owner takes the action: the rows were never changed.
	for i, durable := range ownedDurables {
		again, out, err := resolveAll(nc, admin.Address{Stream: r.stream, Durable: durable}, "ops")
		if err != nil || again.Matched != dry[i].Matched || len(out.Done) != dry[i].Matched {
			t.Fatalf("%s: the new owner's resolve of the %d rows in review: %v %+v %+v", durable, dry[i].Matched, err, again, out)
		}
	}
	r.stop(standby, "the new owner")
	r.done()
}

// A message with no Nats-Msg-Id on each partition, dead-lettered and
// discarded through the owner's API (the newest dead letter, the message
// acknowledged): the owner SIGKILLed, the standby takes both partitions
// over. Before migration 0017 the discarded row took the standby's highest
// sequence seen below the ack floor, and it waited for ever (a long
// nemesis schedule).
func TestATakeOverAfterTheNewestDeadLetterWasDiscarded(t *testing.T) {
	r := newOwnedRig(t, startCluster(t), "ADMDLQ")
	dirs := [2]string{t.TempDir(), t.TempDir()}
	owner := r.run(dirs[0], r.c.urls(), "--changelog")
	r.waitRole(owner, "the owner", "owner", 0, 1)
	standby := r.run(dirs[1], r.c.urls(), "--standby")
	r.waitStandsBy(standby, "the standby")
	r.publish(makeEvents(randFor(t), r.pub, 20))
	for i := range 4 {
		aaRaw(t, r, fmt.Sprintf("pay.acct-%d", i), "", []byte(`{}`))
	}
	r.waitDrained("every message handled")
	nc := r.c.js.Conn()
	discarded := 0
	for _, durable := range ownedDurables {
		addr := admin.Address{Stream: r.stream, Durable: durable}
		var list admin.DeadLetters
		if err := callAdmin(nc, addr, "dlq.list", nil, &list, time.Minute); err != nil {
			t.Fatalf("%s: dlq.list: %v", durable, err)
		}
		for _, d := range list.DeadLetters {
			if err := callAdmin(nc, addr, "dlq.discard", admin.ByID{ID: d.ID, Who: "ops", Note: "a test message"}, nil, time.Minute); err != nil {
				t.Fatalf("%s: dlq.discard %d: %v", durable, d.ID, err)
			}
			discarded++
		}
	}
	if discarded == 0 {
		t.Fatal("no dead letter to discard")
	}
	owner.kill()
	r.waitRole(standby, "the standby", "owner", 0, 1)
	r.stop(standby, "the new owner")
	r.done()
}
