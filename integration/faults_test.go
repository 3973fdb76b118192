package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/publisher"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A payload over the server's max payload is refused at publish with a
// clear error (library and CLI); one just under it is applied once.
func TestOversizedPayloads(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Minute)
	ctx := context.Background()
	max := int(server.MAX_PAYLOAD_SIZE) // the default max_payload, 1 MiB
	pad := func(n int) []byte {
		return []byte(fmt.Sprintf(`{"account":"big","amount":7,"pad":"%s"}`, strings.Repeat("x", n)))
	}
	_, err := w.pub.Publish(ctx, publisher.Message{Subject: subject, Data: pad(max)})
	if !errors.Is(err, nats.ErrMaxPayload) {
		t.Fatalf("publish over max payload: err = %v, want nats.ErrMaxPayload", err)
	}
	p := startIn(t, append(pad(max), '\n'), nil, "publish", "--nats", w.srv.ClientURL(), "--subject", subject)
	if code := p.wait(30 * time.Second); code != 1 || !strings.Contains(p.output(), "maximum payload exceeded") {
		t.Fatalf("CLI publish over max payload: exit %d\n%.500s", code, p.output())
	}
	under := pad(max - 2048) // headers travel in the same budget
	if _, err := w.pub.Publish(ctx, publisher.Message{Subject: subject, ID: "big-1", Data: under}); err != nil {
		t.Fatalf("publish just under max payload: %v", err)
	}
	run := w.runConsumer(nil)
	w.finish(run, 30*time.Second)
	db := w.ledgerDB()
	if got := count(t, db, `SELECT amount FROM balances WHERE account = 'big'`); got != 7 {
		t.Fatalf("balance %d, want 7", got)
	}
	if got := count(t, db, `SELECT length(data) FROM events WHERE message_id = 'big-1'`); got != len(under) {
		t.Fatalf("stored payload %d bytes, want %d", got, len(under))
	}
}

// Ids of odd lengths and bytes are stored exactly; an id past the limit is
// dead-lettered with the reason.
func TestOddMessageIDs(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Minute)
	ids := []string{"a", strings.Repeat("x", 512), "ключ-🙂", "with space", "semi;colon:and=equals", "\x01\x7f bytes", "0"}
	tooLong := strings.Repeat("y", 513)
	for i, id := range append(ids, tooLong) {
		m := &nats.Msg{Subject: subject, Header: nats.Header{}, Data: []byte(fmt.Sprintf(`{"account":"odd","amount":%d}`, 1<<i))}
		m.Header.Set(jetstream.MsgIDHeader, id)
		if _, err := w.js.PublishMsg(context.Background(), m); err != nil {
			t.Fatalf("publish id %q: %v", id, err)
		}
	}
	run := w.runConsumer(nil)
	w.finish(run, 30*time.Second)
	db := w.ledgerDB()
	for _, id := range ids {
		if got := count(t, db, `SELECT count(*) FROM processed_messages WHERE message_id = ?`, id); got != 1 {
			t.Errorf("id %q: %d ledger rows, want 1", id, got)
		}
	}
	if got, want := count(t, db, `SELECT amount FROM balances WHERE account = 'odd'`), 1<<len(ids)-1; got != want {
		t.Fatalf("balance %b, want %b", got, want)
	}
	if got := count(t, db, `SELECT count(*) FROM dead_letters WHERE reason LIKE '%unusable Nats-Msg-Id%'`); got != 1 {
		t.Fatalf("dead letters for the long id: %d", got)
	}
}

// A database that fills up (--db-max-size sets max_page_count) stops run
// with exit 1 and "full" in the error; nothing is acked without its commit,
// and a restart with room finishes exactly.
func TestDatabaseFull(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Minute)
	evs := makeEvents(randFor(t), w.pub, 3000)
	w.publish(evs)
	run := w.runConsumer(nil, "--db-max-size", "400000", "--batch", "100")
	if code := run.wait(time.Minute); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	// The cap, not the disk (it has room), and the flag that sets it.
	if !strings.Contains(run.output(), "--db-max-size 400000") {
		t.Fatalf("output does not name --db-max-size 400000:\n%s", tail(run.output()))
	}
	db := w.ledgerDB()
	committed := count(t, db, `SELECT count(*) FROM processed_messages`)
	if info := w.consumerInfo(); int(info.AckFloor.Stream) > committed {
		t.Fatalf("ack floor %d above the %d committed", info.AckFloor.Stream, committed)
	}
	// A full disk is the database's fault, not the messages': none of them
	// may have been retried toward a dead letter (it happened once).
	if n := count(t, db, `SELECT count(*) FROM dead_letters`); n != 0 {
		t.Fatalf("%d messages dead-lettered because the database was full", n)
	}
	run = w.runConsumer(nil)
	w.finish(run, time.Minute)
	w.checkExact(db, evs)
}

