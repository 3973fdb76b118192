package integration

import (
	"database/sql"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"

	"github.com/jetledger/jetledger/consumer/consumertest"
)

func webhookArgs(d *webhooktest.Destination, extra ...string) []string {
	return append([]string{"--webhook", d.URL(), "--webhook-delete-url", d.DeleteURL(), "--webhook-timeout", "1s"}, extra...)
}

type outboxRow struct {
	ID, MessageID, Status, ExternalID, Error string
}

func outboxRows(t testing.TB, db *sql.DB) []outboxRow {
	t.Helper()
	rows, err := db.Query(`SELECT id, message_id, status, coalesce(external_id, ''), coalesce(error, '') FROM outbox ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []outboxRow
	for rows.Next() {
		var r outboxRow
		if err := rows.Scan(&r.ID, &r.MessageID, &r.Status, &r.ExternalID, &r.Error); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func waitRowStatus(t testing.TB, db *sql.DB, id, status string, timeout time.Duration) outboxRow {
	t.Helper()
	var found outboxRow
	consumertest.Eventually(t, timeout, "outbox row "+id+" "+status, func() bool {
		for _, r := range outboxRows(t, db) {
			if r.ID == id {
				found = r
				return r.Status == status
			}
		}
		return false
	})
	return found
}

// waitSettled waits until every outbox row of the ledgers is sent or in
// review.
func waitSettled(t testing.TB, dbs ...*sql.DB) {
	t.Helper()
	consumertest.Eventually(t, time.Minute, "every outbox row settled", func() bool {
		for _, db := range dbs {
			for _, r := range outboxRows(t, db) {
				if r.Status != "sent" && r.Status != "review" {
					return false
				}
			}
		}
		return true
	})
}

// checkSentAtMostOnce: one outbox row per message (n of them), each sent
// to the destination (which has no idempotency) at most once, a sent row
// holding the item the destination stored, the rest in review. It
// returns how many are in review.
func checkSentAtMostOnce(t testing.TB, dest *webhooktest.Destination, rows []outboxRow, n int) (review int) {
	t.Helper()
	byKey := map[string][]webhooktest.StoredItem{}
	perMessage := map[string]int{}
	for _, it := range dest.Items() {
		byKey[it.Key] = append(byKey[it.Key], it)
		perMessage[it.MessageID]++
	}
	if len(rows) != n {
		t.Fatalf("outbox rows %d, want one per message (%d)", len(rows), n)
	}
	for _, r := range rows {
		stored := byKey[r.ID]
		switch {
		case perMessage[r.MessageID] > 1 || len(stored) > 1:
			t.Errorf("message %s: %d items at the destination", r.MessageID, perMessage[r.MessageID])
		case r.Status == "sent" && (len(stored) != 1 || stored[0].ExternalID != r.ExternalID):
			t.Errorf("row %s sent as %q but the destination holds %+v", r.ID, r.ExternalID, stored)
		case r.Status == "review":
			review++
		}
	}
	for key := range byKey {
		if dest.Requests(key) > 1 {
			t.Errorf("key %s sent %d times to a destination without idempotency", key, dest.Requests(key))
		}
	}
	return review
}

// cli runs a short jetledger command and returns its output and exit code.
func cli(t testing.TB, args ...string) (string, int) {
	t.Helper()
	p := start(t, nil, args...)
	code := p.wait(30 * time.Second)
	return p.output(), code
}

// SIGKILL while the destination holds the request (it has stored the item,
// the answer has not left): on restart the row is in review, the destination
// got exactly one request, and `outbox resolve` settles it.
func TestKillDuringSendGoesToReview(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Minute)
	dest := webhooktest.NewDestination(t, false)
	dest.HoldAfterStore()
	w.publish([]event{{ID: "e1", Account: "a", Amount: 5}})
	p := w.runConsumer(nil, webhookArgs(dest)...)
	key := <-dest.Arrived()
	p.kill()

	p = w.runConsumer(nil, webhookArgs(dest)...)
	db := w.ledgerDB()
	row := waitRowStatus(t, db, key, "review", 30*time.Second)
	if dest.Requests(key) != 1 || len(dest.Items()) != 1 || !strings.Contains(row.Error, "lease") {
		t.Fatalf("requests %d, items %d, row %+v", dest.Requests(key), len(dest.Items()), row)
	}
	out, code := cli(t, "outbox", "review", "--db", w.db, "--json")
	var listed []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 1 || listed[0]["id"] != key {
		t.Fatalf("outbox review: exit %d\n%s", code, out)
	}
	// A person checks the destination and records what is there.
	if out, code := cli(t, "outbox", "resolve", key, "--db", w.db, "--as", "sent"); code != 2 || !strings.Contains(out, "--external-id") {
		t.Fatalf("resolve without external id: exit %d\n%s", code, out)
	}
	ext := dest.Items()[0].ExternalID
	out, code = cli(t, "outbox", "resolve", key, "--db", w.db, "--as", "sent", "--external-id", ext)
	if code != 0 || !strings.Contains(out, "resolved as sent") {
		t.Fatalf("resolve: exit %d\n%s", code, out)
	}
	if row := waitRowStatus(t, db, key, "sent", time.Second); row.ExternalID != ext {
		t.Fatalf("row %+v", row)
	}
	if out, code := cli(t, "outbox", "resolve", key, "--db", w.db, "--as", "failed"); code != 1 || !strings.Contains(out, "it is sent") {
		t.Fatalf("second resolve: exit %d\n%s", code, out)
	}
	p.signal(syscall.SIGTERM)
	if code := p.wait(30 * time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if dest.Requests(key) != 1 {
		t.Fatalf("the row was re-sent: %d requests", dest.Requests(key))
	}
}

// The same with a destination that honours idempotency keys: re-sent once
// with the same key; the destination saw the key twice and stored one item.
func TestKillDuringSendIdempotentResends(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Minute)
	dest := webhooktest.NewDestination(t, true)
	dest.HoldAfterStore()
	w.publish([]event{{ID: "e1", Account: "a", Amount: 5}})
	p := w.runConsumer(nil, webhookArgs(dest, "--webhook-idempotent")...)
	key := <-dest.Arrived()
	p.kill()
	dest.Release()

	p = w.runConsumer(nil, webhookArgs(dest, "--webhook-idempotent")...)
	db := w.ledgerDB()
	row := waitRowStatus(t, db, key, "sent", 30*time.Second)
	items := dest.Items()
	if dest.Requests(key) != 2 || len(items) != 1 || items[0].Key != key || row.ExternalID != items[0].ExternalID {
		t.Fatalf("requests %d, items %+v, row %+v", dest.Requests(key), items, row)
	}
	p.signal(syscall.SIGTERM)
	p.wait(30 * time.Second)
}

// Outbox commands: cancelling a sent row whose delete fails leaves it sent
// and says the item is still there; list filters; retry re-queues a failed row.
func TestOutboxCommands(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Minute)
	dest := webhooktest.NewDestination(t, false)
	w.publish([]event{{ID: "e1", Account: "a", Amount: 5}})
	p := w.runConsumer(nil, webhookArgs(dest)...)
	db := w.ledgerDB()
	var key string
	consumertest.Eventually(t, 10*time.Second, "a sent row", func() bool {
		rows := outboxRows(t, db)
		if len(rows) == 1 && rows[0].Status == "sent" {
			key = rows[0].ID
			return true
		}
		return false
	})
	p.signal(syscall.SIGTERM)
	if code := p.wait(30 * time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}

	dest.FailDeletesWith(403) // refused: surely not deleted, so the row stays sent
	out, code := cli(t, "outbox", "cancel", key, "--db", w.db, "--webhook-delete-url", dest.DeleteURL())
	if code != 1 || !strings.Contains(out, "still at the destination") || !strings.Contains(out, "status 403") {
		t.Fatalf("cancel with failing delete: exit %d\n%s", code, out)
	}
	if row := waitRowStatus(t, db, key, "sent", time.Second); row.Status != "sent" || len(dest.Items()) != 1 {
		t.Fatalf("row %+v", row)
	}
	out, code = cli(t, "outbox", "cancel", key, "--db", w.db)
	if code != 1 || !strings.Contains(out, "still at the destination") {
		t.Fatalf("cancel without delete URL: exit %d\n%s", code, out)
	}
	dest.FailDeletesWith(0)
	out, code = cli(t, "outbox", "cancel", key, "--db", w.db, "--webhook-delete-url", dest.DeleteURL())
	if code != 0 || !strings.Contains(out, "deleted at the destination") || len(dest.Items()) != 0 {
		t.Fatalf("cancel: exit %d, %d items\n%s", code, len(dest.Items()), out)
	}
	out, code = cli(t, "outbox", "list", "--db", w.db, "--status", "cancelled")
	if code != 0 || !strings.Contains(out, key) {
		t.Fatalf("list: exit %d\n%s", code, out)
	}
	if out, code := cli(t, "outbox", "list", "--db", w.db, "--status", "bogus"); code != 2 || !strings.Contains(out, "queued") {
		t.Fatalf("list bad status: exit %d\n%s", code, out)
	}
	if out, code := cli(t, "outbox", "retry", key, "--db", w.db); code != 1 || !strings.Contains(out, "cannot retry") {
		t.Fatalf("retry of a cancelled row: exit %d\n%s", code, out)
	}

	// A 400 fails the next row at once with the status recorded; retry re-queues it.
	dest.FailWith(400)
	w.publish([]event{{ID: "e2", Account: "a", Amount: 7}})
	p = w.runConsumer(nil, webhookArgs(dest)...)
	var failed outboxRow
	consumertest.Eventually(t, 10*time.Second, "a failed row", func() bool {
		for _, r := range outboxRows(t, db) {
			if r.Status == "failed" {
				failed = r
				return true
			}
		}
		return false
	})
	if !strings.Contains(failed.Error, "status 400") {
		t.Fatalf("failed row error %q", failed.Error)
	}
	dest.FailWith(0)
	if out, code := cli(t, "outbox", "retry", failed.ID, "--db", w.db); code != 0 || !strings.Contains(out, "queued again") {
		t.Fatalf("retry: exit %d\n%s", code, out)
	}
	waitRowStatus(t, db, failed.ID, "sent", 10*time.Second)
	p.signal(syscall.SIGTERM)
	p.wait(30 * time.Second)
}

// 2 000 messages to a (slow) webhook destination with at least five random
// SIGKILLs of the consumer. For every message the destination holds at most
// one item; a message without one has its row in review; no row has two
// external ids; the balances are exact.
func TestWebhookRunWithRandomKills(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Minute)
	dest := webhooktest.NewDestination(t, false)
	dest.SetDelay(2 * time.Millisecond)
	rng := rand.New(rand.NewPCG(7, 2000))
	evs := makeEvents(rng, w.pub, 2000)
	w.publish(evs)
	args := webhookArgs(dest, "--batch", "50", "--outbox-workers", "4")
	var db *sql.DB
	for i := 0; i < 6; i++ {
		p := w.runConsumer(nil, args...)
		if db == nil {
			db = w.ledgerDB()
		}
		target := len(dest.Items()) + 20 + rng.IntN(300)
		consumertest.Eventually(t, time.Minute, "sends before the kill", func() bool { return len(dest.Items()) >= target })
		p.kill()
	}
	p := w.runConsumer(nil, args...)
	w.waitDrained(2 * time.Minute)
	waitSettled(t, db)
	p.signal(syscall.SIGTERM)
	if code := p.wait(30 * time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	w.checkExact(db, evs)

	review := checkSentAtMostOnce(t, dest, outboxRows(t, db), len(evs))
	t.Logf("%d messages, %d items at the destination, %d rows in review", len(evs), len(dest.Items()), review)
}
