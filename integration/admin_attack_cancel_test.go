package integration

import (
	"testing"
	"time"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
	"github.com/jetledger/jetledger/ledger"
)

// Promise 3: a cancel through the API of a sent row deletes the item at
// the destination before the row is cancelled. The owner is SIGKILLed
// with the DELETE held before it reached the destination (round 1), and,
// once the new owner is the owner and the old one stands by again, with
// the item deleted but the answer never back (round 2). After each
// take-over no row says cancelled while its item is there; the cancel
// asked again of the new owner finishes it, with one record.
func TestAdminAttackCancelWithTheOwnerKilledBetweenDeleteAndCancel(t *testing.T) {
	if clusterProfileFromEnv().Name != "long" {
		t.Skip("about two minutes on a 3-node cluster: JETLEDGER_CLUSTER=long")
	}
	r := newOwnedRig(t, startCluster(t), "ADMCANCEL")
	dest := webhooktest.NewDestination(t, false)
	gw := newGateway(t, dest)
	dirs := [2]string{t.TempDir(), t.TempDir()}
	runs := [2]*proc{r.run(dirs[0], r.c.urls(), gw.args("--standby")...), nil}
	r.waitRole(runs[0], "the owner", "owner", 0, 1)
	runs[1] = r.run(dirs[1], r.c.urls(), gw.args("--standby")...)
	r.waitStandsBy(runs[1], "the standby")
	const n = 20
	r.publish(makeEvents(randFor(t), r.pub, n))
	r.waitDrained("every event applied")
	nc := r.c.js.Conn()
	addrs := [2]admin.Address{{Stream: r.stream, Durable: ownedDurables[0]}, {Stream: r.stream, Durable: ownedDurables[1]}}
	consumertest.Eventually(t, 2*time.Minute, "every row sent", func() bool {
		sent := int64(0)
		for _, a := range addrs {
			var st admin.Status
			if callAdmin(nc, a, "status", nil, &st, 5*time.Second) != nil {
				return false
			}
			sent += st.Outbox[ledger.StatusSent]
		}
		return sent == n
	})
	owner, standby := 0, 1
	for round, mode := range []string{"before", "after"} {
		part := round
		var rows admin.Rows
		if err := callAdmin(nc, addrs[part], "outbox.list", admin.OutboxList{Status: ledger.StatusSent}, &rows, 10*time.Second); err != nil || len(rows.Rows) == 0 {
			t.Fatalf("round %d: the sent rows of partition %d: %v %d", round, part, err, len(rows.Rows))
		}
		id := rows.Rows[0].ID
		who := "cancel-" + mode
		gw.setMode(mode)
		var dry admin.Acted
		if err := callAdmin(nc, addrs[part], "outbox.cancel", admin.Act{Who: who, IDs: []string{id}, DryRun: true}, &dry, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		answered := make(chan error, 1)
		go func() {
			answered <- callAdmin(nc, addrs[part], "outbox.cancel", admin.Act{Who: who, IDs: []string{id}, Seen: dry.Seen}, nil, time.Minute)
		}()
		<-gw.arrived
		if mode == "after" && atDestination(dest, id) {
			t.Fatalf("round %d: the gateway let the delete through, yet the item is there", round)
		}
		runs[owner].kill()
		t.Logf("round %d (%s): the cancel's answer: %v", round, mode, <-answered)
		r.waitRole(runs[standby], "the standby", "owner", 0, 1)
		gw.setMode("")
		now := r.ledgers(dirs[standby])
		noCancelledItemThere(t, now[part], dest, "after the take-over")
		status := ""
		for _, row := range outboxRows(t, now[part]) {
			if row.ID == id {
				status = row.Status
			}
		}
		t.Logf("round %d: row %s is %s in the new owner's ledger; its item at the destination: %v", round, id, status, atDestination(dest, id))
		if mode == "before" && (status != "sent" || !atDestination(dest, id)) {
			t.Errorf("round %d: the delete never reached the destination, yet the row is %s (item there: %v)", round, status, atDestination(dest, id))
		}
		// The cancel asked again of the new owner finishes it.
		var done admin.Acted
		consumertest.Eventually(t, time.Minute, "the cancel asked again of the new owner", func() bool {
			var dry admin.Acted
			if callAdmin(nc, addrs[part], "outbox.cancel", admin.Act{Who: who, IDs: []string{id}, DryRun: true}, &dry, 5*time.Second) != nil {
				return false
			}
			return callAdmin(nc, addrs[part], "outbox.cancel", admin.Act{Who: who, IDs: []string{id}, Seen: dry.Seen}, &done, 30*time.Second) == nil
		})
		if len(done.Done) != 1 {
			t.Errorf("round %d: the cancel asked again: %+v", round, done)
		}
		if atDestination(dest, id) {
			t.Errorf("round %d: the item of %s is still at the destination after its cancel", round, id)
		}
		var shown admin.Row
		if err := callAdmin(nc, addrs[part], "outbox.show", admin.OutboxShow{ID: id}, &shown, 10*time.Second); err != nil || shown.Status != ledger.StatusCancelled || len(shown.History) != 1 {
			t.Errorf("round %d: the row after its cancel: %v %s %+v", round, err, shown.Status, shown.History)
		}
		noCancelledItemThere(t, now[part], dest, "after the cancel asked again")
		if round == 0 { // the old owner comes back, standing by
			runs[owner] = r.run(dirs[owner], r.c.urls(), gw.args("--standby")...)
			r.waitStandsBy(runs[owner], "the old owner, back")
			owner, standby = standby, owner
		}
	}
	r.stop(runs[standby], "the owner after round 1")
	r.done()
}
