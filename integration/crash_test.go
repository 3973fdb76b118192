package integration

import (
	"database/sql"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
)

// The binary is SIGKILLed exactly between a batch's commit and its acks (the
// fault point compiled in by the jetledger_faults tag). After a restart the
// server redelivers that batch; the ledger counts every message of it as a
// duplicate, acks it, and the state is unchanged.
func TestCrashBetweenCommitAndAck(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Minute)
	evs := makeEvents(rand.New(rand.NewPCG(2, 2)), w.pub, 300)
	w.publish(evs)

	crashed := w.runConsumer([]string{"JETLEDGER_FAULT=after-commit"}, "--batch", "50")
	if code := crashed.wait(30 * time.Second); code != -1 {
		t.Fatalf("exit code %d, want death by SIGKILL", code)
	}
	db := w.ledgerDB()
	// The first batch died between its commit and its acks; the second,
	// applied while the first waited for its sync, may have committed too.
	committed := count(t, db, `SELECT count(*) FROM processed_messages`)
	if committed == 0 || committed > 2*50 {
		t.Fatalf("committed %d before the crash, want one or two batches", committed)
	}
	info := w.consumerInfo()
	// The committed batches are pending, and so may be the next, fetched
	// meanwhile by the pipelined fetcher and never applied.
	if info.AckFloor.Stream != 0 || info.NumAckPending < committed || info.NumAckPending > 3*50 {
		t.Fatalf("after crash: ack floor %d, ack pending %d; want nothing acked and %d to 150 pending",
			info.AckFloor.Stream, info.NumAckPending, committed)
	}
	balanceAfterCrash := count(t, db, `SELECT sum(amount) FROM balances`)
	if want := sum(evs[:committed]); balanceAfterCrash != want {
		t.Fatalf("balance after crash %d, want %d", balanceAfterCrash, want)
	}

	restarted := w.runConsumer(nil, "--batch", "50")
	w.finish(restarted, time.Minute)
	totals := restarted.stopped()
	if int(totals["duplicates"]) != committed || int(totals["applied"]) != len(evs)-committed {
		t.Fatalf("restart counted %v duplicates and %v applied; want %d and %d",
			totals["duplicates"], totals["applied"], committed, len(evs)-committed)
	}
	w.checkExact(db, evs)
}

// SIGKILL at random points of a 5 000-event run, five times, then a clean
// finish: the sum is exact and nothing is missing.
func TestRandomKillsThenFinish(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Minute)
	rng := rand.New(rand.NewPCG(3, 5000))
	evs := makeEvents(rng, w.pub, 5000)
	w.publish(evs)
	var db *sql.DB
	for i := 0; i < 5; i++ {
		p := w.runConsumer(nil, "--batch", "100")
		if db == nil {
			db = w.ledgerDB()
		}
		// Kill once this run has made a random amount of progress.
		target := count(t, db, `SELECT count(*) FROM processed_messages`) + 1 + rng.IntN(700)
		consumertest.Eventually(t, time.Minute, "progress before the kill", func() bool {
			return count(t, db, `SELECT count(*) FROM processed_messages`) >= target
		})
		p.kill()
		t.Logf("kill %d after %d processed", i+1, count(t, db, `SELECT count(*) FROM processed_messages`))
	}
	p := w.runConsumer(nil, "--batch", "100")
	w.finish(p, 2*time.Minute)
	w.checkExact(db, evs)
}

// SIGTERM mid-stream: exit 0, every committed message acked and nothing
// else delivered-but-unacked; the rest is applied after a restart.
func TestSIGTERMMidStream(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Minute)
	evs := makeEvents(rand.New(rand.NewPCG(7, 7)), w.pub, 5000)
	w.publish(evs)
	p := w.runConsumer(nil, "--batch", "50")
	db := w.ledgerDB()
	consumertest.Eventually(t, time.Minute, "some progress", func() bool {
		return count(t, db, `SELECT count(*) FROM processed_messages`) >= 1000
	})
	p.signal(syscall.SIGTERM)
	if code := p.wait(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}
	committed := count(t, db, `SELECT count(*) FROM processed_messages`)
	info := w.consumerInfo()
	if info.NumAckPending != 0 || info.AckFloor.Stream != uint64(committed) {
		t.Fatalf("after SIGTERM: %d committed, ack floor %d, ack pending %d; want all committed acked and none pending",
			committed, info.AckFloor.Stream, info.NumAckPending)
	}
	if committed >= len(evs) {
		t.Fatalf("all %d applied before SIGTERM took effect; the test needs a mid-stream stop", committed)
	}
	if got, want := count(t, db, `SELECT sum(amount) FROM balances`), sum(evs[:committed]); got != want {
		t.Fatalf("balance %d, want %d", got, want)
	}
	p = w.runConsumer(nil, "--batch", "50")
	w.finish(p, time.Minute)
	w.checkExact(db, evs)
}
