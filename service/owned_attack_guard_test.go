package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
	"github.com/nats-io/nats.go/jetstream"
)

// guardLog is a logger whose lines a test reads.
type guardLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (g *guardLog) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.Write(p)
}

func (g *guardLog) String() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.String()
}

func (g *guardLog) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(g, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// guardOwner reads what the test partition's owner said (ok false: no key or bucket).
func guardOwner(t *testing.T, js jetstream.JetStream) (changelog.OwnerPosition, bool) {
	t.Helper()
	kv, err := js.KeyValue(t.Context(), changelog.OwnersBucket)
	if err != nil {
		return changelog.OwnerPosition{}, false
	}
	name, _ := changelog.Names("S", "d")
	e, err := kv.Get(t.Context(), name)
	if err != nil {
		return changelog.OwnerPosition{}, false
	}
	var p changelog.OwnerPosition
	if json.Unmarshal(e.Value(), &p) != nil {
		return changelog.OwnerPosition{}, false
	}
	return p, true
}

// guardSeq reads a ledger file's changelog entry.
func guardSeq(t *testing.T, file string) int {
	return count(t, file, `SELECT seq FROM jetledger_changelog WHERE id = 1`)
}

// guardBehind is behindOnItsOutbox without starting b again: n rows queued
// in b's copy, sent by a after b stopped; the log deleted; a stopped.
func guardBehind(t *testing.T, n int, beforeDelete func(js jetstream.JetStream, a *ownedHost)) (a, b *ownedHost, js jetstream.JetStream, dest *webhooktest.Destination) {
	srv := consumertest.RunServer(t)
	_, js = consumertest.Connect(t, srv)
	dest = webhooktest.NewDestination(t, false)
	dest.FailWith(http.StatusTooManyRequests)
	a, b = ownedWebhookPair(t, srv.ClientURL(), &webhook.Config{URL: dest.URL()})
	a.start()
	consumertest.Eventually(t, time.Minute, "a owns the partition", func() bool { return hasSnapshot(t, js) })
	b.start()
	publish(t, js, 0, n)
	consumertest.Eventually(t, time.Minute, fmt.Sprintf("b's copy holds %d queued rows", n), func() bool {
		return outboxRows(t, b.cfg.DB)["queued"] == n
	})
	b.halt()
	dest.FailWith(0)
	consumertest.Eventually(t, time.Minute, fmt.Sprintf("a sent all %d", n), func() bool {
		return outboxRows(t, a.cfg.DB)["sent"] == n
	})
	if beforeDelete != nil {
		beforeDelete(js, a)
	}
	deleteLog(t, js)
	a.halt()
	return a, b, js, dest
}

// A copy behind its owner on the outbox (every message acknowledged, but
// the owner's sends are in entries it lacks) is run with --leave-changelog
// after the log was deleted: refused, as a begin from it waits for the
// owner (JETLEDGER_OWNERS). Before, the leave consulted nothing but the
// acknowledged messages, left "as it stands", and its outbox sent the
// rows the owner had sent: 12 items for 6 rows.
func TestAttackGuardALeaveFromADeletedLogBehindItsOwnerIsRefused(t *testing.T) {
	t.Parallel()
	const n = 6
	_, b, js, dest := guardBehind(t, n, nil)
	if p, ok := guardOwner(t, js); !ok || p.Owner != "a" {
		t.Fatalf("the owner's key: %+v %v", p, ok)
	}
	cfg := b.cfg
	cfg.Owner, cfg.Ledger.LeaveChangelog = nil, true
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	var runErr error
	ended := false
	consumertest.Eventually(t, time.Minute, "the leave refused, or b's rows settled", func() bool {
		select {
		case runErr = <-done:
			ended = true
			return true
		default:
		}
		r := outboxRows(t, cfg.DB)
		return r["sent"]+r["review"] == n
	})
	if !ended {
		stop()
		runErr = <-done
	}
	if items := len(dest.Items()); items != n {
		t.Fatalf("the copy behind its owner (owner's key in %s says a stood further) left its deleted log and consumed on: the destination holds %d items for %d rows (sent twice); rows %v; run: %v",
			changelog.OwnersBucket, items, n, outboxRows(t, cfg.DB), runErr)
	}
	t.Logf("ended %v: %v; rows %v", ended, runErr, outboxRows(t, cfg.DB))
}

// Garbage in the owner's key while the log is there and well and the
// owner idle. The key matters only once the log is gone: a standby
// restarted beside the running owner follows its log. Before, it retried
// for ever as if the server could not be reached.
func TestAttackGuardABadOwnerKeyStopsNoHealthyStandby(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	a, b := ownedPair(t, srv, js, quickPlan, 5)
	consumertest.Eventually(t, time.Minute, "a said where it stands", func() bool {
		p, ok := guardOwner(t, js)
		return ok && p.Owner == "a" && int(p.Seq) == guardSeq(t, a.cfg.DB)
	})
	kv, err := js.KeyValue(t.Context(), changelog.OwnersBucket)
	if err != nil {
		t.Fatal(err)
	}
	name, _ := changelog.Names("S", "d")
	if _, err := kv.Put(t.Context(), name, []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	b.halt()
	logs := &guardLog{}
	b.cfg.Logger = logs.logger()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.cfg.Metrics = l
	base := "http://" + l.Addr().String()
	b.start()
	const retry = "cannot reach its log or its lease now; retrying"
	consumertest.Eventually(t, time.Minute, "b stands by, waits, or has retried 20 times", func() bool {
		s := logs.String()
		return strings.Contains(s, "standing by") || guardGauge(base+"/metrics", "jetledger_changelog_waiting 1") || strings.Count(s, retry) >= 20
	})
	s := logs.String()
	health := healthCode(t, base+"/healthz")
	waiting := guardGauge(base+"/metrics", "jetledger_changelog_waiting 1")
	errors := strings.Count(s, "level=ERROR")
	a.halt()
	b.halt()
	if !strings.Contains(s, "standing by") {
		t.Fatalf("b, a standby of a healthy log, does not follow it while the owner's key is malformed: %d warnings %q, %d at error, waiting gauge 1: %v, /healthz %d; last:\n%s",
			strings.Count(s, retry), retry, errors, waiting, health, tail(s, 700))
	}
	e, _ := kv.Get(t.Context(), name)
	t.Logf("key now %q; logs:\n%s", e.Value(), tail(s, 1500))
}

// Garbage in the owner's key while the owner is idle: the owner restarted
// (the log there and well) owns again. Before, its start exited.
func TestAttackGuardABadOwnerKeyStopsNoOwnersRestart(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	a, b := ownedPair(t, srv, js, quickPlan, 5)
	b.halt()
	consumertest.Eventually(t, time.Minute, "a said where it stands", func() bool {
		p, ok := guardOwner(t, js)
		return ok && p.Owner == "a" && int(p.Seq) == guardSeq(t, a.cfg.DB)
	})
	kv, err := js.KeyValue(t.Context(), changelog.OwnersBucket)
	if err != nil {
		t.Fatal(err)
	}
	name, _ := changelog.Names("S", "d")
	if _, err := kv.Put(t.Context(), name, []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	a.halt()
	if e, err := kv.Get(t.Context(), name); err == nil && string(e.Value()) == "{not json" {
		t.Logf("a stopped without saying where it stood again: the garbage stays")
	}
	logs := &guardLog{}
	a.cfg.Logger = logs.logger()
	a.start()
	publish(t, js, 5, 10)
	var runErr error
	ended := false
	consumertest.Eventually(t, time.Minute, "a owns again and commits 10, or its run ends", func() bool {
		select {
		case runErr = <-a.done:
			ended = true
			return true
		default:
		}
		return processed(t, a.cfg.DB) == 10
	})
	if ended {
		t.Fatalf("the owner, restarted on its healthy log, ended on a malformed owner key: %v; logs:\n%s", runErr, tail(logs.String(), 1500))
	}
	a.halt()
}

func guardGauge(url, want string) bool {
	resp, err := http.Get(url) //nolint:noctx // a test's probe
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return strings.Contains(string(body), "\n"+want+"\n")
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// The owners bucket deleted (an admin cleaning up) under an idle owner:
// made again by the owner (every changelog.OwnerRewrite, and as it
// stops), so after the log is deleted the behind copy waits. Before, an
// owner said its position again only once it moved: the record was gone
// for good, and the behind copy began.
func TestAttackGuardOwnersBucketDeletedUnderAnIdleOwner(t *testing.T) {
	t.Parallel()
	const n = 6
	a, b, js, dest := guardBehind(t, n, func(js jetstream.JetStream, a *ownedHost) {
		consumertest.Eventually(t, time.Minute, "a said where it stands", func() bool {
			p, ok := guardOwner(t, js)
			return ok && p.Owner == "a" && int(p.Seq) == guardSeq(t, a.cfg.DB)
		})
		if err := js.DeleteKeyValue(t.Context(), changelog.OwnersBucket); err != nil {
			t.Fatal(err)
		}
		// a runs on, idle: does it say where it stands again (every second)?
		made := false
		for until := time.Now().Add(3 * time.Second); time.Now().Before(until) && !made; {
			_, made = guardOwner(t, js)
			<-time.After(100 * time.Millisecond)
		}
		t.Logf("3s after the bucket's deletion, the running owner's key made again: %v", made)
	})
	p, ok := guardOwner(t, js)
	t.Logf("after a stopped: owner key %+v %v", p, ok)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.cfg.Metrics = l
	b.start()
	metrics := "http://" + l.Addr().String() + "/metrics"
	waiting := false
	consumertest.Eventually(t, 2*time.Minute, "b waits, or settles its copy's rows", func() bool {
		if waiting = guardGauge(metrics, "jetledger_changelog_waiting 1"); waiting {
			return true
		}
		r := outboxRows(t, b.cfg.DB)
		return r["sent"]+r["review"] == n
	})
	b.halt()
	if waiting {
		t.Logf("held: b waits")
		return
	}
	r := outboxRows(t, b.cfg.DB)
	// a's host back: its fuller copy of the old log meets a new log begun from less
	la, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a.cfg.Metrics = la
	alogs := &guardLog{}
	a.cfg.Logger = alogs.logger()
	a.start()
	waitGauges(t, "http://"+la.Addr().String()+"/metrics", "jetledger_changelog_waiting 1")
	a.halt()
	why := ""
	if i := strings.Index(alogs.String(), "new one begun from less"); i >= 0 {
		why = "a waits: the new one begun from less"
	}
	t.Fatalf("the owners bucket deleted under the idle owner a: a did not make its key again (key present after a stopped: %v); b's copy, behind a's on the outbox, began the new log: rows %v, %d items at the destination; a started again waits (%s)", ok, r, len(dest.Items()), why)
}

// Attack 3: the owner's host replaced with an empty disk and the log
// deleted, the standby behind it on the outbox. Neither may begin from
// less than the owner said; once a person forgets the owner (its file lost
// for good), the standby begins, the replacement restores its snapshot,
// nothing acknowledged is lost and nothing is sent twice.
func TestAttackGuardOwnersDiskWipedAndLogDeleted(t *testing.T) {
	t.Parallel()
	const n = 6
	a, b, js, dest := guardBehind(t, n, nil)
	a2 := newOwnedHost(t, a.cfg.NATS.URL, "a", 0) // same name, an empty disk
	a2.cfg.Webhook = &webhook.Config{URL: dest.URL()}
	metrics := func(h *ownedHost) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		h.cfg.Metrics = l
		return "http://" + l.Addr().String() + "/metrics"
	}
	ma, mb := metrics(a2), metrics(b)
	a2.start()
	b.start()
	waitGauges(t, ma, "jetledger_changelog_waiting 1")
	waitGauges(t, mb, "jetledger_changelog_waiting 1")
	if r := outboxRows(t, b.cfg.DB); r["queued"] != n || len(dest.Items()) != n {
		t.Fatalf("waiting: b's rows %v, %d items", r, len(dest.Items()))
	}
	forgetOwner(t, js)
	consumertest.Eventually(t, 2*time.Minute, "b settles its copy's queued rows", func() bool {
		r := outboxRows(t, b.cfg.DB)
		return r["sent"]+r["review"] == n
	})
	publish(t, js, n, n+4)
	consumertest.Eventually(t, 2*time.Minute, "both copies hold every message", func() bool {
		return processed(t, a2.cfg.DB) == n+4 && processed(t, b.cfg.DB) == n+4
	})
	consumertest.Eventually(t, time.Minute, "the 4 new rows sent", func() bool { return len(dest.Items()) >= n+4 })
	a2.halt()
	b.halt()
	if items := len(dest.Items()); items != n+4 {
		t.Fatalf("the destination holds %d items for %d rows", items, n+4)
	}
	t.Logf("held: b rows %v", outboxRows(t, b.cfg.DB))
}

// Attack 1: a take-over chain. a owns; b takes over (a halted) and sends
// the rows; a, restarted as a standby, follows; then the log is deleted
// and both stopped, and started again: a's host first, then b's, and the
// other way round. Whichever begins, every row is sent once and every
// message kept.
func TestAttackGuardTakeOverChainThenDeletedAFirst(t *testing.T) { guardChain(t, true) }
func TestAttackGuardTakeOverChainThenDeletedBFirst(t *testing.T) { guardChain(t, false) }

func guardChain(t *testing.T, aFirst bool) {
	t.Parallel()
	const n = 6
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	dest := webhooktest.NewDestination(t, false)
	dest.FailWith(http.StatusTooManyRequests)
	a, b := ownedWebhookPair(t, srv.ClientURL(), &webhook.Config{URL: dest.URL()})
	a.start()
	consumertest.Eventually(t, time.Minute, "a owns the partition", func() bool { return hasSnapshot(t, js) })
	b.start()
	publish(t, js, 0, n)
	consumertest.Eventually(t, time.Minute, "b's copy holds the queued rows", func() bool { return outboxRows(t, b.cfg.DB)["queued"] == n })
	a.halt()
	dest.FailWith(0)
	consumertest.Eventually(t, time.Minute, "b took over and sent all", func() bool { return outboxRows(t, b.cfg.DB)["sent"] == n })
	a.start()
	consumertest.Eventually(t, time.Minute, "a follows b", func() bool { return outboxRows(t, a.cfg.DB)["sent"] == n })
	publish(t, js, n, n+3)
	consumertest.Eventually(t, time.Minute, "a follows b to 9", func() bool { return outboxRows(t, a.cfg.DB)["sent"] == n+3 })
	deleteLog(t, js)
	a.halt()
	b.halt()
	first, second := a, b
	if !aFirst {
		first, second = b, a
	}
	first.start()
	second.start()
	publish(t, js, n+3, n+6)
	consumertest.Eventually(t, 2*time.Minute, "both copies hold 12, 12 rows sent", func() bool {
		return processed(t, a.cfg.DB) == n+6 && processed(t, b.cfg.DB) == n+6 && len(dest.Items()) >= n+6 &&
			outboxRows(t, a.cfg.DB)["sent"] == n+6 && outboxRows(t, b.cfg.DB)["sent"] == n+6 // the standby's copy too, which may lag
	})
	a.halt()
	b.halt()
	if items := len(dest.Items()); items != n+6 {
		t.Fatalf("the destination holds %d items for %d rows", items, n+6)
	}
	for _, h := range []*ownedHost{a, b} {
		if r := outboxRows(t, h.cfg.DB); r["sent"] != n+6 {
			t.Fatalf("%s's rows: %v", h.cfg.Owner.Name, r)
		}
	}
}

// Attack 5: the standby's file (not the owner's) leaves the log and
// consumes on its own; the log is deleted; the old owner's host is started
// first (what it said, entry x, is what its copy holds), then the left
// file. What the owner said must not let the owner's copy begin without
// what the left file applied, nor stop the left file from beginning.
func TestAttackGuardStandbyLeftThenRejoinsAfterTheOwnerSaid(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	a, b := ownedPair(t, srv, js, quickPlan, 20)
	b.halt()
	a.halt()
	if p, ok := guardOwner(t, js); !ok || p.Owner != "a" || int(p.Seq) != guardSeq(t, a.cfg.DB) {
		t.Fatalf("owner's key %+v %v, a at %d", p, ok, guardSeq(t, a.cfg.DB))
	}
	runOutOfTheLog(t, js, b.cfg, 20, 30)
	deleteLog(t, js)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a.cfg.Metrics = l
	a.start()
	waitGauges(t, "http://"+l.Addr().String()+"/metrics", "jetledger_changelog_waiting 1")
	if n := processed(t, a.cfg.DB); n != 20 {
		t.Fatalf("a began without what b applied: %d", n)
	}
	b.start()
	publish(t, js, 30, 40)
	consumertest.Eventually(t, time.Minute, "both hold 40", func() bool {
		return processed(t, a.cfg.DB) == 40 && processed(t, b.cfg.DB) == 40
	})
	a.halt()
	b.halt()
	if setAside(b) {
		t.Fatalf("b's files %v: the left file was set aside", b.files())
	}
}

// Attack 4b: the owners bucket deleted under an owner that moves on: its
// next record makes the bucket again, and nothing logs at error.
func TestAttackGuardOwnersBucketDeletedUnderAMovingOwner(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	logs := &guardLog{}
	a, b := newOwnedHost(t, srv.ClientURL(), "a", 0), newOwnedHost(t, srv.ClientURL(), "b", 0)
	a.cfg.Logger, b.cfg.Logger = logs.logger(), logs.logger()
	a.start()
	consumertest.Eventually(t, time.Minute, "a owns the partition", func() bool { return hasSnapshot(t, js) })
	b.start()
	publish(t, js, 0, 5)
	consumertest.Eventually(t, time.Minute, "a said where it stands", func() bool {
		p, ok := guardOwner(t, js)
		return ok && int(p.Seq) == guardSeq(t, a.cfg.DB) && processed(t, b.cfg.DB) == 5
	})
	if err := js.DeleteKeyValue(t.Context(), changelog.OwnersBucket); err != nil {
		t.Fatal(err)
	}
	publish(t, js, 5, 10)
	consumertest.Eventually(t, time.Minute, "the key made again at a's position", func() bool {
		p, ok := guardOwner(t, js)
		return ok && processed(t, a.cfg.DB) == 10 && int(p.Seq) == guardSeq(t, a.cfg.DB)
	})
	a.halt()
	consumertest.Eventually(t, time.Minute, "b takes over and says so", func() bool {
		p, ok := guardOwner(t, js)
		return ok && p.Owner == "b"
	})
	b.halt()
	if s := logs.String(); strings.Contains(s, "level=ERROR") {
		t.Fatalf("errors logged: %s", tail(s, 1000))
	}
}
