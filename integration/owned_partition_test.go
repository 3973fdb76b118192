package integration

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/publisher"
)

// Issue 25: two partitions on a 3-node cluster, owned by one run with
// --changelog and stood by by another with --standby; a third run of the
// same partitions without --standby is refused. The owner is SIGKILLed
// and its ledger files deleted (its host is lost) between two halves of
// the events; the standby takes both partitions over. At the end the
// standby's ledgers hold every event exactly once.
func TestOwnedPartitionsSurviveTheLossOfTheirHost(t *testing.T) {
	c := startCluster(t)
	const name = "PAY"
	pub, err := publisher.New(c.js, publisher.Config{Attempts: 10, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	schema := filepath.Join(t.TempDir(), "schema.sql")
	if err := os.WriteFile(schema, []byte(balanceTable), 0o600); err != nil {
		t.Fatal(err)
	}
	dirs := [3]string{t.TempDir(), t.TempDir(), t.TempDir()}
	runHost := func(h int, role string) *proc {
		return start(t, nil, append([]string{"run", "--nats", c.urls(), "--db", filepath.Join(dirs[h], "ledger.db"), "--stream", name,
			"--subjects", "pay.*", "--partitions", "2", "--replicas", "3", role,
			"--partition", "0,1", "--schema", schema, "--apply", balanceApply, "--log-format", "json"}, fastPlan...)...)
	}
	owns := func(p *proc, part int) bool {
		_, ok := p.record(func(r map[string]any) bool { return r["role"] == "owner" && r["partition"] == float64(part) })
		return ok
	}
	owner := runHost(0, "--changelog")
	consumertest.Eventually(t, 2*time.Minute, "the first run owns both partitions", func() bool { return owns(owner, 0) && owns(owner, 1) })
	standby := runHost(1, "--standby")
	refused := runHost(2, "--changelog")
	if code := refused.wait(time.Minute); code == 0 {
		t.Fatalf("a second owner of the partitions without --standby exited 0:\n%s", refused.output())
	}

	evs := makeEvents(randFor(t), pub, 600)
	publish := func(part []event) {
		consumertest.Eventually(t, 2*time.Minute, "published", func() bool {
			_, err := pub.PublishBatch(context.Background(), byAccount(part))
			return err == nil
		})
	}
	publish(evs[:300])
	drained := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		for _, d := range []string{"jetledger-p0", "jetledger-p1"} {
			cons, err := c.js.Consumer(ctx, name, d)
			if err != nil {
				return false
			}
			if info := cons.CachedInfo(); info.NumPending != 0 || info.NumAckPending != 0 {
				return false
			}
		}
		return true
	}
	consumertest.Eventually(t, 2*time.Minute, "the first half applied", drained)
	publish(evs[300:400]) // in hand, or not yet, when the host goes
	owner.kill()
	lost := time.Now()
	if err := os.RemoveAll(dirs[0]); err != nil {
		t.Fatal(err)
	}
	consumertest.Eventually(t, 2*time.Minute, "the standby owns both partitions", func() bool { return owns(standby, 0) && owns(standby, 1) })
	took := time.Since(lost)
	publish(evs[400:])
	consumertest.Eventually(t, 3*time.Minute, "every event applied", drained)
	standby.signal(syscall.SIGTERM)
	if code := standby.wait(time.Minute); code != 0 {
		t.Fatalf("the standby exited %d", code)
	}
	ledgers := make([]*sql.DB, 2)
	for i := range ledgers {
		ledgers[i] = (&world{t: t, db: filepath.Join(dirs[1], fmt.Sprintf("ledger-p%d.db", i))}).ledgerDB()
	}
	checkPartitionedExact(t, ledgers, evs)
	t.Logf("both partitions owned by the standby %v after the owner's SIGKILL", took.Round(100*time.Millisecond))
}
