package outbox_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
	"github.com/jetledger/jetledger/ledger"
)

// fenceLog is a changelog that takes every entry until fenced, then
// refuses them all, as a log another owner writes (or made again) does.
type fenceLog struct {
	mu     sync.Mutex
	last   uint64
	fenced atomic.Bool
}

func (l *fenceLog) MaxEntry() int { return 1 << 20 }

func (l *fenceLog) Append(_ context.Context, after uint64, parts [][]byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fenced.Load() || after != l.last {
		return errors.New("fenced: wrong last sequence")
	}
	l.last += uint64(len(parts))
	return nil
}

// An owner fenced while a send is in flight: the send's write-back is
// refused by the log, and is not tried again (the store writes nothing
// more until it takes over again), so the run's stop is not held for the
// row's lease. Before, it was retried until the lease ran out.
func TestAWriteBackRefusedByTheLogIsNotRetried(t *testing.T) {
	t.Parallel()
	log := &fenceLog{}
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{Changelog: log})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	if err := st.TakeOver(ctx, "log1", "a", 0, 0); err != nil {
		t.Fatal(err)
	}
	e := &outboxEnv{st: st, dest: webhooktest.NewDestination(t, false), logs: &records{}}
	if e.sink, err = webhook.New(webhook.Config{URL: e.dest.URL()}); err != nil {
		t.Fatal(err)
	}
	id := e.enqueue(t, "m1")
	e.dest.Hold()
	d := e.dispatcher(t, outbox.Config{Lease: time.Minute})
	e.run(t, d)
	e.waitStatus(t, id, ledger.StatusSending)
	log.fenced.Store(true)
	e.dest.Release()
	select {
	case <-e.dest.Arrived():
	case <-time.After(time.Minute):
		t.Fatal("the send did not arrive")
	}
	consumertest.Eventually(t, 2*time.Minute, "the refused write-back said", func() bool {
		_, ok := e.logs.find(slog.LevelError, map[string]string{"outbox_id": id, "external_id": "ext-1"})
		return ok
	})
	if _, ok := e.logs.find(slog.LevelWarn, map[string]string{"outbox_id": id}); ok {
		t.Fatalf("the write-back refused by the log was retried")
	}
}
