package outbox_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/ledger"
)

// records keeps the log records a dispatcher writes, so tests check what
// it said by level and attributes, not by its wording.
type records struct {
	mu  sync.Mutex
	all []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, rec.Clone())
	return nil
}

// find returns the first record at level whose attributes include want.
func (r *records) find(level slog.Level, want map[string]string) (slog.Record, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.all {
		if rec.Level != level {
			continue
		}
		n := 0
		rec.Attrs(func(a slog.Attr) bool {
			if v, ok := want[a.Key]; ok && a.Value.String() == v {
				n++
			}
			return true
		})
		if n == len(want) {
			return rec, true
		}
	}
	return slog.Record{}, false
}

type outboxEnv struct {
	path string
	st   *ledger.Store
	dest *webhooktest.Destination
	sink *webhook.Sink
	logs *records
}

func newOutboxEnv(t testing.TB, idempotent bool, timeout time.Duration) *outboxEnv {
	t.Helper()
	path := filepath.Join(t.TempDir(), "l.db")
	st, err := ledger.Open(path, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	dest := webhooktest.NewDestination(t, idempotent)
	sink, err := webhook.New(webhook.Config{URL: dest.URL(), DeleteURL: dest.DeleteURL(), Timeout: timeout, Idempotent: idempotent})
	if err != nil {
		t.Fatal(err)
	}
	return &outboxEnv{path: path, st: st, dest: dest, sink: sink, logs: &records{}}
}

// enqueue applies a message whose handler adds one outbox row; it returns the row id.
func (e *outboxEnv) enqueue(t *testing.T, msgID string) string {
	t.Helper()
	var id string
	rs, err := e.st.ApplyBatch(context.Background(), []ledger.Delivery{{MessageID: msgID, Stream: "S", Sequence: 1, Subject: "s", Data: []byte(`{}`)}},
		func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
			var err error
			id, err = tx.Enqueue(ctx, "webhook", []byte(fmt.Sprintf(`{"msg":%q}`, d.MessageID)))
			return err
		}, ledger.Budget{})
	if err != nil || rs[0].Outcome != ledger.Applied {
		t.Fatalf("enqueue: %v %+v", err, rs)
	}
	return id
}

func (e *outboxEnv) dispatcher(t *testing.T, cfg outbox.Config) *outbox.Dispatcher {
	t.Helper()
	cfg.Sink = e.sink
	cfg.PollInterval = 10 * time.Millisecond
	cfg.Backoff.Base = cmp.Or(cfg.Backoff.Base, 10*time.Millisecond)
	cfg.Logger = slog.New(e.logs)
	d, err := outbox.New(e.st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func (e *outboxEnv) run(t *testing.T, d *outbox.Dispatcher) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		e.dest.Release()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dispatcher: %v", err)
		}
	})
}

func (e *outboxEnv) waitStatus(t *testing.T, id string, want ledger.Status) ledger.OutboxItem {
	t.Helper()
	var it ledger.OutboxItem
	consumertest.Eventually(t, 10*time.Second, "outbox row "+string(want), func() bool {
		var err error
		it, err = e.st.Get(context.Background(), id)
		return err == nil && it.Status == want && !it.PendingDelete
	})
	return it
}

func TestDispatcherSendsWithIdempotencyKey(t *testing.T) {
	t.Parallel()
	e := newOutboxEnv(t, false, time.Second)
	id := e.enqueue(t, "m1")
	e.run(t, e.dispatcher(t, outbox.Config{}))
	it := e.waitStatus(t, id, ledger.StatusSent)
	items := e.dest.Items()
	if len(items) != 1 || items[0].Key != id || items[0].MessageID != "m1" || it.ExternalID != items[0].ExternalID {
		t.Fatalf("row %+v, destination %+v", it, items)
	}
}

