package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Attack on a SIGTERM early in a run's start (ledger/changelog.go: a write
// begun is not cut by a stop), and on SIGTERMs of an owner in the middle
// of its sends (consumer/outbox/dispatcher.go: claim), with the
// built binary: two hosts (--changelog --standby) of one partition on one
// nats-server, a webhook destination that is slow and refuses with 429 now
// and then, messages published throughout. Each round SIGTERMs one host (the
// owner or the standby), starts it again and SIGTERMs it again at a random
// small delay after launch, then starts it for good. Every SIGTERM must exit
// 0 within the sink timeout + claim lease; at the end every message is
// applied once, no item is at the destination twice, and the review rows
// are counted with their logged reasons.

type stopHost struct {
	name, dir string
	p         *proc
	all       []*proc
}

func TestAttackStopEarlySIGTERMsExitZero(t *testing.T) {
	rounds := 3 // JETLEDGER_STOP_ROUNDS for more (the helper ran 8 and 15)
	if n, err := strconv.Atoi(os.Getenv("JETLEDGER_STOP_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	dest := webhooktest.NewDestination(t, false)
	dest.SetDelay(200 * time.Millisecond)
	schema := filepath.Join(t.TempDir(), "schema.sql")
	if err := os.WriteFile(schema, []byte(`CREATE TABLE IF NOT EXISTS applied (id TEXT NOT NULL);`), 0o600); err != nil {
		t.Fatal(err)
	}
	const sinkTimeout = 3 * time.Second
	launch := func(h *stopHost) *proc {
		args := append([]string{"run", "--nats", srv.ClientURL(), "--db", filepath.Join(h.dir, "ledger.db"), "--stream", "SC",
			"--subjects", "pay.*", "--schema", schema, "--apply", `INSERT INTO applied VALUES (:msg_id)`, "--log-format", "json",
			"--changelog", "--standby", "--webhook", dest.URL(), "--webhook-timeout", sinkTimeout.String(),
			"--outbox-workers", "8", "--summary-interval", "0"}, fastPlan...)
		p := start(t, nil, args...)
		h.p, h.all = p, append(h.all, p)
		return p
	}
	hosts := []*stopHost{{name: "A", dir: t.TempDir()}, {name: "B", dir: t.TempDir()}}
	launch(hosts[0])
	consumertest.Eventually(t, 2*time.Minute, "A owns", func() bool { return strings.Contains(hosts[0].p.output(), `"role":"owner"`) })
	launch(hosts[1])
	consumertest.Eventually(t, 2*time.Minute, "B stands by", func() bool { return strings.Contains(hosts[1].p.output(), "standing by") })

	// 429s on and off, and messages published throughout.
	ctx, cancel := context.WithCancel(context.Background())
	bg := make(chan int, 1)
	go func() {
		rng := rand.New(rand.NewPCG(3, 4))
		n := 0
		for on := false; ctx.Err() == nil; on = !on {
			if on {
				dest.FailWith(http.StatusTooManyRequests)
			} else {
				dest.FailWith(0)
			}
			for range 5 {
				m := nats.NewMsg("pay.x")
				m.Data = []byte(fmt.Sprintf(`{"n":%d}`, n))
				m.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("m-%d", n))
				if _, err := js.PublishMsg(ctx, m); err == nil {
					n++
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(100+rng.IntN(300)) * time.Millisecond): // fault schedule, not synchronisation
			}
		}
		dest.FailWith(0)
		bg <- n
	}()
	rng := rand.New(rand.NewPCG(5, 6))
	var codes []string
	var beforeHandler int
	var longest time.Duration
	stopped := func(h *stopHost, why string) {
		t0 := time.Now()
		h.p.signal(syscall.SIGTERM)
		code := h.p.wait(2 * time.Minute)
		took := time.Since(t0)
		longest = max(longest, took)
		codes = append(codes, fmt.Sprintf("%s/%s:%d(%s)", h.name, why, code, took.Round(time.Millisecond)))
		switch {
		case code == -1 && why == "early":
			beforeHandler++ // SIGTERM before main installed its handler: the default action, not jetledger's
		case code != 0:
			t.Errorf("%s %s: exit %d after SIGTERM, want 0; its last lines:\n%s", h.name, why, code, tail(h.p.output()))
		}
	}
	for r := range rounds {
		h := hosts[r%2]
		stopped(h, "running")
		// Started again and SIGTERMed at once, or soon: its start cut at a
		// random point (the lease, the catch-up, the take-over's writes).
		for range 3 {
			p := launch(h)
			d := time.Duration(rng.IntN(1500)) * time.Millisecond
			select {
			case <-time.After(d): // the moment of the SIGTERM: fault injection
			case <-p.done:
			}
			stopped(h, "early")
		}
		launch(h)
		consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("round %d: %s owns or stands by", r, h.name), func() bool {
			out := h.p.output()
			return strings.Contains(out, `"role":"owner"`) || strings.Contains(out, "standing by")
		})
	}
	cancel()
	published := <-bg
	dest.SetDelay(0)
	db := func(h *stopHost) string { return filepath.Join(h.dir, "ledger.db") }
	var owner *stopHost
	consumertest.Eventually(t, 3*time.Minute, fmt.Sprintf("one host applies all %d and settles its rows", published), func() bool {
		for _, h := range hosts {
			n, _ := fileInt(db(h), `SELECT count(*) FROM processed_messages`)
			open, _ := fileInt(db(h), `SELECT count(*) FROM outbox WHERE status IN ('queued', 'sending')`)
			if n == published && open == 0 && strings.Contains(h.p.output(), `"role":"owner"`) {
				owner = h
				return true
			}
		}
		return false
	})
	for _, h := range hosts {
		stopped(h, "final")
	}
	file := db(owner)
	applied, _ := fileInt(file, `SELECT count(*) FROM applied`)
	distinct, _ := fileInt(file, `SELECT count(DISTINCT id) FROM applied`)
	rows, _ := fileInt(file, `SELECT count(*) FROM outbox`)
	sent, _ := fileInt(file, `SELECT count(*) FROM outbox WHERE status = 'sent'`)
	review, _ := fileInt(file, `SELECT count(*) FROM outbox WHERE status = 'review'`)
	var statuses []string
	if sdb := openLedgers(t, file)[0]; sdb != nil {
		if rs, err := sdb.Query(`SELECT status, count(*), coalesce(max(error), '') FROM outbox GROUP BY status`); err == nil {
			for rs.Next() {
				var st, e string
				var n int
				if rs.Scan(&st, &n, &e) == nil {
					statuses = append(statuses, fmt.Sprintf("%s=%d (%.120s)", st, n, e))
				}
			}
			rs.Close()
		}
	}
	t.Logf("outbox rows by status: %v", statuses)
	perKey := map[string]int{}
	for _, it := range dest.Items() {
		perKey[it.Key]++
	}
	var twice []string
	for k, n := range perKey {
		if n > 1 {
			twice = append(twice, fmt.Sprintf("%s×%d", k, n))
		}
	}
	var reasons []string
	for _, h := range hosts {
		for _, p := range h.all {
			for _, l := range strings.Split(p.output(), "\n") {
				if strings.Contains(l, "review") && !strings.Contains(l, `"applied"`) || strings.Contains(l, "could not be written back") {
					reasons = append(reasons, h.name+": "+l)
				}
			}
		}
	}
	t.Logf("%d rounds, %d messages; applied %d (%d distinct); rows %d, sent %d, review %d; items %d (%d keys); SIGTERMs: %v; before the handler: %d; longest stop %s",
		rounds, published, applied, distinct, rows, sent, review, len(dest.Items()), len(perKey), codes, beforeHandler, longest.Round(time.Millisecond))
	for _, l := range reasons {
		t.Logf("  %s", l)
	}
	if applied != published || distinct != published {
		t.Errorf("applied %d rows (%d distinct) for %d messages", applied, distinct, published)
	}
	if len(twice) > 0 {
		t.Errorf("items sent twice: %v", twice)
	}
	if review > 0 {
		t.Errorf("%d rows in review after graceful SIGTERMs only", review)
	}
	// fastPlan's claim lease is about the sink timeout + a batch's hold + a margin.
	if bound := 2*sinkTimeout + 5*time.Second; longest > bound {
		t.Errorf("a SIGTERM took %s to exit, over %s", longest, bound)
	}
}
