package integration

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/publisher"
	"github.com/nats-io/nats.go/jetstream"
)

// A dead letter requeued after its cause is fixed is applied exactly once,
// with its original id; a requeue inside the duplicate window is refused and
// keeps the dead letter; discard removes one.
func TestDLQRequeueAndDiscard(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 2*time.Second)
	ctx := context.Background()
	for _, id := range []string{"bad-1", "bad-2"} {
		if _, err := w.pub.Publish(ctx, publisher.Message{Subject: subject, ID: id, Data: []byte(`{"account":"a","amount":null}`)}); err != nil {
			t.Fatal(err)
		}
	}
	run := w.runConsumer(nil, "--max-deliver", "1")
	w.finish(run, 30*time.Second)
	db := w.ledgerDB()
	if n := count(t, db, `SELECT count(*) FROM dead_letters`); n != 2 {
		t.Fatalf("dead letters %d, want 2", n)
	}
	out, code := cli(t, "dlq", "list", "--db", w.db)
	if code != 0 || !strings.Contains(out, "bad-1") || !strings.Contains(out, "NOT NULL") {
		t.Fatalf("dlq list: exit %d\n%s", code, out)
	}
	id1 := count(t, db, `SELECT id FROM dead_letters WHERE message_id = 'bad-1'`)
	id2 := count(t, db, `SELECT id FROM dead_letters WHERE message_id = 'bad-2'`)
	out, code = cli(t, "dlq", "show", fmt.Sprint(id1), "--db", w.db)
	if code != 0 || !strings.Contains(out, "bad-1") || !strings.Contains(out, `"amount":null`) || !strings.Contains(out, "Nats-Msg-Id") {
		t.Fatalf("dlq show: exit %d\n%s", code, out)
	}
	if out, code := cli(t, "dlq", "show", "999", "--db", w.db); code != 1 || !strings.Contains(out, "not found") {
		t.Fatalf("dlq show of an unknown id: exit %d\n%s", code, out)
	}
	if out, code := cli(t, "dlq", "show", "abc", "--db", w.db); code != 2 {
		t.Fatalf("dlq show abc: exit %d\n%s", code, out)
	}

	requeue := func() (string, int) {
		return cli(t, "dlq", "requeue", fmt.Sprint(id1), "--db", w.db, "--nats", w.srv.ClientURL())
	}
	// The duplicate window (2s) may still remember the id: then the requeue
	// must refuse and keep the dead letter.
	out, code = requeue()
	if code != 0 {
		if !strings.Contains(out, "duplicate window") || count(t, db, `SELECT count(*) FROM dead_letters WHERE id = ?`, id1) != 1 {
			t.Fatalf("refused requeue: exit %d\n%s", code, out)
		}
		consumertest.Eventually(t, 10*time.Second, "requeue after the window", func() bool {
			out, code = requeue()
			return code == 0
		})
	}
	if !strings.Contains(out, "original id bad-1") {
		t.Fatalf("requeue output:\n%s", out)
	}
	out, code = cli(t, "dlq", "discard", fmt.Sprint(id2), "--db", w.db)
	if code != 0 || count(t, db, `SELECT count(*) FROM dead_letters`) != 0 {
		t.Fatalf("discard: exit %d\n%s", code, out)
	}

	// The cause fixed (null amounts count as 0), the requeued message applies once.
	fixed := append([]string{"run", "--nats", w.srv.ClientURL(), "--db", w.db, "--stream", stream, "--schema", w.schema,
		"--log-format", "json", "--apply", strings.Replace(balanceApply, "json_extract(:data, '$.amount')", "coalesce(json_extract(:data, '$.amount'), 0)", 1)}, fastPlan...)
	run = start(t, nil, fixed...)
	w.finish(run, 30*time.Second)
	if n := count(t, db, `SELECT count(*) FROM processed_messages WHERE message_id = 'bad-1'`); n != 1 {
		t.Fatalf("bad-1 applied %d times", n)
	}
	if n := count(t, db, `SELECT count(*) FROM processed_messages WHERE message_id = 'bad-2'`); n != 0 {
		t.Fatalf("the discarded bad-2 was applied")
	}
}

// A message whose last server-side delivery never completed is dead-lettered
// from the max-deliveries advisory.
func TestMaxDeliveriesAdvisoryIsDeadLettered(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Minute)
	ctx := context.Background()
	cons, err := w.js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: "jetledger",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: 2 * time.Second, MaxDeliver: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.pub.Publish(ctx, publisher.Message{Subject: subject, ID: "lost-1", Data: []byte(`{"account":"a","amount":1}`)}); err != nil {
		t.Fatal(err)
	}
	// Its only allowed delivery goes to a worker that never finishes.
	b, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for range b.Messages() {
	}
	run := w.runConsumer(nil)
	db := w.ledgerDB()
	consumertest.Eventually(t, 30*time.Second, "dead letter from the advisory", func() bool {
		return count(t, db, `SELECT count(*) FROM dead_letters WHERE message_id = 'lost-1' AND reason LIKE '%max-deliveries advisory%'`) == 1
	})
	run.signal(syscall.SIGTERM)
	if code := run.wait(30 * time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	// It warned about the durable's server-side limit (the record names it).
	if _, ok := run.record(func(r map[string]any) bool { return r["level"] == "WARN" && r["max_deliver"] == float64(1) }); !ok {
		t.Fatalf("no warning naming the server-side limit:\n%s", tail(run.output()))
	}
}
