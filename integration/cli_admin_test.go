package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
	"github.com/jetledger/jetledger/publisher"
)

// Issue 43: `jetledger outbox … --nats` acts through the running owner's
// admin API, the file never opened: list, show (payload decoded, history),
// and a bulk resolve by status (the count first, done only with --all,
// recorded with --who). Bad input changes nothing: an unknown id, and a
// server where no run answers (named).
func TestTheOutboxCommandsGoThroughTheAdminAPI(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Minute)
	dest := webhooktest.NewDestination(t, false)
	dest.FailWith(http.StatusInternalServerError)
	w.publish([]event{{ID: "e1", Account: "a", Amount: 5}, {ID: "e2", Account: "b", Amount: 7}, {ID: "e3", Account: "c", Amount: 9}})
	run := w.runConsumer(nil, webhookArgs(dest)...)
	db := w.ledgerDB()
	consumertest.Eventually(t, time.Minute, "3 rows in review", func() bool {
		return count(t, db, `SELECT count(*) FROM outbox WHERE status = 'review'`) == 3
	})
	url := w.srv.ClientURL()
	out, code := cli(t, "outbox", "review", "--nats", url, "--json")
	var listed []map[string]any
	if code != 0 || json.Unmarshal([]byte(out[strings.Index(out, "["):]), &listed) != nil || len(listed) != 3 {
		t.Fatalf("outbox review --nats: exit %d\n%s", code, out)
	}
	id := listed[0]["id"].(string)
	if out, code := cli(t, "outbox", "resolve", "--nats", url, "--status", "review", "--as", "failed"); code != 0 ||
		!strings.Contains(out, "3 rows to resolve in status review") || !strings.Contains(out, "--all") {
		t.Fatalf("a bulk resolve without --all: exit %d\n%s", code, out)
	}
	if n := count(t, db, `SELECT count(*) FROM outbox WHERE status = 'review'`); n != 3 {
		t.Fatalf("a resolve without --all changed rows: %d in review", n)
	}
	out, code = cli(t, "outbox", "resolve", "--nats", url, "--status", "review", "--as", "failed", "--all", "--who", "ops@example", "--note", "provider says no")
	if code != 0 || !strings.Contains(out, "3 done, 0 skipped") {
		t.Fatalf("the bulk resolve: exit %d\n%s", code, out)
	}
	if n := count(t, db, `SELECT count(*) FROM jetledger_audit WHERE who = 'ops@example' AND note = 'provider says no'`); n != 3 {
		t.Fatalf("%d records of the resolve, want 3", n)
	}
	out, code = cli(t, "outbox", "show", id, "--nats", url)
	if code != 0 || !strings.Contains(out, `"account"`) || !strings.Contains(out, `"who": "ops@example"`) {
		t.Fatalf("outbox show --nats: exit %d\n%s", code, out)
	}
	if out, code := cli(t, "outbox", "retry", "nope", "--nats", url); code != 1 || !strings.Contains(out, "skipped nope") {
		t.Fatalf("a retry of an unknown id: exit %d\n%s", code, out)
	}
	run.signal(syscall.SIGTERM)
	if code := run.wait(30 * time.Second); code != 0 {
		t.Fatalf("run exited %d", code)
	}
	if out, code := cli(t, "outbox", "show", id, "--db", w.db); code != 0 || !strings.Contains(out, `"who": "ops@example"`) {
		t.Fatalf("outbox show --db of the stopped ledger: exit %d\n%s", code, out)
	}
	if out, code := cli(t, "outbox", "list", "--db", w.db, "--json"); code != 0 || !strings.Contains(out, `"payload": {`) {
		t.Fatalf("outbox list --json: the payloads decoded wanted, exit %d\n%s", code, out)
	}
	if out, code := cli(t, "outbox", "list", "--nats", url); code != 1 || !strings.Contains(out, url) {
		t.Fatalf("a server where no run answers: exit %d\n%s", code, out)
	}
}

