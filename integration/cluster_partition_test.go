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

// Issue 14: a stream partitioned into 4 on a 3-node cluster (replicas 3),
// consumed by two `jetledger run` processes with two partitions each. While
// events are published the stream leader's node is SIGKILLed and restarted,
// then the node leading one partition's durable, then one jetledger process
// is SIGKILLed and restarted. At the end: every event applied exactly once
// over the four ledgers, one ledger row per id, every account in one ledger.
func TestClusterPartitionsRideOutFailover(t *testing.T) {
	prof := clusterProfileFromEnv()
	events := 2000
	if prof.Name == "long" {
		events = 20000
	}
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
	dirs := [2]string{t.TempDir(), t.TempDir()}
	runHost := func(h int, parts string) *proc {
		return start(t, nil, append([]string{"run", "--nats", c.urls(), "--db", filepath.Join(dirs[h], "ledger.db"), "--stream", name,
			// Either may create the stream: the same configuration twice is one stream.
			"--subjects", "pay.*", "--partitions", "4", "--replicas", "3",
			"--partition", parts, "--schema", schema, "--apply", balanceApply, "--log-format", "json"}, fastPlan...)...)
	}
	hosts := [2]*proc{runHost(0, "0,1"), runHost(1, "2,3")}
	durables := []string{"jetledger-p0", "jetledger-p1", "jetledger-p2", "jetledger-p3"}
	consumertest.Eventually(t, time.Minute, "the four durables", func() bool {
		if c.leaderOf(name) < 0 {
			return false
		}
		for _, d := range durables {
			if c.consumerLeaderOf(name, d) < 0 {
				return false
			}
		}
		return true
	})

	c.waitHealthy(time.Minute, name, durables...)
	if s, err := c.js.Stream(context.Background(), name); err != nil {
		t.Fatal(err)
	} else if r := s.CachedInfo().Config.Replicas; r != 3 {
		t.Fatalf("run --replicas 3 made stream %s with %d replicas", name, r)
	}
	evs := makeEvents(randFor(t), pub, events)
	chunks := 5
	publishChunk := func(k int) {
		part := evs[k*len(evs)/chunks : (k+1)*len(evs)/chunks]
		msgs := byAccount(part)
		// A publish the cluster could not take during an election is sent
		// again with the same ids: the stream drops what it already has.
		consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("chunk %d published", k), func() bool {
			_, err := pub.PublishBatch(context.Background(), msgs)
			return err == nil
		})
	}
	publishChunk(0)

	// The stream leader's node goes, and comes back.
	leader := c.leaderOf(name)
	if leader < 0 {
		t.Fatal("the stream has no leader")
	}
	c.kill(leader)
	publishChunk(1)
	c.restart(leader)
	c.waitHealthy(2*time.Minute, name, durables...)

	// The node leading partition 0's durable, not the stream's leader.
	c.separateLeaders(name, durables[0])
	cl := c.consumerLeaderOf(name, durables[0])
	c.kill(cl)
	publishChunk(2)
	c.restart(cl)
	c.waitHealthy(2*time.Minute, name, durables...)

	// One jetledger process dies with whatever it had in hand, and starts again.
	hosts[0].kill()
	publishChunk(3)
	hosts[0] = runHost(0, "0,1")
	publishChunk(4)

	consumertest.Eventually(t, 3*time.Minute, "every partition drained", func() bool { return c.drained(name, durables...) })
	for _, h := range hosts {
		h.signal(syscall.SIGTERM)
		if code := h.wait(time.Minute); code != 0 {
			t.Fatalf("run exited %d", code)
		}
	}
	ledgers := make([]*sql.DB, 4)
	for i := range ledgers {
		ledgers[i] = (&world{t: t, db: filepath.Join(dirs[i/2], fmt.Sprintf("ledger-p%d.db", i))}).ledgerDB()
	}
	checkPartitionedExact(t, ledgers, evs)
}

// checkPartitionedExact: over the partitions' ledgers, balances sum to the
// events, one ledger row per id, every account in one ledger only. It
// returns each account's partition.
func checkPartitionedExact(t *testing.T, ledgers []*sql.DB, evs []event) map[string]int {
	t.Helper()
	total, rows := 0, 0
	home := map[string]int{}
	for i, db := range ledgers {
		total += count(t, db, `SELECT coalesce(sum(amount), 0) FROM balances`)
		rows += count(t, db, `SELECT count(*) FROM (`+ledgerIDs(db)+`)`)
		accounts, err := db.Query(`SELECT account FROM balances`)
		if err != nil {
			t.Fatal(err)
		}
		for accounts.Next() {
			var acct string
			if err := accounts.Scan(&acct); err != nil {
				t.Fatal(err)
			}
			if j, ok := home[acct]; ok {
				t.Errorf("account %s is in the ledgers of partitions %d and %d", acct, j, i)
			}
			home[acct] = i
		}
		accounts.Close()
	}
	if total != sum(evs) || rows != len(evs) {
		t.Fatalf("over the ledgers: balances %d, rows %d; want %d and %d (difference %d)", total, rows, sum(evs), len(evs), total-sum(evs))
	}
	return home
}
