package consumer_test

import (
	"context"
	"crypto/sha256"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A later copy of an applied id with another payload, whose only delivery
// died before it reached the ledger, is recorded as a conflict when the
// server gives up on it: never dropped without a trace, never applied.
func TestMaxDeliveriesAdvisoryRecordsUnseenConflict(t *testing.T) {
	t.Parallel()
	s := consumertest.RunServer(t)
	nc, js := consumertest.Connect(t, s)
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.>"}, Duplicates: 100 * time.Millisecond})
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.DB().Exec(`CREATE TABLE seen (id TEXT PRIMARY KEY, n INTEGER NOT NULL DEFAULT 1)`); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pub := func(data string) *jetstream.PubAck {
		m := &nats.Msg{Subject: "ev.x", Data: []byte(data), Header: nats.Header{}}
		m.Header.Set(jetstream.MsgIDHeader, "evt-1")
		ack, err := js.PublishMsg(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		return ack
	}
	plan := ackwait.Plan{Deadline: 100 * time.Millisecond, BatchSize: 1, BufferWait: 50 * time.Millisecond,
		CommitMargin: 100 * time.Millisecond, AckMargin: 50 * time.Millisecond}
	if _, err := js.CreateConsumer(ctx, "EV", jetstream.ConsumerConfig{Durable: "limited", AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: plan.AckWait() + 50*time.Millisecond, MaxDeliver: 1}); err != nil {
		t.Fatal(err)
	}
	newConsumer := func() *consumer.Consumer {
		c, err := consumer.New(ctx, js, st, consumer.Config{Stream: "EV", Durable: "limited", Plan: plan, Handler: record,
			Backoff: ackwait.Backoff{Base: 10 * time.Millisecond}, FetchWait: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	// The first copy is applied.
	pub(`{"amount":5}`)
	c1 := newConsumer()
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c1.Run(rctx) }()
	consumertest.Eventually(t, 10*time.Second, "first copy applied", func() bool { return c1.Counts().Applied == 1 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// The id comes again with another payload, past the duplicate window.
	var second *jetstream.PubAck
	consumertest.Eventually(t, 10*time.Second, "second copy stored", func() bool {
		second = pub(`{"amount":500}`)
		return !second.Duplicate
	})
	// A jetledger process takes its one and only delivery and dies before
	// its batch reaches the ledger (simulated: fetched, never answered).
	cons, err := js.Consumer(ctx, "EV", "limited")
	if err != nil {
		t.Fatal(err)
	}
	b, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range b.Messages() {
		if md, _ := m.Metadata(); md.Sequence.Stream != second.Sequence {
			t.Fatalf("fetched seq %d, want %d", md.Sequence.Stream, second.Sequence)
		}
	}
	// The restarted process hears the server give up on it.
	c2 := newConsumer()
	consumertest.RunConsumer(t, c2)
	consumertest.Eventually(t, 30*time.Second, "the advisory handled", func() bool { return c2.Counts().Advisories == 1 })

	var dead, conflicts int
	st.DB().QueryRow(`SELECT count(*) FROM dead_letters WHERE stream_seq = ?`, second.Sequence).Scan(&dead)
	st.DB().QueryRow(`SELECT count(*) FROM conflicts WHERE stream_seq = ?`, second.Sequence).Scan(&conflicts)
	if dead != 0 || conflicts != 1 {
		t.Fatalf("seq %d (id evt-1 reused with another payload): %d dead letters, %d conflicts; want the conflict recorded",
			second.Sequence, dead, conflicts)
	}
	_ = nc
}

// Sequence ids of earlier releases ("<stream>/<seq>") are adopted at start:
// a message applied under the old form whose ack was lost is a duplicate on
// its redelivery, not applied again.
func TestSequenceIDsOfEarlierReleasesStayDuplicates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.publish(t, "", `{"n":1}`)
	// The previous build applied seq 1 under its id "EV/1" and crashed
	// before the ack. Its row is of the old layout (schema 18 renamed the
	// table), as every row of those releases.
	sum := sha256.Sum256([]byte(`{"n":1}`))
	now := time.Now().UnixMilli()
	if _, err := e.st.DB().ExecContext(ctx, `INSERT INTO processed_messages_v1
		(message_id, stream, stream_seq, subject, payload_sha256, processed_at, last_seq, last_seen_at) VALUES ('EV/1', 'EV', 1, 'ev.x', ?, ?, 1, ?)`,
		sum[:], now, now); err != nil {
		t.Fatal(err)
	}
	// The upgraded build starts and gets the redelivery.
	c := e.start(t, consumer.Config{AllowSequenceIDs: true})
	e.waitAcked(t, "jetledger", 1)
	if n := c.Counts(); n.Applied != 0 {
		t.Fatalf("counts %+v: seq 1, already applied as EV/1, was applied again (seen rows %d)", n, e.count(t, `SELECT count(*) FROM seen`))
	}
}
