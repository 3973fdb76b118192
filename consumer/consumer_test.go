package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type env struct {
	nc *nats.Conn
	js jetstream.JetStream
	st *ledger.Store
}

func newEnv(t testing.TB) *env {
	t.Helper()
	s := consumertest.RunServer(t)
	nc, js := consumertest.Connect(t, s)
	return envWith(t, nc, js)
}

// envWith creates the EV stream on js and a ledger with the handlers' seen
// table.
func envWith(t testing.TB, nc *nats.Conn, js jetstream.JetStream) *env {
	t.Helper()
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.>"}})
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.DB().Exec(`CREATE TABLE seen (id TEXT PRIMARY KEY, n INTEGER NOT NULL DEFAULT 1)`); err != nil {
		t.Fatal(err)
	}
	return &env{nc: nc, js: js, st: st}
}

func (e *env) publish(t *testing.T, id, data string) {
	t.Helper()
	m := &nats.Msg{Subject: "ev.x", Data: []byte(data), Header: nats.Header{}}
	if id != "" {
		m.Header.Set(jetstream.MsgIDHeader, id)
	}
	if _, err := e.js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

// record inserts the message id into seen; a second insert would fail the PK.
func record(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO seen (id) VALUES (?)`, d.MessageID)
	return err
}

func (e *env) count(t *testing.T, q string) int {
	t.Helper()
	var n int
	if err := e.st.DB().QueryRow(q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// start runs a consumer until the test ends and returns it.
func (e *env) start(t *testing.T, cfg consumer.Config) *consumer.Consumer {
	t.Helper()
	cfg.Stream = "EV"
	if cfg.Handler == nil {
		cfg.Handler = record
	}
	cfg.Plan.Deadline = cmpOr(cfg.Plan.Deadline, 2*time.Second)
	cfg.Backoff.Base = cmpOr(cfg.Backoff.Base, 10*time.Millisecond)
	cfg.FetchWait = 50 * time.Millisecond
	c, err := consumer.New(context.Background(), e.js, e.st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	consumertest.RunConsumer(t, c)
	return c
}

func cmpOr[T comparable](a, b T) T {
	var zero T
	if a == zero {
		return b
	}
	return a
}

func (e *env) waitAcked(t *testing.T, durable string, n uint64) {
	t.Helper()
	consumertest.Eventually(t, 10*time.Second, "all messages acked or terminated", func() bool {
		cons, err := e.js.Consumer(context.Background(), "EV", durable)
		if err != nil {
			return false
		}
		info, err := cons.Info(context.Background())
		return err == nil && info.AckFloor.Stream >= n && info.NumAckPending == 0
	})
}

func TestAppliesOnceAndAcks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := 0; i < 50; i++ {
		e.publish(t, "id-"+string(rune('A'+i%26))+string(rune('a'+i/26)), `{}`)
	}
	c := e.start(t, consumer.Config{Plan: ackwait.Plan{BatchSize: 8}})
	e.waitAcked(t, "jetledger", 50)
	if got := e.count(t, `SELECT count(*) FROM seen`); got != 50 {
		t.Fatalf("seen = %d, want 50", got)
	}
	if got := c.Counts(); got.Applied != 50 || got.Batches < 7 {
		t.Fatalf("counts = %+v", got)
	}
}

// A message redelivered after its commit (the ack was lost) is a duplicate:
// acked, handler not run again.
func TestRedeliveryAfterCommitIsDuplicate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publish(t, "m1", `{"a":1}`)
	// Apply it through the ledger directly, as a consumer that crashed before its ack would have.
	if _, err := e.st.ApplyBatch(context.Background(), []ledger.Delivery{{MessageID: "m1", Stream: "EV", Sequence: 1, Subject: "ev.x", Data: []byte(`{"a":1}`)}}, record, ledger.Budget{}); err != nil {
		t.Fatal(err)
	}
	c := e.start(t, consumer.Config{})
	e.waitAcked(t, "jetledger", 1)
	if got := c.Counts(); got.Duplicates != 1 || got.Applied != 0 {
		t.Fatalf("counts = %+v", got)
	}
	if got := e.count(t, `SELECT count(*) FROM seen`); got != 1 {
		t.Fatalf("seen = %d", got)
	}
}

func TestHandlerOutcomes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var retried atomic.Int32
	handler := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		switch d.MessageID {
		case "term":
			return consumer.Term(errors.New("bad payload"))
		case "retry":
			if d.Delivered == 1 {
				retried.Add(1)
				return consumer.RetryAfter(20*time.Millisecond, errors.New("not yet"))
			}
		case "always":
			return errors.New("still broken")
		}
		return record(ctx, tx, d)
	}
	e.publish(t, "term", `{}`)
	e.publish(t, "retry", `{}`)
	e.publish(t, "always", `{}`)
	e.publish(t, "", `{}`) // no Nats-Msg-Id
	e.publish(t, "ok", `{}`)
	c := e.start(t, consumer.Config{Handler: handler, MaxDeliver: 3})
	e.waitAcked(t, "jetledger", 5)
	consumertest.Eventually(t, 10*time.Second, "three dead letters", func() bool { return c.Counts().DeadLetters == 3 })
	if got := e.count(t, `SELECT count(*) FROM seen`); got != 2 {
		t.Fatalf("seen = %d, want retry and ok", got)
	}
	if retried.Load() != 1 {
		t.Fatalf("retry handler saw %d first deliveries", retried.Load())
	}
	dls, err := e.st.DeadLetters(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, dl := range dls {
		reasons[dl.MessageID] = dl.Reason
	}
	if !strings.Contains(reasons["term"], "bad payload") ||
		!strings.Contains(reasons["always"], "delivery 3 of 3") ||
		!strings.Contains(reasons[""], "Nats-Msg-Id") {
		t.Fatalf("dead letter reasons = %q", reasons)
	}
}

func TestSequenceIDFallback(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publish(t, "", `{}`)
	c := e.start(t, consumer.Config{AllowSequenceIDs: true})
	e.waitAcked(t, "jetledger", 1)
	if c.Counts().Applied != 1 || e.count(t, `SELECT count(*) FROM seen WHERE id LIKE 'EV@%/1'`) != 1 {
		t.Fatalf("counts = %+v", c.Counts())
	}
}

func TestConflictIsRecordedNotApplied(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Same id, different payloads: only possible past the duplicate window, so
	// use two stream positions by applying the first directly.
	if _, err := e.st.ApplyBatch(context.Background(), []ledger.Delivery{{MessageID: "m1", Stream: "OLD", Sequence: 9, Subject: "ev.x", Data: []byte(`{"a":1}`)}}, record, ledger.Budget{}); err != nil {
		t.Fatal(err)
	}
	e.publish(t, "m1", `{"a":2}`)
	c := e.start(t, consumer.Config{})
	e.waitAcked(t, "jetledger", 1)
	if got := c.Counts(); got.Conflicts != 1 || got.Terms != 1 {
		t.Fatalf("counts = %+v", got)
	}
	if got := e.count(t, `SELECT count(*) FROM conflicts WHERE message_id = 'm1'`); got != 1 {
		t.Fatalf("conflicts = %d", got)
	}
}

func TestRefusesShortAckWait(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.js.CreateConsumer(context.Background(), "EV", jetstream.ConsumerConfig{
		Durable: "short", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Second,
	}); err != nil {
		t.Fatal(err)
	}
	_, err := consumer.New(context.Background(), e.js, e.st, consumer.Config{Stream: "EV", Durable: "short", Handler: record})
	if !errors.Is(err, ackwait.ErrAckWaitTooShort) {
		t.Fatalf("err = %v, want ErrAckWaitTooShort", err)
	}
}

func TestCreatesConsumerWithPlanAckWait(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	plan := ackwait.Plan{Deadline: 3 * time.Second, BatchSize: 10}
	if _, err := consumer.New(context.Background(), e.js, e.st, consumer.Config{Stream: "EV", Durable: "fresh", Handler: record, Plan: plan}); err != nil {
		t.Fatal(err)
	}
	cons, err := e.js.Consumer(context.Background(), "EV", "fresh")
	if err != nil {
		t.Fatal(err)
	}
	if got := cons.CachedInfo().Config.AckWait; got != plan.AckWait() {
		t.Fatalf("AckWait = %s, want %s", got, plan.AckWait())
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name string
		cfg  consumer.Config
	}{
		{name: "no stream", cfg: consumer.Config{Handler: record}},
		{name: "no handler", cfg: consumer.Config{Stream: "EV"}},
		{name: "negative backoff", cfg: consumer.Config{Stream: "EV", Handler: record, Backoff: ackwait.Backoff{Base: -1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := consumer.New(context.Background(), e.js, e.st, tt.cfg); !errors.Is(err, consumer.ErrInvalidConfig) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

// Run returns nil on cancel after acking what it committed.
func TestRunDrainsOnCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := 0; i < 40; i++ {
		e.publish(t, fmt.Sprintf("d%02d", i), `{}`)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var batches atomic.Int32
	c, err := consumer.New(context.Background(), e.js, e.st, consumer.Config{
		Stream: "EV", Handler: record, Plan: ackwait.Plan{BatchSize: 5}, FetchWait: 50 * time.Millisecond,
		AfterCommit: func(consumer.BatchReport) {
			if batches.Add(1) == 2 {
				cancel() // shutdown arrives mid-stream
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Run(ctx); err != nil {
		t.Fatal(err)
	}
	// AfterCommit runs on the acker once batch 2 is on disk; by then the
	// pipeline may hold batch 3 (committed, handed over), batch 4 (being
	// applied) and batch 5 (fetched): each is finished whole, nothing more.
	applied := e.count(t, `SELECT count(*) FROM seen`)
	if applied < 10 || applied > 25 || applied%5 != 0 {
		t.Fatalf("applied %d, want whole batches: the two answered and at most three in the pipeline (10 to 25)", applied)
	}
	e.waitAcked(t, "jetledger", uint64(applied))
	cons, err := e.js.Consumer(context.Background(), "EV", "jetledger")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := cons.Info(context.Background()); err != nil || info.NumAckPending != 0 {
		t.Fatalf("after Run: %d delivered but not acked (%v)", info.NumAckPending, err)
	}
}

// Sequence ids name the stream instance: a stream deleted and re-created
// starts again at sequence 1, and its new messages must not be taken for
// the old ones (same payload: a duplicate never applied; another payload: a
// conflict).
func TestSequenceIDsSurviveStreamRecreation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.publish(t, "", `{"n":1}`)
	e.publish(t, "", `{"n":2}`)
	run := func() consumer.Counts {
		c, err := consumer.New(ctx, e.js, e.st, consumer.Config{Stream: "EV", Handler: record, AllowSequenceIDs: true,
			Plan: ackwait.Plan{Deadline: 2 * time.Second}, FetchWait: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- c.Run(rctx) }()
		e.waitAcked(t, "jetledger", 2)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		return c.Counts()
	}
	if n := run(); n.Applied != 2 {
		t.Fatalf("first stream: %+v", n)
	}
	if err := e.js.DeleteStream(ctx, "EV"); err != nil {
		t.Fatal(err)
	}
	// Made again at once, the server can still be removing the old store
	// (10049, "error creating store for stream", seen under load).
	consumertest.Eventually(t, 10*time.Second, "the stream to be made again", func() bool {
		_, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.>"}})
		return err == nil
	})
	e.publish(t, "", `{"n":1}`) // same payload as the old seq 1
	e.publish(t, "", `{"n":3}`) // another payload at the old seq 2
	if n := run(); n.Applied != 2 || n.Duplicates != 0 || n.Conflicts != 0 {
		t.Fatalf("re-created stream: %+v; want both new messages applied", n)
	}
	if got := e.count(t, `SELECT count(*) FROM seen`); got != 4 {
		t.Fatalf("seen rows = %d, want 4", got)
	}
}

// The server's max-deliveries advisory for a message whose ack was lost
// after its commit must not dead-letter it: an applied message is never a
// dead letter.
func TestMaxDeliveriesAdvisorySkipsAppliedMessages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	plan := ackwait.Plan{Deadline: 100 * time.Millisecond, BatchSize: 1, BufferWait: 50 * time.Millisecond,
		CommitMargin: 100 * time.Millisecond, AckMargin: 50 * time.Millisecond}
	// A durable made elsewhere with a server-side limit of one delivery.
	cons, err := e.js.CreateConsumer(ctx, "EV", jetstream.ConsumerConfig{Durable: "limited", AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: plan.AckWait() + 50*time.Millisecond, MaxDeliver: 1})
	if err != nil {
		t.Fatal(err)
	}
	e.publish(t, "applied-1", `{}`)
	// A process takes the one delivery, commits it, and dies before its ack.
	b, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range b.Messages() {
		md, _ := m.Metadata()
		if _, err := e.st.ApplyBatch(ctx, []ledger.Delivery{{MessageID: "applied-1", Stream: "EV", Sequence: md.Sequence.Stream,
			Subject: m.Subject(), Data: m.Data(), Delivered: 1}}, record, ledger.Budget{}); err != nil {
			t.Fatal(err)
		}
	}
	// The restarted process hears the server give up on it.
	c := e.start(t, consumer.Config{Durable: "limited", Plan: plan})
	consumertest.Eventually(t, 30*time.Second, "the advisory handled", func() bool { return c.Counts().Advisories == 1 })
	if n := c.Counts(); n.DeadLetters != 0 {
		t.Fatalf("counts %+v: an applied message was dead-lettered", n)
	}
	if n := e.count(t, `SELECT count(*) FROM dead_letters`); n != 0 {
		t.Fatalf("%d dead letters for an applied message", n)
	}
}

// A fetch sent after the durable was deleted meets no responder rather
// than a "consumer deleted" status: Run must still see the durable gone
// (ErrConsumerGone) and return, not retry for ever. Under load the
// integration test of a deleted durable met this, and run never exited.
func TestFetchAfterTheDurableWasDeletedEndsRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c, err := consumer.New(context.Background(), e.js, e.st, consumer.Config{Stream: "EV", Durable: "gone", Handler: record, FetchWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.js.DeleteConsumer(context.Background(), "EV", "gone"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Run(ctx); !errors.Is(err, consumer.ErrConsumerGone) {
		t.Fatalf("Run after the durable was deleted = %v, want ErrConsumerGone", err)
	}
}

// A BatchReport's times are in the order a batch lives them: each delivery
// received before its batch started, started before it committed, committed
// before the commit was on disk; one receipt per delivery.
func TestBatchReportTimesAreInOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := 0; i < 12; i++ {
		e.publish(t, fmt.Sprintf("t%02d", i), `{}`)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var problems []string
	var seen int
	c, err := consumer.New(context.Background(), e.js, e.st, consumer.Config{
		Stream: "EV", Handler: record, Plan: ackwait.Plan{BatchSize: 5}, FetchWait: 50 * time.Millisecond,
		AfterCommit: func(r consumer.BatchReport) {
			mu.Lock()
			defer mu.Unlock()
			if len(r.Received) != len(r.Deliveries) {
				problems = append(problems, fmt.Sprintf("%d receipts for %d deliveries", len(r.Received), len(r.Deliveries)))
			}
			for _, at := range r.Received {
				if at.IsZero() || at.After(r.Started) {
					problems = append(problems, fmt.Sprintf("received %s, batch started %s", at, r.Started))
				}
			}
			if !r.Started.Before(r.Committed) || r.Durable.Before(r.Committed) || r.Elapsed != r.Durable.Sub(r.Started) {
				problems = append(problems, fmt.Sprintf("started %s, committed %s, durable %s, elapsed %s", r.Started, r.Committed, r.Durable, r.Elapsed))
			}
			if seen += len(r.Deliveries); seen >= 12 {
				cancel()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Run(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen != 12 || len(problems) > 0 {
		t.Fatalf("saw %d of 12; %v", seen, problems)
	}
}
