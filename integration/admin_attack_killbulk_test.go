package integration

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
)

// Promise 2: a bulk resolve of every review row of partition 0 through the
// CLI, the owner SIGKILLed partway (its own ledger holding some of the
// action's records). The CLI says it got no answer (exits, non-zero);
// the standby takes over holding a prefix-consistent result: each row
// failed with exactly one record, or in review untouched; the bulk run
// again on the new owner through the CLI finishes the rest, nothing twice.
func TestAdminAttackBulkWithTheOwnerKilledMidway(t *testing.T) {
	if clusterProfileFromEnv().Name != "long" {
		t.Skip("about two minutes on a 3-node cluster: JETLEDGER_CLUSTER=long")
	}
	r := newOwnedRig(t, startCluster(t), "ADMBULK")
	owner, standby, dirs, dry := reviewed(t, r, 2400)
	total := dry[0].Matched
	t.Logf("partition 0: %d rows in review; partition 1: %d", total, dry[1].Matched)
	mine := r.ledgers(dirs[0])
	url := r.c.url(0)
	bulk := start(t, nil, "outbox", "resolve", "--nats", url, "--partition", "0", "--status", "review", "--as", "failed", "--all", "--who", "bulk@ops", "--note", "kill test")
	consumertest.Eventually(t, 2*time.Minute, "the bulk partway in the owner's ledger", func() bool {
		return count(t, mine[0], `SELECT count(*) FROM jetledger_audit WHERE who = 'bulk@ops'`) >= total/5
	})
	owner.kill()
	atKill := count(t, mine[0], `SELECT count(*) FROM jetledger_audit WHERE who = 'bulk@ops'`)
	if atKill >= total {
		t.Fatalf("the bulk finished (%d rows) before the kill: nothing tried", atKill)
	}
	select {
	case <-bulk.done:
		code := bulk.wait(0)
		t.Logf("the CLI whose owner died: exit %d: %s", code, strings.TrimSpace(bulk.output()))
		if code == 0 {
			t.Errorf("the CLI whose owner was killed mid-action exited 0:\n%s", bulk.output())
		}
	case <-time.After(90 * time.Second):
		t.Errorf("the CLI whose owner was SIGKILLed mid-action has not exited 90s later; it said: %q", bulk.output())
		bulk.kill()
	}
	r.waitRole(standby, "the standby", "owner", 0, 1)
	now := r.ledgers(dirs[1])
	done := auditInvariants(t, now[0], "bulk@ops", "failed")
	review := count(t, now[0], `SELECT count(*) FROM outbox WHERE status = 'review'`)
	if done+review != total {
		t.Errorf("the new owner: %d rows done + %d in review, want %d", done, review, total)
	}
	t.Logf("the old owner's ledger held %d records at the kill; the new owner holds %d, %d rows untouched", atKill, done, review)
	// Whatever the old owner holds of the action, the new owner holds.
	var ids []string
	rows, err := mine[0].Query(`SELECT target FROM jetledger_audit WHERE who = 'bulk@ops'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		rows.Scan(&id) //nolint:errcheck // checked by count below
		ids = append(ids, id)
	}
	rows.Close()
	lost := 0
	for _, id := range ids {
		if count(t, now[0], `SELECT count(*) FROM jetledger_audit WHERE who = 'bulk@ops' AND target = ?`, id) != 1 {
			lost++
		}
	}
	if lost > 0 {
		t.Logf("%d rows done in the dead owner's file are not in the new owner's ledger (never acknowledged by the log)", lost)
	}
	// The new owner finishes the rest.
	var out string
	var code int
	consumertest.Eventually(t, time.Minute, "the new owner's API found by the CLI", func() bool {
		out, code = cli(t, "outbox", "resolve", "--nats", url, "--partition", "0", "--status", "review", "--as", "failed", "--all", "--who", "bulk@ops", "--note", "again")
		return code != 1 || !strings.Contains(out, "not exactly one")
	})
	m := regexp.MustCompile(`(\d+) done, (\d+) skipped`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("the bulk again on the new owner: exit %d\n%s", code, out)
	}
	again, _ := strconv.Atoi(m[1])
	if again != review {
		t.Errorf("the bulk again did %d rows, want the %d untouched", again, review)
	}
	if got := auditInvariants(t, now[0], "bulk@ops", "failed"); got != total {
		t.Errorf("after the bulk again: %d records, want %d", got, total)
	}
	if n := count(t, now[0], `SELECT count(*) FROM outbox WHERE status = 'review'`); n != 0 {
		t.Errorf("%d rows still in review", n)
	}
	var st admin.Status
	if err := callAdmin(r.c.js.Conn(), admin.Address{Stream: r.stream, Durable: ownedDurables[0]}, "status", nil, &st, 10*time.Second); err != nil || st.Outbox[ledger.StatusFailed] != int64(total) {
		t.Errorf("the new owner's status: %v %+v", err, st.Outbox)
	}
	r.stop(standby, "the new owner")
	r.done()
}
