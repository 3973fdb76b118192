package integration

import (
	"context"
	"database/sql"
	"errors"
	"hash/fnv"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
)

// credit is the balance handler of --apply, written in Go for in-process tests.
func credit(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
	_, err := tx.ExecContext(ctx, balanceApply, sql.Named("data", string(d.Data)))
	return err
}

func openLedger(t testing.TB, path string) *ledger.Store {
	t.Helper()
	st, err := ledger.Open(path, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.DB().Exec(balanceTable); err != nil {
		t.Fatal(err)
	}
	return st
}

func runInProcess(t testing.TB, w *world, st *ledger.Store, cfg consumer.Config) *consumer.Consumer {
	t.Helper()
	cfg.Stream = stream
	cfg.Backoff.Base = 10 * time.Millisecond
	cfg.FetchWait = 100 * time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := consumer.New(context.Background(), w.js, st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	consumertest.RunConsumer(t, c)
	return c
}

func hashOf(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}

// 10 000 events, about 10% published a second time with the same id after the
// stream's duplicate window (so the consumer, not the stream, must catch them),
// and some forced back through nak: the balances equal the distinct events.
func TestTenThousandEventsSumExact(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 100*time.Millisecond)
	rng := rand.New(rand.NewPCG(10, 10000))
	evs := makeEvents(rng, w.pub, 10_000)
	w.publish(evs)
	// Wait out the duplicate window: once the last id is accepted again, every
	// earlier one is forgotten too. That copy is one of the re-sent events.
	last := evs[len(evs)-1]
	consumertest.Eventually(t, 10*time.Second, "duplicate window to pass", func() bool {
		return !w.publish([]event{last})[0].Duplicate
	})
	var again []event
	for _, i := range rng.Perm(len(evs) - 1)[:999] {
		again = append(again, evs[i])
	}
	resent := len(again) + 1 // and the probe
	droppedByStream := 0
	for _, a := range w.publish(again) {
		if a.Duplicate {
			droppedByStream++
		}
	}

	st := openLedger(t, filepath.Join(w.dir, "l.db"))
	var forced, failed atomic.Int64
	handler := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		if d.Delivered == 1 {
			switch hashOf(d.MessageID) % 50 {
			case 0:
				forced.Add(1)
				return consumer.RetryAfter(time.Millisecond, errors.New("forced redelivery"))
			case 1:
				failed.Add(1)
				return errors.New("transient failure")
			}
		}
		return credit(ctx, tx, d)
	}
	c := runInProcess(t, w, st, consumer.Config{Handler: handler, Plan: ackwait.Plan{BatchSize: 200}, MaxDeliver: 10})
	w.waitDrained(2 * time.Minute)
	w.checkExact(st.DB(), evs)
	counts := c.Counts()
	if counts.Applied != uint64(len(evs)) {
		t.Fatalf("applied = %d, want %d", counts.Applied, len(evs))
	}
	if got := int(counts.Duplicates) + droppedByStream; got != resent || counts.Duplicates < 900 {
		t.Fatalf("ledger duplicates %d + stream-dropped %d = %d, want %d", counts.Duplicates, droppedByStream, got, resent)
	}
	if counts.Duplicates == 0 || forced.Load() == 0 || failed.Load() == 0 || counts.Naks != uint64(forced.Load()+failed.Load()) {
		t.Fatalf("test did not exercise duplicates and naks: counts %+v, forced %d, failed %d", counts, forced.Load(), failed.Load())
	}
	t.Logf("applied %d, ledger duplicates %d, stream duplicates %d, naks %d", counts.Applied, counts.Duplicates, droppedByStream, counts.Naks)
}

// A handler that overruns the batch deadline is cancelled and rolled back
// with its writes; the retry applies it exactly once.
func TestOverrunningHandlerRolledBackAndRetried(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Minute)
	rng := rand.New(rand.NewPCG(5, 5))
	evs := makeEvents(rng, w.pub, 30)
	w.publish(evs)
	slowID := evs[10].ID
	var overran atomic.Int64
	handler := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		if err := credit(ctx, tx, d); err != nil {
			return err
		}
		if d.MessageID == slowID && d.Delivered == 1 {
			overran.Add(1)
			<-ctx.Done() // work that outlives the deadline
			return ctx.Err()
		}
		return nil
	}
	st := openLedger(t, filepath.Join(w.dir, "l.db"))
	c := runInProcess(t, w, st, consumer.Config{Handler: handler,
		Plan: ackwait.Plan{Deadline: 300 * time.Millisecond, BatchSize: 30}})
	w.waitDrained(30 * time.Second)
	w.checkExact(st.DB(), evs)
	if overran.Load() != 1 || c.Counts().Failed < 1 {
		t.Fatalf("overran %d times, counts %+v", overran.Load(), c.Counts())
	}
	consumertest.Eventually(t, time.Second, "applied count", func() bool { return c.Counts().Applied == uint64(len(evs)) })
}
