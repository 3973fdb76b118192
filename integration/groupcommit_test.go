package integration

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/publisher"
)

// Group commit must not cost the guarantee: batches of 200 where some
// messages fail mid-batch (a NOT NULL violation from --apply, every time),
// and SIGKILLs at random points. The failing messages end as dead letters,
// the rest is applied exactly once.
func TestGroupCommitWithFailuresAndKills(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(4, 4))
	failuresAndKills(t, rng, 4000, 200, func(int) bool { return rng.IntN(25) == 0 })
}

// One message in every batch fails, after its handler wrote (the optimistic
// batch is rolled back and redone with savepoints, and later batches keep
// them), while the process is SIGKILLed at random points: no other message
// of a batch may be lost or applied twice.
func TestOneFailurePerBatchWithKills(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(11, 11))
	failuresAndKills(t, rng, 3000, 100, func(i int) bool { return i%40 == 17 })
}

// failuresAndKills publishes n events, those bad(i) with a payload whose
// --apply fails (a NOT NULL amount), consumes them in batches of batch with
// four SIGKILLs on the way, and checks that every good event was applied
// exactly once and every bad one dead-lettered.
func failuresAndKills(t *testing.T, rng *rand.Rand, n, batch int, bad func(i int) bool) {
	t.Helper()
	w := newWorld(t, time.Minute)
	evs := makeEvents(rng, w.pub, n)
	var good []event
	msgs := make([]publisher.Message, len(evs))
	nbad := 0
	for i, e := range evs {
		data := e.data()
		if bad(i) {
			data = []byte(fmt.Sprintf(`{"account":%q,"amount":null}`, e.Account)) // fails in the middle of its batch
			nbad++
		} else {
			good = append(good, e)
		}
		msgs[i] = publisher.Message{Subject: subject, ID: e.ID, Data: data}
	}
	if _, err := w.pub.PublishBatch(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
	args := []string{"--batch", fmt.Sprint(batch), "--max-deliver", "2"}
	var db *sql.DB
	for i := 0; i < 4; i++ {
		p := w.runConsumer(nil, args...)
		if db == nil {
			db = w.ledgerDB()
		}
		target := count(t, db, `SELECT count(*) FROM processed_messages`) + 1 + rng.IntN(n/5)
		consumertest.Eventually(t, time.Minute, "progress before the kill", func() bool {
			return count(t, db, `SELECT count(*) FROM processed_messages`) >= min(target, len(good))
		})
		p.kill()
	}
	p := w.runConsumer(nil, args...)
	w.finish(p, 2*time.Minute)
	w.checkExact(db, good)
	if got := count(t, db, `SELECT count(*) FROM dead_letters WHERE reason LIKE '%NOT NULL%'`); got != nbad {
		t.Fatalf("dead letters %d, want %d", got, nbad)
	}
}
