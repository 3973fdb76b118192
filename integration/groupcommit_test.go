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
	w := newWorld(t, time.Minute)
	rng := rand.New(rand.NewPCG(4, 4))
	evs := makeEvents(rng, w.pub, 4000)
	var good []event
	msgs := make([]publisher.Message, len(evs))
	bad := 0
	for i, e := range evs {
		data := e.data()
		if rng.IntN(25) == 0 {
			data = []byte(fmt.Sprintf(`{"account":%q,"amount":null}`, e.Account)) // fails in the middle of its batch
			bad++
		} else {
			good = append(good, e)
		}
		msgs[i] = publisher.Message{Subject: subject, ID: e.ID, Data: data}
	}
	if _, err := w.pub.PublishBatch(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
	args := []string{"--batch", "200", "--max-deliver", "2"}
	var db *sql.DB
	for i := 0; i < 4; i++ {
		p := w.runConsumer(nil, args...)
		if db == nil {
			db = w.ledgerDB()
		}
		target := count(t, db, `SELECT count(*) FROM processed_messages`) + 1 + rng.IntN(800)
		consumertest.Eventually(t, time.Minute, "progress before the kill", func() bool {
			return count(t, db, `SELECT count(*) FROM processed_messages`) >= min(target, len(good))
		})
		p.kill()
	}
	p := w.runConsumer(nil, args...)
	w.finish(p, 2*time.Minute)
	w.checkExact(db, good)
	if got := count(t, db, `SELECT count(*) FROM dead_letters WHERE reason LIKE '%NOT NULL%'`); got != bad {
		t.Fatalf("dead letters %d, want %d", got, bad)
	}
}
