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
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Issue 43: an edge site behind a real hub, its effects in review (the
// destination answers 500). From the hub, over the leaf link: micro's
// discovery finds the site's admin API; an operator's dry run counts the
// rows and the action resolves them; the edge's ledger holds each row
// failed, with its record. A site that does not answer is ErrNoRun naming
// it, within the time given.
func TestAnOperatorAtTheHubSettlesAnEdgesRows(t *testing.T) {
	t.Parallel()
	h, _, pub := startHubWithOrders(t)
	dest := webhooktest.NewDestination(t, false)
	dest.FailWith(http.StatusInternalServerError)
	w := worldIn(t, t.TempDir())
	run := start(t, nil, append([]string{"run", "--db", w.db, "--listen", "127.0.0.1:" + strconv.Itoa(freePort(t)),
		"--hub-url", h.leafURL(), "--hub-stream", "ORDERS", "--hub-filter", "orders.site1.>", "--edge-domain", "site1",
		"--stream", "ORDERS_EDGE", "--schema", w.schema, "--apply", balanceApply, "--log-format", "json"}, webhookArgs(dest, fastPlan...)...)...)
	evs := makeEvents(randFor(t), pub, 5)
	publishAt(t, pub, "orders.site1.pay", evs)
	db := w.ledgerDB()
	consumertest.Eventually(t, 2*time.Minute, "5 effects in review at the edge", func() bool {
		return count(t, db, `SELECT count(*) FROM outbox WHERE status = 'review'`) == 5
	})

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
	addr := admin.Address{Site: info.Metadata["site"], Stream: info.Metadata["stream"], Durable: info.Metadata["durable"]}
	var st admin.Status
	if err := callAdmin(hub, addr, "status", nil, &st, 10*time.Second); err != nil || len(st.Attention) != 1 || st.Attention[0].Count != 5 {
		t.Fatalf("the site's status from the hub: %v %+v", err, st)
	}
	dry, done, err := resolveAll(hub, addr, "ops@hub")
	if err != nil || dry.Matched != 5 || len(done.Done) != 5 {
		t.Fatalf("the resolve from the hub: %v %+v %+v", err, dry, done)
	}
	if n := count(t, db, `SELECT count(*) FROM outbox WHERE status = 'failed'`); n != 5 {
		t.Fatalf("the edge's ledger holds %d rows failed, want 5", n)
	}
	if n := count(t, db, `SELECT count(*) FROM jetledger_audit WHERE who = 'ops@hub'`); n != 5 {
		t.Fatalf("the edge's ledger holds %d records of the action, want 5", n)
	}
	gone := addr
	gone.Site = "site9"
	err = callAdmin(hub, gone, "status", nil, &st, 3*time.Second)
	if !errors.Is(err, admin.ErrNoRun) || !strings.Contains(err.Error(), "site9") {
		t.Fatalf("a site that does not answer: %v, want ErrNoRun naming site9", err)
	}
	t.Logf("found %s from the hub; %d rows resolved there; a silent site: %v", fmt.Sprint(addr), len(done.Done), err)
	run.signal(syscall.SIGTERM)
	if code := run.wait(time.Minute); code != 0 {
		t.Fatalf("run exited %d", code)
	}
}
