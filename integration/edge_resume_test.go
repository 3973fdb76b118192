package integration

import (
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats.go/jetstream"
)

// edgeSite is one site's run against a hub process: its ledger, its
// embedded server's client port, and how it was started.
type edgeSite struct {
	t      *testing.T
	w      *world
	domain string
	port   int
	args   []string
	run    *proc
	db     *sql.DB // the ledger, opened on first use
}

func (s *edgeSite) ledger() *sql.DB {
	if s.db == nil {
		s.db = s.w.ledgerDB()
	}
	return s.db
}

// newSite makes a site named domain of hub h (its share orders.<domain>.>,
// its effects to OUT, sourced by the hub's EFFECTS through `jetledger hub`),
// started with extra flags.
func newSite(t *testing.T, h *hub, domain string, extra ...string) *edgeSite {
	t.Helper()
	return newSiteVia(t, h, h.leafURL(), domain, extra...)
}

// newSiteVia is newSite with the leaf link to leafURL (a proxy to the hub).
func newSiteVia(t *testing.T, h *hub, leafURL, domain string, extra ...string) *edgeSite {
	t.Helper()
	if out, code := cli(t, "hub", "--nats", h.url(), "--domain", domain, "--effects-stream", "OUT"); code != 0 {
		t.Fatalf("jetledger hub: exit %d\n%s", code, out)
	}
	s := &edgeSite{t: t, w: worldIn(t, t.TempDir()), domain: domain, port: freePort(t)}
	s.args = append([]string{"run", "--db", s.w.db, "--listen", "127.0.0.1:" + strconv.Itoa(s.port),
		"--hub-url", leafURL, "--hub-stream", "ORDERS", "--hub-filter", "orders." + domain + ".>", "--edge-domain", domain,
		"--stream", "ORDERS_EDGE", "--duplicate-window", "2s", "--sync-interval", "2m",
		"--effects-subject", "effects." + domain, "--effects-stream", "OUT",
		"--schema", s.w.schema, "--apply", balanceApply, "--log-format", "json"}, append(fastPlan, extra...)...)
	s.run = start(t, nil, s.args...)
	return s
}

func (s *edgeSite) applied(id string) bool {
	return count(s.t, s.ledger(), `SELECT count(*) FROM processed_messages WHERE message_id = ?`, id) == 1
}

// atHub reports whether the hub's EFFECTS holds the effect of the event id
// (its outbox row's id is the message id there).
func atHub(t *testing.T, hjs jetstream.JetStream, s *edgeSite, id string) bool {
	var row string
	if s.ledger().QueryRow(`SELECT id FROM outbox WHERE message_id = ?`, id).Scan(&row) != nil {
		return false
	}
	st, err := hjs.Stream(t.Context(), "EFFECTS")
	if err != nil {
		return false
	}
	info, err := st.Info(t.Context())
	if err != nil {
		return false
	}
	for seq := info.State.LastSeq; seq >= info.State.FirstSeq && seq > 0; seq-- {
		m, err := st.GetMsg(t.Context(), seq)
		if err == nil && m.Header.Get(jetstream.MsgIDHeader) == row {
			return true
		}
	}
	return false
}

// After the hub comes back from a SIGKILL and an outage longer than
// AckWait and the edge's duplicate window, a new event published at the
// hub is applied at the edge within seconds, and its effect is in the
// hub's effects stream seconds later: durable sourcing in both directions
// (with ephemeral sources this took 33-37 s and 40 s). The hub's effects
// stream is made before the site's first connection, which with an
// ephemeral source delayed the first effect by 40 s as well.
func TestEdgeResumesWithinSecondsAfterTheHubReturns(t *testing.T) {
	h, hjs, pub := startHubWithOrders(t)
	rng := randFor(t)
	first := makeEvents(rng, pub, 1)
	publishAt(t, pub, "orders.site1.pay", first)
	if out, code := cli(t, "hub", "--nats", h.url(), "--domain", "site1", "--effects-stream", "OUT"); code != 0 {
		t.Fatalf("jetledger hub: exit %d\n%s", code, out)
	}
	// The site comes up later than the hub's stream is made: the hub's
	// first request for its effects is lost (the fault, not a wait).
	time.Sleep(2 * time.Second)
	started := time.Now()
	s := newSite(t, h, "site1") // runs jetledger hub again: nothing to do
	consumertest.Eventually(t, time.Minute, "the first event applied", func() bool { return s.applied(first[0].ID) })
	consumertest.Eventually(t, time.Minute, "the first effect at the hub", func() bool { return atHub(t, hjs, s, first[0].ID) })
	firstEffect := time.Since(started)
	t.Logf("first start, EFFECTS made before the leaf connected: an event waiting at the hub applied and its effect at the hub %s after jetledger hub and run started", firstEffect.Round(time.Millisecond))
	var figures []string
	// Down past AckWait (1.7 s) and the duplicate window (2 s), for times
	// that meet the sourcing server's 10 s health check at other points
	// (ephemeral sourcing took 7 s, 2-12 s and 35 s after these): the
	// outage is the fault under test, not a wait for an event.
	for round, down := range []time.Duration{3 * time.Second, 8 * time.Second, 15 * time.Second} {
		h.p.kill()
		time.Sleep(down)
		h.start()
		back := time.Now()
		ev := makeEvents(rng, pub, 1)
		publishAt(t, pub, "orders.site1.pay", ev)
		published := time.Now()
		consumertest.Eventually(t, time.Minute, "the new event applied at the edge", func() bool { return s.applied(ev[0].ID) })
		applied := time.Now()
		consumertest.Eventually(t, time.Minute, "its effect at the hub", func() bool { return atHub(t, hjs, s, ev[0].ID) })
		effect := time.Now()
		figures = append(figures, fmt.Sprintf("round %d, down %s: published %s after the hub's restart, applied %s after the publish, effect at the hub %s after that",
			round+1, down, published.Sub(back).Round(time.Millisecond), applied.Sub(published).Round(time.Millisecond), effect.Sub(applied).Round(time.Millisecond)))
		t.Log(figures[len(figures)-1])
		// The targets are 5 s each. A source's request that went out while
		// the hub was down is waited for 5 s (the effects' always is: the
		// hub sends it before any leaf is back), so a loaded machine runs
		// a little over (5.6 s seen beside the other tests); 8 s leaves it
		// room and ephemeral sourcing, 12-40 s, still fails it.
		if d := applied.Sub(published); d > 8*time.Second {
			t.Errorf("round %d: applied %s after the publish; want about 5 s at most", round+1, d)
		}
		if d := effect.Sub(applied); d > 8*time.Second {
			t.Errorf("round %d: effect at the hub %s after it was applied; want about 5 s", round+1, d)
		}
	}
	if firstEffect > 15*time.Second {
		t.Errorf("the first effect reached the hub %s after the site started; want seconds", firstEffect)
	}
	s.run.signal(syscall.SIGTERM)
	if code := s.run.wait(time.Minute); code != 0 {
		t.Fatalf("run exited %d", code)
	}
	checkEffectsAtHub(t, hjs, s.ledger())
	if !strings.Contains(s.run.output(), "the link to the hub is down") || !strings.Contains(s.run.output(), "the link to the hub is up") {
		t.Errorf("run did not log the link's changes:\n%s", s.run.output())
	}
}
