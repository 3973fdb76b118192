package integration

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/publisher"
)

// A stream partitioned by account into 4, consumed by two processes with
// two partitions each, every partition into its own ledger: each event is
// applied once, all of an account's events land in one ledger, and within
// it in the order they were published (nothing fails here, so nothing is
// redelivered out of order).
func TestPartitionsKeepEachKeyInOneLedger(t *testing.T) {
	w := newWorld(t, 2*time.Minute)
	rng := randFor(t)
	evs := makeEvents(rng, w.pub, 2000)
	// applied_order numbers the messages in the order they were applied.
	schema := filepath.Join(w.dir, "order.sql")
	if err := os.WriteFile(schema, []byte(balanceTable+`CREATE TABLE IF NOT EXISTS applied_order (n INTEGER PRIMARY KEY, account TEXT, seq INTEGER);`), 0o600); err != nil {
		t.Fatal(err)
	}
	const orderApply = `INSERT INTO applied_order (account, seq) VALUES (json_extract(:data, '$.account'), :seq)`
	partition := func(parts string) *proc {
		args := append([]string{"run", "--nats", w.srv.ClientURL(), "--db", w.db, "--stream", "PART",
			"--subjects", "pay.*", "--partitions", "4", "--partition", parts,
			"--schema", schema, "--apply", balanceApply + "; " + orderApply, "--log-format", "json"}, fastPlan...)
		return start(t, nil, args...)
	}
	a := partition("0,1")
	consumertest.Eventually(t, 30*time.Second, "the first process consuming", func() bool {
		_, ok := a.record(func(r map[string]any) bool { return r["msg"] == "consuming partitions" })
		return ok
	})
	b := partition("2,3")
	if _, err := w.pub.PublishBatch(context.Background(), byAccount(evs)); err != nil {
		t.Fatal(err)
	}
	ledgers := partitionLedgers(t, w.dir, 4)
	consumertest.Eventually(t, time.Minute, "every event applied in some partition", func() bool {
		return total(t, ledgers) >= len(evs)
	})
	for _, p := range []*proc{a, b} {
		p.signal(syscall.SIGTERM)
		if code := p.wait(time.Minute); code != 0 {
			t.Fatalf("run exited %d", code)
		}
	}

	home := checkPartitionedExact(t, ledgers, evs)
	for i, db := range ledgers {
		// Applied in publish order: an account's messages, in the order
		// they were applied, have increasing stream sequences.
		if n := count(t, db, `SELECT count(*) FROM (SELECT seq,
				lag(seq) OVER (PARTITION BY account ORDER BY n) AS prev FROM applied_order) WHERE seq < prev`); n != 0 {
			t.Errorf("partition %d applied %d events before an earlier one of the same account", i, n)
		}
		if n := count(t, db, `SELECT count(*) FROM processed_messages WHERE subject NOT LIKE ?`, fmt.Sprintf("%d.pay.%%", i)); n != 0 {
			t.Errorf("partition %d's ledger holds %d messages of other partitions", i, n)
		}
	}
	if len(home) < 4 {
		t.Errorf("%d accounts spread over the partitions: the mapping put them all in few", len(home))
	}

	// status shows every partition: its durable, drained, and its ledger.
	out, code := cli(t, "status", "--nats", w.srv.ClientURL(), "--db", w.db, "--json")
	var st struct {
		Partitions []struct {
			Partition  int    `json:"partition"`
			Durable    string `json:"durable"`
			Consumer   bool   `json:"consumer"`
			Pending    uint64 `json:"pending"`
			AckPending int    `json:"ack_pending"`
			Ledger     string `json:"ledger"`
			LedgerRows int    `json:"ledger_rows"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != 0 || len(st.Partitions) != 4 {
		t.Fatalf("status: exit %d, %v\n%s", code, err, out)
	}
	shown := 0
	for i, p := range st.Partitions {
		if p.Partition != i || p.Durable != fmt.Sprintf("jetledger-p%d", i) || !p.Consumer || p.Pending != 0 || p.AckPending != 0 ||
			p.Ledger != filepath.Join(filepath.Dir(w.db), fmt.Sprintf("ledger-p%d.db", i)) {
			t.Errorf("status of partition %d: %+v", i, p)
		}
		shown += p.LedgerRows
	}
	if shown != len(evs) {
		t.Errorf("status shows %d ledger rows over the partitions, want %d", shown, len(evs))
	}
}

// byAccount is evs as messages on pay.<account>: a stream run partitions by
// --subjects pay.* keys them by account.
func byAccount(evs []event) []publisher.Message {
	msgs := make([]publisher.Message, len(evs))
	for i, e := range evs {
		msgs[i] = publisher.Message{Subject: "pay." + e.Account, ID: e.ID, Data: e.data()}
	}
	return msgs
}

// partitionLedgers opens the ledgers of n partitions of a run whose --db is
// in dir (ledger-p<I>.db beside ledger.db).
func partitionLedgers(t *testing.T, dir string, n int) []*sql.DB {
	ledgers := make([]*sql.DB, n)
	for i := range ledgers {
		ledgers[i] = (&world{t: t, db: filepath.Join(dir, fmt.Sprintf("ledger-p%d.db", i))}).ledgerDB()
	}
	return ledgers
}
