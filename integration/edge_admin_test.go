package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
	"github.com/jetledger/jetledger/fleet"
	"github.com/jetledger/jetledger/publisher"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Issue 43, end to end: an edge site behind a real hub with 5 effects in
// review (the destination answers 500) and a dead letter. Its need for a
// person shows in its /healthz (still 200), its gauges, its status (exit
// 3), its fleet record and the hub's fleet. From the hub, over the leaf
// link: micro's discovery finds the site's API, and the command line
// settles both; the edge's ledger holds each action with its record, and
// the attention goes everywhere. A site that does not answer is ErrNoRun
// naming it, within the time given.
func TestAnEdgeSitesAttentionIsSeenAndSettledFromTheHub(t *testing.T) {
	t.Parallel()
	h, _, pub := startHubWithOrders(t)
	if out, code := cli(t, "hub", "--nats", h.url(), "--domain", "site1"); code != 0 {
		t.Fatalf("jetledger hub: exit %d\n%s", code, out)
	}
	dest := webhooktest.NewDestination(t, false)
	dest.FailWith(http.StatusInternalServerError)
	w := worldIn(t, t.TempDir())
	port, metrics := freePort(t), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	run := start(t, nil, append([]string{"run", "--db", w.db, "--listen", "127.0.0.1:" + strconv.Itoa(port), "--metrics", metrics,
		"--hub-url", h.leafURL(), "--hub-stream", "ORDERS", "--hub-filter", "orders.site1.>", "--edge-domain", "site1",
		"--hub-status-interval", "1s", "--max-deliver", "1", "--stream", "ORDERS_EDGE", "--schema", w.schema, "--apply", balanceApply,
		"--log-format", "json"}, webhookArgs(dest, fastPlan...)...)...)
	publishAt(t, pub, "orders.site1.pay", makeEvents(randFor(t), pub, 5))
	if _, err := pub.Publish(t.Context(), publisher.Message{Subject: "orders.site1.pay", ID: "bad-1", Data: []byte(`{"account":"a","amount":null}`)}); err != nil {
		t.Fatal(err)
	}
	db := w.ledgerDB()
	consumertest.Eventually(t, 2*time.Minute, "5 effects in review and a dead letter at the edge", func() bool {
		return count(t, db, `SELECT count(*) FROM outbox WHERE status = 'review'`) == 5 && count(t, db, `SELECT count(*) FROM dead_letters`) == 1
	})

	// Seen at the edge: /healthz (200), the gauges, status (exit 3).
	consumertest.Eventually(t, time.Minute, "the edge's /healthz saying what needs a person", func() bool {
		out, code := cli(t, "health", "--url", "http://"+metrics+"/healthz", "--json")
		return code == 0 && strings.Contains(out, `"kind": "review"`) && strings.Contains(out, `"kind": "dead_letter"`)
	})
	if _, body := get(t, "http://"+metrics+"/metrics"); !strings.Contains(body, `jetledger_attention{kind="review"} 5`) || !strings.Contains(body, `jetledger_attention{kind="dead_letter"} 1`) {
		t.Fatalf("the edge's gauges:\n%s", grepLines(body, "attention"))
	}
	edgeURL := fmt.Sprintf("nats://127.0.0.1:%d", port)
	if out, code := cli(t, append([]string{"status", "--db", w.db, "--nats", edgeURL}, fastPlan...)...); code != 3 || !strings.Contains(out, "ATTENTION") {
		t.Fatalf("status at the edge: exit %d, want 3\n%s", code, out)
	}
	// Seen at the hub: status through the site's API (exit 3), the site's
	// fleet record, and fleet.
	if out, code := cli(t, "status", "--nats", h.url(), "--site", "site1"); code != 3 || !strings.Contains(out, "ATTENTION 5 outbox rows in review") {
		t.Fatalf("status --site at the hub: exit %d, want 3\n%s", code, out)
	}
	consumertest.Eventually(t, time.Minute, "fleet at the hub listing site1 as needing attention", func() bool {
		sites, _ := fleetList(t, h)
		return len(sites) == 1 && sites[0].State == fleet.StateAttention && sites[0].Attention
	})

	// Found from the hub through micro's discovery, then settled there.
	hub, err := nats.Connect(h.url())
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Close()
	var info micro.Info
	consumertest.Eventually(t, time.Minute, "the site's admin API found from the hub", func() bool {
		msg, err := hub.Request("$SRV.INFO."+admin.ServiceName, nil, 3*time.Second)
		return err == nil && json.Unmarshal(msg.Data, &info) == nil && info.Metadata["site"] == "site1"
	})
	if out, code := cli(t, "outbox", "resolve", "--nats", h.url(), "--site", "site1", "--status", "review", "--as", "failed",
		"--all", "--who", "ops@hub", "--note", "the provider has none"); code != 0 || !strings.Contains(out, "5 done, 0 skipped") {
		t.Fatalf("outbox resolve from the hub: exit %d\n%s", code, out)
	}
	dl := fmt.Sprint(count(t, db, `SELECT id FROM dead_letters`))
	if out, code := cli(t, "dlq", "discard", dl, "--nats", h.url(), "--site", "site1", "--who", "ops@hub", "--note", "a test payload"); code != 0 {
		t.Fatalf("dlq discard from the hub: exit %d\n%s", code, out)
	}
	if n := count(t, db, `SELECT count(*) FROM outbox WHERE status = 'failed'`); n != 5 {
		t.Fatalf("the edge's ledger holds %d rows failed, want 5", n)
	}
	if n := count(t, db, `SELECT count(*) FROM jetledger_audit WHERE who = 'ops@hub'`); n != 6 {
		t.Fatalf("the edge's ledger holds %d records of the actions, want 6", n)
	}
	if out, code := cli(t, "status", "--nats", h.url(), "--site", "site1"); code != 0 || strings.Contains(out, "ATTENTION") {
		t.Fatalf("status --site at the hub once settled: exit %d, want 0\n%s", code, out)
	}
	if out, code := cli(t, "status", "--nats", h.url(), "--site", "site9"); code != 1 || !strings.Contains(out, "site site9") {
		t.Fatalf("status --site of a site that does not answer: exit %d, want 1 naming it\n%s", code, out)
	}
	consumertest.Eventually(t, time.Minute, "fleet at the hub listing site1 ok", func() bool {
		sites, _ := fleetList(t, h)
		return len(sites) == 1 && sites[0].State == fleet.StateOK
	})
	gone := admin.Address{Site: "site9", Stream: info.Metadata["stream"], Durable: info.Metadata["durable"]}
	if err := callAdmin(hub, gone, "status", nil, nil, 3*time.Second); !errors.Is(err, admin.ErrNoRun) || !strings.Contains(err.Error(), "site9") {
		t.Fatalf("a site that does not answer: %v, want ErrNoRun naming site9", err)
	}
	run.signal(syscall.SIGTERM)
	if code := run.wait(time.Minute); code != 0 {
		t.Fatalf("run exited %d", code)
	}
}

// fleetList is `jetledger fleet --json` at hub h.
func fleetList(t *testing.T, h *hub) ([]fleet.Status, int) {
	out, code := cli(t, "fleet", "--nats", h.url(), "--json")
	var sites []fleet.Status
	if json.NewDecoder(strings.NewReader(out)).Decode(&sites) != nil {
		return nil, code
	}
	return sites, code
}