// Issue 43: dead letters and conflicts settled through the running run's
// API from the command line: listed, shown (the conflict's two payloads
// read from the stream, hashes in hex as in the table), acknowledged and
// discarded with a note, each recorded; from --db once the run stopped.
func TestDeadLettersAndConflictsGoThroughTheAdminAPI(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 100*time.Millisecond)
	ctx := context.Background()
	w.publish([]event{{ID: "g1", Account: "a", Amount: 10}})
	for _, id := range []string{"bad-json", "bad-2"} {
		if _, err := w.pub.Publish(ctx, publisher.Message{Subject: subject, ID: id, Data: []byte(`{"account": "a", amount: 1`)}); err != nil {
			t.Fatal(err)
		}
	}
	consumertest.Eventually(t, 10*time.Second, "duplicate window to pass", func() bool {
		a, err := w.pub.Publish(ctx, publisher.Message{Subject: subject, ID: "g1", Data: []byte(`{"account":"a","amount":999}`)})
		return err == nil && !a.Duplicate
	})
	run := w.runConsumer(nil)
	db := w.ledgerDB()
	consumertest.Eventually(t, time.Minute, "a dead letter and a conflict", func() bool {
		return count(t, db, `SELECT count(*) FROM dead_letters`) == 2 && count(t, db, `SELECT count(*) FROM conflicts`) == 1
	})
	url := w.srv.ClientURL()
	if out, code := cli(t, "dlq", "list", "--nats", url); code != 0 || !strings.Contains(out, "bad-json") {
		t.Fatalf("dlq list --nats: exit %d\n%s", code, out)
	}
	dl, cf := fmt.Sprint(count(t, db, `SELECT id FROM dead_letters WHERE message_id = 'bad-json'`)), fmt.Sprint(count(t, db, `SELECT id FROM conflicts`))
	// Requeued by the owner, through its API: republished with its id
	// (a dead letter again, its payload being what it is), recorded.
	dl2 := fmt.Sprint(count(t, db, `SELECT id FROM dead_letters WHERE message_id = 'bad-2'`))
	if out, code := cli(t, "dlq", "requeue", dl2, "--api", "--nats", url, "--who", "ops@example", "--note", "fixed upstream"); code != 0 || !strings.Contains(out, "requeued as "+stream+" seq") {
		t.Fatalf("dlq requeue --api: exit %d\n%s", code, out)
	}
	if out, code := cli(t, "dlq", "requeue", dl2, "--api", "--nats", url); code != 1 || !strings.Contains(out, "dead letter "+dl2) {
		t.Fatalf("dlq requeue --api of a dead letter requeued before: exit %d, want 1 naming it\n%s", code, out)
	}
	if out, code := cli(t, "dlq", "show", dl, "--nats", url); code != 0 || !strings.Contains(out, "not valid JSON") {
		t.Fatalf("dlq show --nats: exit %d\n%s", code, out)
	}
	out, code := cli(t, "conflicts", "show", cf, "--nats", url)
	if code != 0 || !strings.Contains(out, `"amount": 10`) || !strings.Contains(out, `"amount": 999`) {
		t.Fatalf("conflicts show --nats: both payloads wanted, exit %d\n%s", code, out)
	}
	if out, code := cli(t, "conflicts", "ack", cf, "--nats", url); code != 2 || !strings.Contains(out, "--note") {
		t.Fatalf("conflicts ack without --note: exit %d\n%s", code, out)
	}
	for _, args := range [][]string{{"conflicts", "ack", cf, "--note", "sender reused the id"}, {"dlq", "discard", dl, "--note", "a test message"}} {
		if out, code := cli(t, append(args, "--nats", url, "--who", "ops@example")...); code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, code, out)
		}
	}
	if n := count(t, db, `SELECT count(*) FROM jetledger_audit WHERE who = 'ops@example'`); n != 3 {
		t.Fatalf("%d records of the three actions, want 3", n)
	}
	if out, code := cli(t, "conflicts", "ack", cf, "--nats", url, "--note", "again"); code != 1 || !strings.Contains(out, "acknowledged before") {
		t.Fatalf("a second ack: exit %d\n%s", code, out)
	}
	if out, code := cli(t, "conflicts", "show", cf, "--nats", url); code != 0 || !strings.Contains(out, `"note": "sender reused the id"`) {
		t.Fatalf("conflicts show after the ack: its record wanted, exit %d\n%s", code, out)
	}
	run.signal(syscall.SIGTERM)
	if code := run.wait(30 * time.Second); code != 0 {
		t.Fatalf("run exited %d", code)
	}
	if out, code := cli(t, "conflicts", "list", "--db", w.db); code != 0 || !strings.Contains(out, "ops@example") {
		t.Fatalf("conflicts list --db: exit %d\n%s", code, out)
	}
}

// Issue 43: a ledger records the server its run used, and status and
// ledger prune ask that one when --nats is not given (run listens on a
// free port of its own here, not the default one); a stream that is not there
// is said naming the server asked.
func TestCommandsAskTheServerTheLedgerRecords(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := dir + "/l.db"
	url := fmt.Sprintf("nats://127.0.0.1:%d", freePort(t))
	run := start(t, nil, "run", "--db", db, "--listen", strings.TrimPrefix(url, "nats://"), "--stream", "REC", "--subjects", "rec.>", "--log-format", "json")
	consumertest.Eventually(t, 30*time.Second, "the server recorded in the ledger", func() bool {
		out, code := cli(t, "ledger", "stats", "--db", db, "--json")
		return code == 0 && strings.Contains(out, `"server_url": "`+url+`"`)
	})
	if out, code := cli(t, "status", "--db", db); code != 0 || !strings.Contains(out, "REC") {
		t.Fatalf("status without --nats: exit %d\n%s", code, out)
	}
	if out, code := cli(t, "ledger", "prune", "--db", db); code != 0 {
		t.Fatalf("ledger prune without --nats: exit %d\n%s", code, out)
	}
	if out, code := cli(t, "status", "--db", db, "--stream", "NOPE"); code != 1 || !strings.Contains(out, url) {
		t.Fatalf("status of a stream not there: exit %d, want 1 naming %s\n%s", code, url, out)
	}
	run.signal(syscall.SIGTERM)
	if code := run.wait(30 * time.Second); code != 0 {
		t.Fatalf("run exited %d", code)
	}
}
