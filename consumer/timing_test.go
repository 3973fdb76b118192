package consumer_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// The plan holds when everything is slow at once: the writer is held by
// another process for longer than AckWait, the handlers take most of the
// deadline, and the disk is slow to commit. No message is held from its
// receipt to its answer (ack, or nak when the writer was not free in time)
// longer than AckWait, so the server never hands one to someone else while
// it is in hand; and each is applied exactly once.
func TestPlanHoldsWhenHandlerCommitAndWriterAreSlow(t *testing.T) {
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.>"}})
	dir := slowDiskDir(t, 150*time.Millisecond)
	path := filepath.Join(dir, "l.db")
	st, err := ledger.Open(path, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.DB().Exec(`CREATE TABLE seen (id TEXT PRIMARY KEY, n INTEGER NOT NULL DEFAULT 1)`); err != nil {
		t.Fatal(err)
	}
	plan := ackwait.Plan{Deadline: time.Second, BatchSize: 10, BufferWait: 200 * time.Millisecond,
		CommitMargin: 500 * time.Millisecond, AckMargin: 200 * time.Millisecond}

	// Another process takes the write lock and keeps it well past AckWait.
	other, err := sql.Open("sqlite", path+"?_txlock=immediate&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.Begin()
	if err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(plan.AckWait() + time.Second) // the fault: a writer elsewhere that will not let go
		tx.Rollback()
	}()
	defer func() { <-released }()

	slow := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		select { // most of the deadline for a full batch
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(plan.Deadline / 20):
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO seen (id) VALUES (?)`, d.MessageID)
		return err
	}
	var mu sync.Mutex
	var reports []consumer.AckReport
	c, err := consumer.New(context.Background(), js, st, consumer.Config{Stream: "EV", Handler: slow, Plan: plan,
		Backoff: ackwait.Backoff{Base: 100 * time.Millisecond}, FetchWait: 50 * time.Millisecond,
		AfterAcks: func(r consumer.AckReport) { mu.Lock(); reports = append(reports, r); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	consumertest.RunConsumer(t, c)
	const n = 30
	for i := range n {
		if _, err := js.Publish(context.Background(), "ev.x", []byte(`{}`), jetstream.WithMsgID(fmt.Sprintf("m-%02d", i))); err != nil {
			t.Fatal(err)
		}
	}
	consumertest.Eventually(t, 60*time.Second, "every message applied", func() bool { return c.Counts().Applied == n })
	var rows, dup int
	if err := st.DB().QueryRow(`SELECT count(*), count(*) FILTER (WHERE n > 1) FROM seen`).Scan(&rows, &dup); err != nil || rows != n || dup != 0 {
		t.Fatalf("seen %d rows, %d applied twice, %v", rows, dup, err)
	}
	mu.Lock()
	defer mu.Unlock()
	var held, batch time.Duration
	for _, r := range reports {
		held, batch = max(held, r.Held), max(batch, r.Batch)
	}
	budget := plan.Deadline + plan.CommitTimeout() + plan.AckMargin
	t.Logf("AckWait %s, batch budget %s; over %d batches the longest hold was %s, the longest batch %s",
		plan.AckWait(), budget, len(reports), held, batch)
	if held >= plan.AckWait() {
		t.Errorf("a message was held %s, past its AckWait %s: the server may have redelivered it meanwhile", held, plan.AckWait())
	}
	if batch > budget {
		t.Errorf("a batch took %s from its start to its answers, past the plan's %s", batch, budget)
	}
}
