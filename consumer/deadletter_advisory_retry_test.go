package consumer_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// busyCounting is the real store, counting the dead-letter writes that met
// a busy writer: how a test knows the consumer tried while the writer was held.
type busyCounting struct {
	*ledger.Store
	busy atomic.Int64
}

func (l *busyCounting) RecordDeadLetters(ctx context.Context, dls []ledger.DeadLetter) error {
	err := l.Store.RecordDeadLetters(ctx, dls)
	if errors.Is(err, ledger.ErrBusy) {
		l.busy.Add(1)
	}
	return err
}

// advisoryWorld is a durable whose server gives up after one delivery, and
// a ledger whose writer another process can hold.
type advisoryWorld struct {
	js   jetstream.JetStream
	file string
	st   *busyCounting
	plan ackwait.Plan
}

func newAdvisoryWorld(t *testing.T) *advisoryWorld {
	t.Helper()
	s := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, s)
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.>"}})
	w := &advisoryWorld{js: js, file: filepath.Join(t.TempDir(), "l.db"), plan: ackwait.Plan{Deadline: 100 * time.Millisecond,
		BatchSize: 1, BufferWait: 50 * time.Millisecond, CommitMargin: 200 * time.Millisecond, AckMargin: 50 * time.Millisecond}}
	// A busy timeout under the plan's commit bound: a held writer fails a
	// write with ErrBusy, not with the commit deadline.
	st, err := ledger.Open(w.file, ledger.Config{BusyTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.DB().Exec(`CREATE TABLE seen (id TEXT PRIMARY KEY, n INTEGER NOT NULL DEFAULT 1)`); err != nil {
		t.Fatal(err)
	}
	w.st = &busyCounting{Store: st}
	// The second AckWait leaves the consumer, started after the one delivery,
	// time to subscribe to the advisory the server sends when it expires.
	if _, err := js.CreateConsumer(context.Background(), "EV", jetstream.ConsumerConfig{Durable: "limited",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: w.plan.AckWait() + time.Second, MaxDeliver: 1}); err != nil {
		t.Fatal(err)
	}
	return w
}

// holdWriter takes the ledger's write lock from another connection, as
// another process would, until release (or the test's end).
func (w *advisoryWorld) holdWriter(t *testing.T) (release func()) {
	t.Helper()
	db, err := sql.Open("sqlite", w.file)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	var released atomic.Bool
	release = func() {
		if released.Swap(true) {
			return
		}
		if _, err := conn.ExecContext(context.Background(), `ROLLBACK`); err != nil {
			t.Error(err)
		}
		conn.Close()
		db.Close()
	}
	t.Cleanup(release)
	return release
}

// deliverOnce publishes a message and takes its one delivery, never
// answered (a process that died with it): the server will give up on it.
func (w *advisoryWorld) deliverOnce(t *testing.T) uint64 {
	t.Helper()
	ctx := context.Background()
	m := &nats.Msg{Subject: "ev.x", Data: []byte(`{"n":1}`), Header: nats.Header{}}
	m.Header.Set(jetstream.MsgIDHeader, "evt-1")
	ack, err := w.js.PublishMsg(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := w.js.Consumer(ctx, "EV", "limited")
	if err != nil {
		t.Fatal(err)
	}
	b, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for range b.Messages() {
	}
	return ack.Sequence
}

func (w *advisoryWorld) newConsumer(t *testing.T, log *slog.Logger) *consumer.Consumer {
	t.Helper()
	c, err := consumer.New(context.Background(), w.js, w.st, consumer.Config{Stream: "EV", Durable: "limited", Plan: w.plan,
		Handler: record, Backoff: ackwait.Backoff{Base: 10 * time.Millisecond}, FetchWait: 50 * time.Millisecond, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (w *advisoryWorld) deadLettered(t *testing.T, seq uint64) bool {
	t.Helper()
	var n int
	if err := w.st.DB().QueryRow(`SELECT count(*) FROM dead_letters WHERE stream = 'EV' AND stream_seq = ?`, seq).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// The server's max-deliveries advisory is the only trace of a message whose
// last delivery never reached the ledger. Its dead letter is recorded even
// when the ledger's writer is busy at first: retried, not logged and lost.
func TestMaxDeliveriesDeadLetterRetriedWhileLedgerBusy(t *testing.T) {
	t.Parallel()
	w := newAdvisoryWorld(t)
	release := w.holdWriter(t)
	seq := w.deliverOnce(t)
	c := w.newConsumer(t, nil)
	consumertest.RunConsumer(t, c)

	consumertest.Eventually(t, 20*time.Second, "two tries to record the dead letter meeting the busy writer",
		func() bool { return w.st.busy.Load() >= 2 })
	if w.deadLettered(t, seq) {
		t.Fatalf("seq %d dead-lettered while another connection held the writer", seq)
	}
	release()
	consumertest.Eventually(t, 20*time.Second, "the dead letter recorded once the writer is free",
		func() bool { return w.deadLettered(t, seq) })
	consumertest.Eventually(t, 5*time.Second, "the advisory counted", func() bool { return c.Counts().Advisories == 1 })
	if n := c.Counts(); n.DeadLetters != 1 {
		t.Fatalf("counts %+v, want one dead letter", n)
	}
}

// A consumer stopped while it still cannot record an advisory's dead letter
// returns (it does not wait for the ledger), and says at error level, after
// the stop, which stream sequence has no dead letter; never context.Canceled.
func TestMaxDeliveriesDeadLetterNamedWhenStoppedWhileLedgerBusy(t *testing.T) {
	t.Parallel()
	w := newAdvisoryWorld(t)
	w.holdWriter(t)
	seq := w.deliverOnce(t)
	logs := &recorder{}
	c := w.newConsumer(t, slog.New(logs))
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	var runErr error
	go func() { defer close(ran); runErr = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-ran })

	consumertest.Eventually(t, 20*time.Second, "two tries to record the dead letter meeting the busy writer",
		func() bool { return w.st.busy.Load() >= 2 })
	logs.mu.Lock()
	before := len(logs.records)
	logs.mu.Unlock()
	cancel()
	select {
	case <-ran:
		if runErr != nil {
			t.Fatalf("Run: %v", runErr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of its stop while the ledger stayed busy")
	}
	if w.deadLettered(t, seq) {
		t.Fatalf("seq %d dead-lettered while another connection held the writer", seq)
	}
	named := false
	logs.mu.Lock()
	defer logs.mu.Unlock()
	for i, rec := range logs.records {
		rec.Attrs(func(a slog.Attr) bool {
			if err, ok := a.Value.Any().(error); ok && errors.Is(err, context.Canceled) {
				t.Errorf("logged context.Canceled: %v %q", rec.Level, rec.Message)
			}
			if i >= before && rec.Level == slog.LevelError && a.Key == "stream_seq" &&
				a.Value.Kind() == slog.KindUint64 && a.Value.Uint64() == seq {
				named = true
			}
			return true
		})
	}
	if !named {
		t.Fatalf("no error-level record after the stop names stream_seq %d, whose dead letter was never recorded", seq)
	}
}
