package webhook_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/ledger"
)

// A destination that records the work and then answers 500, behind a sink
// not declared idempotent: the row goes to review after one request, and is
// never sent a second time.
func TestDispatcherSendsNothingTwiceAfter500(t *testing.T) {
	t.Parallel()
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	dest := webhooktest.NewDestination(t, false)
	dest.FailAfterStoreWith(500)
	sink, err := webhook.New(webhook.Config{URL: dest.URL(), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}

	var id string
	rs, err := st.ApplyBatch(context.Background(), []ledger.Delivery{{MessageID: "m1", Stream: "S", Sequence: 1, Subject: "s", Data: []byte(`{}`)}},
		func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
			var err error
			id, err = tx.Enqueue(ctx, sink.Name(), []byte(`{"charge":1}`))
			return err
		}, ledger.Budget{})
	if err != nil || rs[0].Outcome != ledger.Applied {
		t.Fatalf("enqueue: %v %+v", err, rs)
	}

	d, err := outbox.New(st, outbox.Config{Sink: sink, MaxAttempts: 3,
		Backoff: ackwait.Backoff{Base: 10 * time.Millisecond}, PollInterval: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dispatcher: %v", err)
		}
	})

	var it ledger.OutboxItem
	consumertest.Eventually(t, 10*time.Second, "the row to settle", func() bool {
		it, err = st.Get(context.Background(), id)
		return err == nil && (it.Status == ledger.StatusSent || it.Status == ledger.StatusFailed || it.Status == ledger.StatusReview)
	})
	if n := dest.Requests(id); it.Status != ledger.StatusReview || n != 1 {
		t.Fatalf("row %s after %d requests (error %q); want review after 1", it.Status, n, it.Error)
	}
	if n := len(dest.Items()); n != 1 {
		t.Fatalf("destination holds %d items, want 1", n)
	}
}