// 20 workers, each with its own database connection, race to claim one row:
// exactly one wins and sends.
func TestClaimRaceExactlyOneSends(t *testing.T) {
	t.Parallel()
	e := newOutboxEnv(t, false, time.Second)
	id := e.enqueue(t, "m1")
	var wins atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < 20; i++ {
		st, err := ledger.Open(e.path, ledger.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			it, err := st.Transition(context.Background(), id, ledger.Claim, ledger.Params{Worker: fmt.Sprintf("worker-%d", i), Lease: 5 * time.Second})
			if errors.Is(err, ledger.ErrNotClaimed) {
				return
			}
			if err != nil {
				t.Error(err)
				return
			}
			wins.Add(1)
			ext, err := e.sink.Send(context.Background(), it)
			if err != nil {
				t.Error(err)
				return
			}
			if err := tr(st.Transition(context.Background(), id, ledger.Sent, ledger.Params{Worker: fmt.Sprintf("worker-%d", i), ExternalID: ext})); err != nil {
				t.Error(err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if wins.Load() != 1 || e.dest.Requests(id) != 1 || len(e.dest.Items()) != 1 {
		t.Fatalf("claims won %d, requests %d, items %d; want 1 each", wins.Load(), e.dest.Requests(id), len(e.dest.Items()))
	}
}

// Cancel while the destination holds the request: the late write-back finds
// the row cancelled, deletes the item at the destination, and says so with
// both ids.
func TestCancelWhileSendingDeletesAtDestination(t *testing.T) {
	t.Parallel()
	e := newOutboxEnv(t, false, 5*time.Second)
	_, id := cancelledInFlight(t, e, outbox.Config{})
	e.dest.Release()
	it := e.waitStatus(t, id, ledger.StatusCancelled)
	if n := len(e.dest.Items()); n != 0 {
		t.Fatalf("destination holds %d items, want 0", n)
	}
	// Never silent: a warning names both ids.
	if _, ok := e.logs.find(slog.LevelWarn, map[string]string{"outbox_id": id, "external_id": it.ExternalID}); !ok || it.ExternalID == "" {
		t.Fatalf("no warning naming outbox_id %s and external_id %q", id, it.ExternalID)
	}
}

// The same, but the delete fails: the row goes to review with the external
// id and its cancel kept, never silently to cancelled.
func TestCancelWhileSendingDeleteFailsGoesToReview(t *testing.T) {
	t.Parallel()
	e := newOutboxEnv(t, false, 5*time.Second)
	e.dest.FailDeletesWith(http.StatusBadGateway)
	_, id := cancelledInFlight(t, e, outbox.Config{})
	e.dest.Release()
	var it ledger.OutboxItem
	consumertest.Eventually(t, 10*time.Second, "the cancelled row in review", func() bool {
		it, _ = e.st.Get(context.Background(), id)
		return it.Status == ledger.StatusReview
	})
	if it.ExternalID == "" || len(e.dest.Items()) != 1 || !it.PendingDelete {
		t.Fatalf("row %+v, destination %d items", it, len(e.dest.Items()))
	}
}

// A late failure never overwrites success, whoever reports it.
func TestLateFailureNeverOverwritesSent(t *testing.T) {
	t.Parallel()
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e := &outboxEnv{st: st}
	id := e.enqueue(t, "m1")
	ctx := context.Background()

	// Dispatcher A claims, stalls past its lease; the row is re-queued
	// (idempotent sink) and B claims and sends it.
	if _, err := st.Transition(ctx, id, ledger.Claim, ledger.Params{Worker: "A", Lease: time.Second}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(2 * time.Second)
	mu.Unlock()
	if ex, err := st.ExpireLeases(ctx, "webhook", true); err != nil || len(ex.Requeued) != 1 {
		t.Fatalf("expire = %+v, %v", ex, err)
	}
	if _, err := st.Transition(ctx, id, ledger.Claim, ledger.Params{Worker: "B", Lease: time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := tr(st.Transition(ctx, id, ledger.Sent, ledger.Params{Worker: "B", ExternalID: "ext-1"})); err != nil {
		t.Fatal(err)
	}
	for name, late := range map[string]func() error{
		"A fails": func() error {
			return tr(st.Transition(ctx, id, ledger.Fail, ledger.Params{Worker: "A", Reason: "timeout"}))
		},
		"A retries": func() error {
			return tr(st.Transition(ctx, id, ledger.RetryMaybeSent, ledger.Params{Worker: "A", Reason: "timeout", Delay: time.Millisecond}))
		},
		"A sends": func() error {
			return tr(st.Transition(ctx, id, ledger.Sent, ledger.Params{Worker: "A", ExternalID: "ext-2"}))
		},
		"A reviews": func() error {
			return tr(st.Transition(ctx, id, ledger.Review, ledger.Params{Worker: "A", Reason: "unknown"}))
		},
		"B fails later": func() error {
			return tr(st.Transition(ctx, id, ledger.Fail, ledger.Params{Worker: "B", Reason: "late error"}))
		},
		"someone claims": func() error {
			_, err := st.Transition(ctx, id, ledger.Claim, ledger.Params{Worker: "C", Lease: time.Second})
			return err
		},
	} {
		err := late()
		if !errors.Is(err, ledger.ErrNotOwner) && !errors.Is(err, ledger.ErrNotClaimed) {
			t.Errorf("%s: err = %v, want ErrNotOwner or ErrNotClaimed", name, err)
		}
	}
	it, err := st.Get(ctx, id)
	if err != nil || it.Status != ledger.StatusSent || it.ExternalID != "ext-1" {
		t.Fatalf("row = %+v, %v; want sent as ext-1", it, err)
	}
}

// Cancelling a sent row whose delete fails: the row is not cancelled and the
// error says the item is still at the destination.
func TestCancelSentDeleteFails(t *testing.T) {
	t.Parallel()
	e := newOutboxEnv(t, false, time.Second)
	id := e.enqueue(t, "m1")
	d := e.dispatcher(t, outbox.Config{})
	e.run(t, d)
	e.waitStatus(t, id, ledger.StatusSent)
	e.dest.FailDeletesWith(http.StatusConflict) // refused: surely not deleted
	_, err := d.Cancel(context.Background(), id)
	if !errors.Is(err, outbox.ErrStillAtDestination) {
		t.Fatalf("err = %v, want ErrStillAtDestination with the status", err)
	}
	if it, _ := e.st.Get(context.Background(), id); it.Status != ledger.StatusSent {
		t.Fatalf("row is %s, want sent", it.Status)
	}
	e.dest.FailDeletesWith(0)
	out, err := d.Cancel(context.Background(), id)
	if err != nil || out != outbox.CancelledDeleted || len(e.dest.Items()) != 0 {
		t.Fatalf("cancel = %q, %v; items %d", out, err, len(e.dest.Items()))
	}
	// Cancel returned: the row is cancelled now, nothing to wait for.
	if it, err := e.st.Get(context.Background(), id); err != nil || it.Status != ledger.StatusCancelled {
		t.Fatalf("row %+v, %v; want cancelled", it, err)
	}
}

// A row whose earlier attempt timed out may be at the destination: cancel
// refuses to report it gone; once re-sent with the same key it has an
// external id and cancel deletes it there.
func TestCancelMaybeSentRow(t *testing.T) {
	t.Parallel()
	e := newOutboxEnv(t, true, 200*time.Millisecond)
	e.dest.HoldAfterStore() // stored, but the answer comes too late
	id := e.enqueue(t, "m1")
	d := e.dispatcher(t, outbox.Config{MaxAttempts: 100, Backoff: ackwait.Backoff{Base: time.Hour}, Lease: 2 * time.Second})
	e.run(t, d)
	it := e.waitStatus(t, id, ledger.StatusQueued)
	consumertest.Eventually(t, 10*time.Second, "the timed-out attempt recorded", func() bool {
		it, _ = e.st.Get(context.Background(), id)
		return it.MaybeSent && it.Status == ledger.StatusQueued
	})
	_, err := d.Cancel(context.Background(), id)
	if !errors.Is(err, outbox.ErrStillAtDestination) || len(e.dest.Items()) != 1 {
		t.Fatalf("cancel of a maybe-sent row: err = %v, destination %d items", err, len(e.dest.Items()))
	}
	if it, _ := e.st.Get(context.Background(), id); it.Status != ledger.StatusQueued {
		t.Fatalf("row is %s, want it unchanged (queued)", it.Status)
	}
}

func TestCancelQueued(t *testing.T) {
	t.Parallel()
	e := newOutboxEnv(t, false, time.Second)
	id := e.enqueue(t, "m1")
	d := e.dispatcher(t, outbox.Config{}) // not running: the row stays queued
	out, err := d.Cancel(context.Background(), id)
	if err != nil || out != outbox.CancelledUnsent {
		t.Fatalf("cancel = %q, %v", out, err)
	}
	if _, err := d.Cancel(context.Background(), id); !errors.Is(err, ledger.ErrIllegalTransition) {
		t.Fatalf("second cancel err = %v", err)
	}
}

// Responses end in the documented states, with the status recorded.
func TestSendOutcomes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		idempotent bool
		setup      func(d *webhooktest.Destination)
		want       ledger.Status
		wantReqs   int
	}{
		{name: "400 fails at once", setup: func(d *webhooktest.Destination) { d.FailWith(400) }, want: ledger.StatusFailed, wantReqs: 1},
		{name: "422 fails at once", setup: func(d *webhooktest.Destination) { d.FailWith(422) }, want: ledger.StatusFailed, wantReqs: 1},
		// A 500 may come after the work was done: not re-sent unless the destination is idempotent.
		{name: "500 goes to review", setup: func(d *webhooktest.Destination) { d.FailWith(500) }, want: ledger.StatusReview, wantReqs: 1},
		{name: "500 to idempotent destination retried, then review", idempotent: true, setup: func(d *webhooktest.Destination) { d.FailWith(500) }, want: ledger.StatusReview, wantReqs: 3},
		{name: "429 retried then failed", setup: func(d *webhooktest.Destination) { d.FailWith(429) }, want: ledger.StatusFailed, wantReqs: 3},
		{name: "timeout goes to review", setup: func(d *webhooktest.Destination) { d.Hold() }, want: ledger.StatusReview, wantReqs: 1},
		// Re-sent with the same key, but never reported failed: the item may be there.
		{name: "timeout to idempotent destination retried, then review", idempotent: true, setup: func(d *webhooktest.Destination) { d.Hold() }, want: ledger.StatusReview, wantReqs: 3},
		{name: "502 from a gateway goes to review", setup: func(d *webhooktest.Destination) { d.FailWith(502) }, want: ledger.StatusReview, wantReqs: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newOutboxEnv(t, tt.idempotent, 200*time.Millisecond)
			tt.setup(e.dest)
			id := e.enqueue(t, "m1")
			e.run(t, e.dispatcher(t, outbox.Config{MaxAttempts: 3, Lease: 2 * time.Second}))
			it := e.waitStatus(t, id, tt.want)
			if e.dest.Requests(id) != tt.wantReqs || it.Error == "" {
				t.Fatalf("row %+v: requests %d (want %d), and the last error recorded", it, e.dest.Requests(id), tt.wantReqs)
			}
		})
	}
}

// A 429 that clears: retried with the same key, sent once.
func TestRetryableRecovers(t *testing.T) {
	t.Parallel()
	e := newOutboxEnv(t, false, time.Second)
	e.dest.FailWith(429)
	id := e.enqueue(t, "m1")
	e.run(t, e.dispatcher(t, outbox.Config{MaxAttempts: 100}))
	consumertest.Eventually(t, 5*time.Second, "a retry", func() bool { return e.dest.Requests(id) >= 2 })
	e.dest.FailWith(0)
	e.waitStatus(t, id, ledger.StatusSent)
	if n := len(e.dest.Items()); n != 1 {
		t.Fatalf("items = %d", n)
	}
}

func TestDispatcherRefusesShortLease(t *testing.T) {
	t.Parallel()
	e := newOutboxEnv(t, false, 10*time.Second)
	_, err := outbox.New(e.st, outbox.Config{Sink: e.sink, Lease: 5 * time.Second})
	if !errors.Is(err, ackwait.ErrLeaseTooShort) {
		t.Fatalf("err = %v", err)
	}
}

// tr drops the row a transition returns, for tests that check only its error.
func tr(_ ledger.OutboxItem, err error) error { return err }
