package integration

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
)

// Found by the nemesis (TestNemesis, seed 1796170735506369049, external,
// steps pub:24,pause): a run SIGSTOPped while it holds the SQLite writer,
// and a second run started on the same --db and durable (as README's
// "Several processes" allows). The second exits 2, "--apply does not
// compile: … database is locked by another writer": a busy database is not
// bad usage, and the advice (fix the SQL, create the tables) is wrong. Here
// the test holds the writer itself. A run that meets a held writer at start
// may wait for it or fail (exit 1); it must not say its SQL is bad (exit 2).
func TestRunBesideAWriterHeldByAnotherProcess(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Minute)
	first := w.runConsumer(nil)
	ledger := w.ledgerDB()
	w.finish(first, 30*time.Second)

	db, err := sql.Open("sqlite", w.db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	held := true
	release := func() {
		if held {
			held = false
			if _, err := conn.ExecContext(context.Background(), `ROLLBACK`); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer release()

	second := w.runConsumer(nil)
	// Hold the writer past the ledger's busy timeout (10s).
	exited := poll(15*time.Second, func() bool {
		select {
		case <-second.done:
			return true
		default:
			return false
		}
	})
	if exited {
		if code := second.wait(time.Second); code == 2 {
			t.Fatalf("run beside a held writer exited 2 (bad usage), want it to wait or exit 1:\n%s", tail(second.output()))
		}
		return
	}
	release()
	w.publish(makeEvents(randFor(t), w.pub, 3))
	consumertest.Eventually(t, 30*time.Second, "the second run to apply", func() bool {
		return count(t, ledger, `SELECT count(*) FROM processed_messages`) == 3
	})
	w.finish(second, 30*time.Second)
}
