package integration

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
)

// runDefault starts a host's run of both partitions with the default
// timing (no fastPlan): what an operator runs.
func (r *ownedRig) runDefault(dir string, role ...string) *proc {
	r.t.Helper()
	args := append([]string{"run", "--nats", r.c.urls(), "--db", filepath.Join(dir, "ledger.db"), "--stream", r.stream,
		"--subjects", "pay.*", "--partitions", "2", "--replicas", "3", "--partition", "0,1",
		"--schema", r.schema, "--apply", balanceApply, "--log-format", "json"}, role...)
	return start(r.t, nil, args...)
}

// Issue 42, item 1: the only run of its partitions, with --changelog, a
// webhook and the default outbox workers and timing, sends every effect
// and keeps its partitions: its workers' transitions and its batches go
// to one log without fencing each other.
func TestOwnedRunWithWebhookKeepsItsPartitions(t *testing.T) {
	r := newOwnedRig(t, startCluster(t), "FX")
	dest := webhooktest.NewDestination(t, true)
	dir := t.TempDir()
	owner := r.runDefault(dir, "--changelog", "--webhook", dest.URL())
	r.waitRole(owner, "the owner", "owner", 0, 1)
	n := 1000 // the unit test TestConcurrentWritersShareOneSequence fails at once without the fix
	if clusterProfileFromEnv().Name == "long" {
		n = 3000 // as the runs, which fenced at entry 1304
	}
	evs := makeEvents(randFor(t), r.pub, n)
	r.publish(evs)
	r.waitDrained("every event applied")
	ledgers := r.ledgers(dir)
	waitSettled(t, ledgers...)
	if logged(owner, "lost", 0) || logged(owner, "lost", 1) || strings.Contains(owner.output(), "fenced") {
		t.Fatalf("the only owner lost a partition:\n%s", tail(owner.output()))
	}
	r.stop(owner, "the owner")
	checkPartitionedExact(t, ledgers, evs)
	for _, db := range ledgers {
		if n := count(t, db, `SELECT count(*) FROM outbox WHERE status <> 'sent'`); n != 0 {
			t.Errorf("%d outbox rows not sent", n)
		}
	}
}
