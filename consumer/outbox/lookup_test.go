package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/ledger"
)

// reviewRow sends one row normally (m0), then sends m1 to a destination that
// holds the request past the sink timeout, storing it first when stored: m1
// ends in review. It returns m1's id.
func reviewRow(t *testing.T, e *outboxEnv, stored bool) string {
	t.Helper()
	sent := e.enqueue(t, "m0")
	d := e.dispatcher(t, outbox.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	e.waitStatus(t, sent, ledger.StatusSent)
	if stored {
		e.dest.HoldAfterStore() // stored, but the answer comes too late
	} else {
		e.dest.Hold() // the request times out before anything is stored
	}
	id := e.enqueue(t, "m1")
	d.Notify()
	e.waitStatus(t, id, ledger.StatusReview)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !stored {
		// The server must see the client gone before the release, or the
		// held request stores its item after all.
		waitFor(t, "the destination to see the timed-out request abandoned", func() bool { return e.dest.Abandoned() >= 1 })
	}
	e.dest.Release()
	return id
}

// lookingSink is the env's destination with a lookup by key at lookupURL.
func lookingSink(t *testing.T, e *outboxEnv, lookupURL string) {
	t.Helper()
	s, err := webhook.New(webhook.Config{URL: e.dest.URL(), LookupURL: lookupURL, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e.sink = s
}

// Rows in review settle themselves where the destination can answer a
// lookup by key: one it holds is sent (with its id there), never sent
// again; one it never saw is sent again with the same key, once.
func TestReviewSettlesByLookup(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		stored  bool
		wantReq int
	}{
		{name: "found at the destination", stored: true, wantReq: 1},
		{name: "never reached it", stored: false, wantReq: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newOutboxEnv(t, false, 200*time.Millisecond)
			id := reviewRow(t, e, tc.stored)
			lookingSink(t, e, e.dest.LookupURL())
			d := e.dispatcher(t, outbox.Config{LookupEvery: 10 * time.Millisecond})
			e.run(t, d)
			it := e.waitStatus(t, id, ledger.StatusSent)
			if n := e.dest.Requests(id); n != tc.wantReq || len(e.dest.Items()) != 2 || it.ExternalID == "" {
				t.Fatalf("row %+v: %d requests (want %d), %d items at the destination (want 2)", it, n, tc.wantReq, len(e.dest.Items()))
			}
		})
	}
}

// A lookup that denies an item the destination holds (a wrong lookup URL
// answering 404 to everything) is switched off: the row in review waits for
// a person, never sent again on its word.
func TestLookupThatDeniesAHeldItemIsOff(t *testing.T) {
	t.Parallel()
	e := newOutboxEnv(t, false, 200*time.Millisecond)
	id := reviewRow(t, e, false)
	lookingSink(t, e, e.dest.URL()+"/wrong/{key}") // 404 for every key
	d := e.dispatcher(t, outbox.Config{LookupEvery: 10 * time.Millisecond})
	e.run(t, d)
	waitFor(t, "lookups switched off", func() bool { return d.Counts().LookupOff == 1 })
	if it, _ := e.st.Get(context.Background(), id); it.Status != ledger.StatusReview || e.dest.Requests(id) != 1 {
		t.Fatalf("row %s after a wrong lookup, %d requests; want review and 1", it.Status, e.dest.Requests(id))
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	consumertest.Eventually(t, 10*time.Second, what, cond)
}
