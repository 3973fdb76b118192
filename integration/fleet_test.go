package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/fleet"
	"github.com/jetledger/jetledger/publisher"
)

// A hub and three edge runs: one healthy, one with a dead letter, one cut
// off from the hub. jetledger fleet at the hub lists them worst first (the
// cut-off one offline, the one with the dead letter needing attention, the
// healthy one ok) and exits 1. At the cut-off edge, /healthz says the hub
// link is down and stays healthy (degraded), the metrics say the link is
// down, and status says it in its hub line.
func TestFleetListsSitesWorstFirst(t *testing.T) {
	h, _, pub := startHubWithOrders(t)
	var cut atomic.Bool
	proxy := consumertest.NewProxy(t, fmt.Sprintf("127.0.0.1:%d", h.leafPort), consumertest.ProxyHooks{
		Before: func(bool, int64, []byte) consumertest.Verdict {
			if cut.Load() {
				return consumertest.ResetAll
			}
			return consumertest.Pass
		}})
	interval := []string{"--hub-status-interval", "1s"}
	ok := newSite(t, h, "ok1", interval...)
	bad := newSite(t, h, "bad2", append(interval, "--max-deliver", "1")...)
	metrics := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	off := newSiteVia(t, h, "nats-leaf://"+proxy.Addr(), "off3", append(interval, "--metrics", metrics)...)
	rng := randFor(t)
	for _, s := range []*edgeSite{ok, bad, off} {
		evs := makeEvents(rng, pub, 3)
		publishAt(t, pub, "orders."+s.domain+".pay", evs)
		consumertest.Eventually(t, time.Minute, s.domain+" applies its events", func() bool { return s.applied(evs[2].ID) })
	}
	if _, err := pub.Publish(t.Context(), publisher.Message{Subject: "orders.bad2.pay", ID: "bad-1", Data: []byte(`{"account":"a","amount":null}`)}); err != nil {
		t.Fatal(err)
	}
	consumertest.Eventually(t, time.Minute, "bad2's dead letter", func() bool { return count(t, bad.ledger(), `SELECT count(*) FROM dead_letters`) == 1 })
	list := func() ([]fleet.Status, string, int) {
		out, code := cli(t, "fleet", "--nats", h.url(), "--stale", "4s", "--json")
		var sites []fleet.Status // the JSON, then the exit's reason on stderr
		if err := json.NewDecoder(strings.NewReader(out)).Decode(&sites); err != nil {
			return nil, out, code
		}
		return sites, out, code
	}
	consumertest.Eventually(t, time.Minute, "three sites listed, bad2 with its dead letter", func() bool {
		sites, _, _ := list()
		return len(sites) == 3 && sites[0].Site == "bad2" && sites[0].DeadLetters == 1
	})
	cut.Store(true)
	proxy.Reset()
	consumertest.Eventually(t, time.Minute, "off3 listed offline", func() bool {
		sites, _, _ := list()
		return len(sites) == 3 && sites[0].Site == "off3" && sites[0].State == fleet.StateOffline
	})
	sites, out, code := list()
	if code != 1 {
		t.Errorf("fleet exited %d with a site offline and one with a dead letter; want 1\n%s", code, out)
	}
	want := []struct{ site, state string }{{"off3", fleet.StateOffline}, {"bad2", fleet.StateAttention}, {"ok1", fleet.StateOK}}
	for i, w := range want {
		if sites[i].Site != w.site || sites[i].State != w.state {
			t.Errorf("site %d: %s %s; want %s %s (worst first)\n%s", i, sites[i].Site, sites[i].State, w.site, w.state, out)
		}
	}
	if ok := sites[2]; ok.AppliedSeq != 3 || ok.Pending != 0 || !ok.Link.Up || ok.Version == "" || ok.LedgerFree <= 0 {
		t.Errorf("the healthy site's record: %+v", ok)
	}
	text, _ := cli(t, "fleet", "--nats", h.url(), "--stale", "4s")
	if !strings.Contains(text, "1 dead letters") || !strings.Contains(text, "no record for") || strings.Index(text, "off3") > strings.Index(text, "ok1") {
		t.Errorf("fleet's table:\n%s", text)
	}
	// The cut-off edge itself: degraded, not unhealthy; the link metric 0;
	// status's hub line says it.
	consumertest.Eventually(t, 30*time.Second, "off3's /healthz says the hub link is down", func() bool {
		out, code := cli(t, "health", "--url", "http://"+metrics+"/healthz", "--json")
		return code == 0 && strings.Contains(out, `"hub": "link_down"`) && strings.Contains(out, `"degraded": true`)
	})
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "jetledger_hub_link_up 0") || !strings.Contains(string(body), "jetledger_effects_not_at_hub") {
		t.Errorf("off3's metrics lack the link's:\n%s", grepLines(string(body), "hub"))
	}
	consumertest.Eventually(t, 30*time.Second, "status at off3 says the link is down", func() bool {
		out, _ := cli(t, "status", "--nats", fmt.Sprintf("nats://127.0.0.1:%d", off.port), "--db", off.w.db, "--effects-stream", "OUT")
		return strings.Contains(out, "link down or idle")
	})
	out, _ = cli(t, "status", "--nats", fmt.Sprintf("nats://127.0.0.1:%d", ok.port), "--db", ok.w.db, "--effects-stream", "OUT")
	if !strings.Contains(out, "hub") || !strings.Contains(out, "link up") || !strings.Contains(out, "0 effects not at the hub") {
		t.Errorf("status at the healthy site:\n%s", out)
	}
	if out, code := cli(t, "hub", "--nats", h.url(), "--domain", "ok1", "--effects-stream", "OUT"); code != 0 || !strings.Contains(out, "nothing to do") {
		t.Errorf("jetledger hub for a site set up already: exit %d, want 0 and nothing done\n%s", code, out)
	}
	if !strings.Contains(off.run.output(), "the link to the hub is down") {
		t.Errorf("off3 did not log its link going down:\n%s", off.run.output())
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
