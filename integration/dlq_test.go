package integration

import (
	"context"
	"fmt"
	"path/filepath"
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

// A partition's dead letter is stored under the mapped subject (1.pay.bob),
// which no stream captures. Requeued, it must go back through the stream's
// partition mapping into the same partition, and be applied there, once,
// after the cause is fixed.
func TestPartitionDeadLetterRequeuedIntoItsPartition(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Minute)
	ctx := context.Background()
	url := w.srv.ClientURL()
	partitioned := func(apply string, extra ...string) *proc {
		args := append([]string{"run", "--nats", url, "--db", w.db, "--stream", "PART", "--subjects", "pay.*", "--partitions", "2",
			"--duplicate-window", "1s", "--schema", w.schema, "--apply", apply, "--log-format", "json"}, fastPlan...)
		p := start(t, nil, append(args, extra...)...)
		consumertest.Eventually(t, 30*time.Second, "consuming partitions", func() bool {
			_, ok := p.record(func(r map[string]any) bool { return r["msg"] == "consuming partitions" })
			return ok
		})
		return p
	}
	stop := func(p *proc) {
		p.signal(syscall.SIGTERM)
		if code := p.wait(time.Minute); code != 0 {
			t.Fatalf("run exited %d", code)
		}
	}
	run := partitioned(balanceApply, "--max-deliver", "1")
	good := []event{{ID: "bob-1", Account: "bob", Amount: 5}, {ID: "alice-1", Account: "alice", Amount: 7}, {ID: "carol-1", Account: "carol", Amount: 3}}
	msgs := append(byAccount(good), publisher.Message{Subject: "pay.bob", ID: "bad-bob", Data: []byte(`{"account":"bob","amount":null}`)})
	if _, err := w.pub.PublishBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	ledgers := partitionLedgers(t, w.dir, 2)
	dead := func() int {
		n := 0
		for _, db := range ledgers {
			n += count(t, db, `SELECT count(*) FROM dead_letters`)
		}
		return n
	}
	consumertest.Eventually(t, time.Minute, "the good events applied and the bad one dead-lettered", func() bool {
		return total(t, ledgers) == len(good) && dead() == 1
	})
	stop(run)
	home := -1
	for i, db := range ledgers {
		if count(t, db, `SELECT count(*) FROM dead_letters`) == 1 {
			home = i
		}
	}
	if n := count(t, ledgers[home], `SELECT count(*) FROM processed_messages WHERE message_id = 'bob-1'`); n != 1 {
		t.Fatalf("bob's good event is not in partition %d, where his dead letter is", home)
	}
	id := count(t, ledgers[home], `SELECT id FROM dead_letters WHERE message_id = 'bad-bob'`)
	db := filepath.Join(w.dir, fmt.Sprintf("ledger-p%d.db", home))
	consumertest.Eventually(t, 15*time.Second, "requeue of the partition's dead letter", func() bool {
		_, code := cli(t, "dlq", "requeue", fmt.Sprint(id), "--db", db, "--nats", url)
		return code == 0
	})
	// The copy is stored as the original was: the same partition's subject.
	s, err := w.js.Stream(ctx, "PART")
	if err != nil {
		t.Fatal(err)
	}
	last, err := s.GetLastMsgForSubject(ctx, fmt.Sprintf("%d.pay.bob", home))
	if err != nil || last.Header.Get(jetstream.MsgIDHeader) != "bad-bob" {
		t.Fatalf("the requeued copy is not the last of %d.pay.bob: %v %v", home, last, err)
	}

	fixed := strings.Replace(balanceApply, "json_extract(:data, '$.amount')", "coalesce(json_extract(:data, '$.amount'), 0)", 1)
	run = partitioned(fixed)
	consumertest.Eventually(t, time.Minute, "the requeued event applied", func() bool {
		return total(t, ledgers) == len(good)+1
	})
	stop(run)
	for i, db := range ledgers {
		want := 0
		if i == home {
			want = 1
		}
		if n := count(t, db, `SELECT count(*) FROM processed_messages WHERE message_id = 'bad-bob'`); n != want {
			t.Errorf("partition %d applied bad-bob %d times, want %d", i, n, want)
		}
		if n := count(t, db, `SELECT count(*) FROM dead_letters`); n != 0 {
			t.Errorf("partition %d keeps %d dead letters", i, n)
		}
	}
	if n := count(t, ledgers[home], `SELECT amount FROM balances WHERE account = 'bob'`); n != 5 {
		t.Errorf("bob's balance %d, want 5", n)
	}
}
