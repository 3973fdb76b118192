package service

import (
	"database/sql"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
	"github.com/nats-io/nats.go/jetstream"
)

// behindOnItsOutbox makes the partition's log gone with b's copy behind
// a's on the outbox: n rows queued in b's copy, sent by a after b
// stopped; then the changelog stream is deleted and a stops. b is started
// again, with its metrics at the URL returned.
func behindOnItsOutbox(t *testing.T, n int) (a, b *ownedHost, js jetstream.JetStream, dest *webhooktest.Destination, metrics string) {
	srv := consumertest.RunServer(t)
	_, js = consumertest.Connect(t, srv)
	dest = webhooktest.NewDestination(t, false)
	dest.FailWith(http.StatusTooManyRequests) // surely not taken (RetryOn): the rows stay queued, to be tried again
	a, b = ownedWebhookPair(t, srv.ClientURL(), &webhook.Config{URL: dest.URL()})
	a.start()
	consumertest.Eventually(t, time.Minute, "a owns the partition", func() bool { return hasSnapshot(t, js) })
	b.start()
	publish(t, js, 0, n)
	consumertest.Eventually(t, time.Minute, fmt.Sprintf("b's copy holds %d queued rows", n), func() bool {
		return outboxRows(t, b.cfg.DB)["queued"] == n
	})
	b.halt()
	if q := outboxRows(t, b.cfg.DB)["queued"]; q == 0 {
		t.Fatalf("b's copy as it stopped: %v, want queued rows", outboxRows(t, b.cfg.DB))
	}
	dest.FailWith(0)
	consumertest.Eventually(t, time.Minute, fmt.Sprintf("a sent all %d", n), func() bool {
		return outboxRows(t, a.cfg.DB)["sent"] == n
	})
	name, _ := changelog.Names("S", "d")
	if err := js.DeleteStream(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	a.halt()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.cfg.Metrics = l
	b.start() // a is gone: b's copy is behind what a said its ledger held
	metrics = "http://" + l.Addr().String() + "/metrics"
	waitGauges(t, metrics, "jetledger_changelog_waiting 1")
	return a, b, js, dest, metrics
}

// Issue 42 (the long owned nemesis, seed 1796515591568882334): after the
// changelog is deleted, a standby's copy behind the owner's on the outbox
// (rows the owner sent, queued here) would begin the new log and send
// them again. It waits instead, as the owner said it stood further in the
// log; the owner's host, started again, begins the new log, and the
// standby restores its snapshot: every row sent once.
func TestACopyBehindItsLastOwnerWaitsForIt(t *testing.T) {
	t.Parallel()
	const n = 6
	a, b, _, dest, _ := behindOnItsOutbox(t, n)
	if r := outboxRows(t, b.cfg.DB); r["queued"] == 0 || len(dest.Items()) != n {
		t.Fatalf("b, waiting: rows %v, %d items at the destination; want its queued rows unsent", r, len(dest.Items()))
	}
	a.cfg.Metrics = nil
	a.start()
	consumertest.Eventually(t, 2*time.Minute, "b's copy restored from a's new log: every row sent", func() bool {
		return outboxRows(t, b.cfg.DB)["sent"] == n
	})
	a.halt()
	b.halt()
	if items := dest.Items(); len(items) != n {
		t.Fatalf("the destination holds %d items for %d rows: sent twice", len(items), n)
	}
}

// The same copy, once a person deleted what the owner said (its host
// lost for good), begins the new log: its queued rows are taken as maybe
// sent, and the destination, which does not honour idempotency keys, gets
// nothing twice: the rows wait in review, saying why. Before the rows
// were taken so, the begin sent all of them again (12 items for 6).
func TestABeginFromACopyBehindOnItsOutboxSendsNothingTwice(t *testing.T) {
	t.Parallel()
	const n = 6
	_, b, js, dest, _ := behindOnItsOutbox(t, n)
	forgetOwner(t, js)
	consumertest.Eventually(t, 2*time.Minute, "b settles its copy's queued rows", func() bool {
		r := outboxRows(t, b.cfg.DB)
		return r["sent"]+r["review"] == n
	})
	b.halt()
	if items := dest.Items(); len(items) != n {
		t.Fatalf("the destination holds %d items for %d rows: sent twice", len(items), n)
	}
	if r := outboxRows(t, b.cfg.DB); r["review"] != n {
		t.Fatalf("b's rows: %v, want all %d in review", r, n)
	}
	why := outboxErrors(t, b.cfg.DB)
	if !strings.Contains(why[0], "the partition's log began again from this copy") {
		t.Fatalf("a review row's error %q does not say why", why[0])
	}
	for _, it := range dest.Items() {
		if r := dest.Requests(it.Key); r > 1+maxRefused {
			t.Fatalf("row %s was posted %d times", it.Key, r)
		}
	}
}

// forgetOwner deletes what the test partition's owner said of where its
// ledger stood, as a person does whose owner's file is lost for good.
func forgetOwner(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	kv, err := js.KeyValue(t.Context(), changelog.OwnersBucket)
	if err != nil {
		t.Fatal(err)
	}
	name, _ := changelog.Names("S", "d")
	if err := kv.Delete(t.Context(), name); err != nil {
		t.Fatal(err)
	}
}

// maxRefused bounds the refused posts of one row before the destination
// accepts (the backoff doubles from 1s; the test waits at most a minute).
const maxRefused = 8

// outboxErrors is the errors of the ledger's outbox rows.
func outboxErrors(t *testing.T, file string) []string {
	db, err := sql.Open("sqlite", "file:"+filepath.ToSlash(file)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT coalesce(error, '') FROM outbox ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		t.Fatalf("the outbox of %s has no rows", file)
	}
	return out
}

// outboxRows counts the ledger's outbox rows by state (none if it cannot
// be read yet).
func outboxRows(t *testing.T, file string) map[string]int {
	db, err := sql.Open("sqlite", "file:"+filepath.ToSlash(file)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string]int{}
	rows, err := db.Query(`SELECT status, count(*) FROM outbox GROUP BY status`)
	if err != nil {
		return out
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		var c int
		if rows.Scan(&s, &c) == nil {
			out[s] = c
		}
	}
	return out
}