// The embedded store on a disk that fills: the server stores nothing more
// and acknowledges nothing more, and keeps that failure until it restarts.
// run sees it, logs it at error and exits 1 for its supervisor; once space
// is freed the restart applies every acknowledged publish exactly once,
// and the publishers' retries of the rest (same ids) once too.
func TestEmbeddedStoreFullStopsRun(t *testing.T) {
	const stateWriteFailed = "write_failed" // the store's state in run's records and /healthz
	t.Parallel()
	disk := consumertest.SmallDisk(t, 24<<20)
	w := &world{t: t, dir: t.TempDir()}
	w.db, w.schema = filepath.Join(w.dir, "ledger.db"), filepath.Join(w.dir, "schema.sql")
	if err := os.WriteFile(w.schema, []byte(balanceTable), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	args := append([]string{"run", "--db", w.db, "--store-dir", filepath.Join(disk, "nats"), "--listen", addr,
		"--stream", stream, "--subjects", "ev.>", "--schema", w.schema, "--apply", balanceApply, "--log-format", "json"}, fastPlan...)
	run := start(t, nil, args...)
	waitServing(t, run, addr)
	nc, err := nats.Connect("nats://"+addr, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if w.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	if w.pub, err = publisher.New(w.js, publisher.Config{}); err != nil {
		t.Fatal(err)
	}
	consumertest.Eventually(t, 30*time.Second, "run consuming", func() bool {
		_, err := w.js.Consumer(context.Background(), stream, "jetledger")
		return err == nil
	})
	evs := makeEvents(randFor(t), w.pub, 300)
	w.publish(evs[:200])
	w.waitDrained(30 * time.Second)

	free := consumertest.FillDisk(t, disk)
	var unacked []event
	for i, e := range evs[200:] {
		select {
		case <-run.done:
			unacked = append(unacked, evs[200+i:]...) // never sent
		default:
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			m := &nats.Msg{Subject: subject, Header: nats.Header{jetstream.MsgIDHeader: []string{e.ID}}, Data: e.data()}
			if _, err := w.js.PublishMsg(ctx, m); err != nil {
				unacked = append(unacked, e)
			}
			cancel()
			continue
		}
		break
	}
	if code := run.wait(time.Minute); code != 1 {
		t.Fatalf("run on a full store: exit %d, want 1", code)
	}
	if len(unacked) == 0 {
		t.Fatal("every publish was acknowledged on the full disk: the test filled nothing")
	}
	if _, ok := run.record(func(r map[string]any) bool { return r["level"] == "ERROR" && r["store_state"] == stateWriteFailed }); !ok {
		t.Fatalf("no error record with store_state %s", stateWriteFailed)
	}

	free()
	run = start(t, nil, args...)
	waitServing(t, run, addr)
	w.publish(unacked) // the publishers' retries, same ids
	w.finish(run, time.Minute)
	w.checkExact(w.ledgerDB(), evs)
}

// A database that becomes read-only under a running consumer (the file made
// immutable) stops it with exit 1 and a clear error; nothing is acked
// without its commit, and a restart once it is writable finishes exactly.
func TestDatabaseBecomesReadOnly(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("chattr"); err != nil {
		t.Skip("chattr not available: cannot make the file read-only for root")
	}
	w := newWorld(t, time.Minute)
	evs := makeEvents(randFor(t), w.pub, 2000)
	w.publish(evs[:1000])
	run := w.runConsumer(nil, "--batch", "100")
	db := w.ledgerDB()
	consumertest.Eventually(t, 30*time.Second, "first half applied", func() bool {
		return count(t, db, `SELECT count(*) FROM processed_messages`) == 1000
	})
	files := []string{w.db, w.db + "-wal"}
	if out, err := exec.Command("chattr", append([]string{"+i"}, files...)...).CombinedOutput(); err != nil {
		t.Skipf("chattr +i: %v %s (filesystem without immutable files)", err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", append([]string{"-i"}, files...)...).Run() })
	w.publish(evs[1000:])
	if code := run.wait(time.Minute); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if out := tail(run.output()); !strings.Contains(out, "nothing of this batch was acked") {
		t.Fatalf("output:\n%s", out)
	}
	committed := count(t, db, `SELECT count(*) FROM processed_messages`)
	if info := w.consumerInfo(); int(info.AckFloor.Stream) > committed || committed != 1000 {
		t.Fatalf("ack floor %d, committed %d; want nothing acked past the 1000 committed", info.AckFloor.Stream, committed)
	}
	if out, err := exec.Command("chattr", append([]string{"-i"}, files...)...).CombinedOutput(); err != nil {
		t.Fatalf("chattr -i: %v %s", err, out)
	}
	run = w.runConsumer(nil)
	w.finish(run, time.Minute)
	w.checkExact(db, evs)
}

// Deleting the stream or the consumer under a running `run` stops it with
// exit 1 and says which.
func TestStreamOrConsumerDeleted(t *testing.T) {
	t.Parallel()
	for _, what := range []string{"consumer", "stream"} {
		t.Run(what, func(t *testing.T) {
			w := newWorld(t, time.Minute)
			w.publish(makeEvents(randFor(t), w.pub, 10))
			run := w.runConsumer(nil)
			w.waitDrained(30 * time.Second)
			ctx := context.Background()
			var err error
			if what == "consumer" {
				err = w.js.DeleteConsumer(ctx, stream, "jetledger")
			} else {
				err = w.js.DeleteStream(ctx, stream)
			}
			if err != nil {
				t.Fatal(err)
			}
			if code := run.wait(30 * time.Second); code != 1 {
				t.Fatalf("exit %d, want 1", code)
			}
			if out := tail(run.output()); !strings.Contains(out, "durable consumer or stream was deleted") {
				t.Fatalf("output:\n%s", out)
			}
		})
	}
}

func tail(s string) string {
	if len(s) > 3000 {
		return "…" + s[len(s)-3000:]
	}
	return s
}
