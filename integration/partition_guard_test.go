package integration

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
)

// partitionWorld runs all four partitions of PART to completion and
// returns the four ledgers and the events.
func partitionWorld(t *testing.T) (*world, []event, []*sql.DB) {
	w := newWorld(t, 2*time.Minute)
	evs := makeEvents(randFor(t), w.pub, 200)
	p := start(t, nil, append([]string{"run", "--nats", w.srv.ClientURL(), "--db", w.db, "--stream", "PART",
		"--subjects", "pay.*", "--partitions", "4", "--schema", w.schema, "--apply", balanceApply, "--log-format", "json"}, fastPlan...)...)
	consumertest.Eventually(t, 30*time.Second, "consuming", func() bool {
		_, ok := p.record(func(r map[string]any) bool { return r["msg"] == "consuming partitions" })
		return ok
	})
	if _, err := w.pub.PublishBatch(context.Background(), byAccount(evs)); err != nil {
		t.Fatal(err)
	}
	ledgers := partitionLedgers(t, w.dir, 4)
	consumertest.Eventually(t, time.Minute, "all applied", func() bool {
		return total(t, ledgers) >= len(evs)
	})
	p.signal(syscall.SIGTERM)
	if code := p.wait(time.Minute); code != 0 {
		t.Fatalf("run exited %d", code)
	}
	return w, evs, ledgers
}

func total(t *testing.T, ledgers []*sql.DB) int {
	n := 0
	for _, db := range ledgers {
		n += count(t, db, `SELECT count(*) FROM processed_messages`)
	}
	return n
}

// replay of one partition's ledger, names from the ledger, as after
// restoring a backup: it replays that partition only (its durable's filter)
// and applies nothing of the other partitions into this ledger.
func TestReplayOfAPartitionLedgerStaysInItsPartition(t *testing.T) {
	w, evs, ledgers := partitionWorld(t)
	before := count(t, ledgers[0], `SELECT count(*) FROM processed_messages`)
	r := start(t, nil, "replay", "--nats", w.srv.ClientURL(), "--db", filepath.Join(w.dir, "ledger-p0.db"),
		"--schema", w.schema, "--apply", balanceApply, "--no-effects", "--log-format", "json")
	code := r.wait(time.Minute)
	after := count(t, ledgers[0], `SELECT count(*) FROM processed_messages`)
	if code != 0 || after != before || total(t, ledgers) != len(evs) {
		t.Fatalf("replay of partition 0's ledger: exit %d, its rows %d -> %d, all ledgers %d for %d events\n%s", code, before, after, total(t, ledgers), len(evs), r.output())
	}
}

// A plain run (no --partition) on the partitioned stream is refused: it
// would apply every partition again into the base ledger.
func TestPlainRunOnPartitionedStreamIsRefused(t *testing.T) {
	w, _, _ := partitionWorld(t)
	p := start(t, nil, append([]string{"run", "--nats", w.srv.ClientURL(), "--db", w.db, "--stream", "PART",
		"--schema", w.schema, "--apply", balanceApply, "--log-format", "json"}, fastPlan...)...)
	if code := p.wait(30 * time.Second); code != 1 || !strings.Contains(p.output(), "stream PART is partitioned into 4") {
		t.Fatalf("plain run on a partitioned stream: exit %d\n%s", code, p.output())
	}
}
