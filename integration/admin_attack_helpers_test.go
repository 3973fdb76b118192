package integration

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
	"github.com/nats-io/nats.go"
)

// reviewWorld is a single run (no partitions) whose n effects are all in
// review (the destination answers 500): its world, run, ledger and the
// run's admin address.
func reviewWorld(t *testing.T, n int) (*world, *proc, *sql.DB, admin.Address) {
	t.Helper()
	w := newWorld(t, time.Minute)
	dest := webhooktest.NewDestination(t, false)
	dest.FailWith(http.StatusInternalServerError)
	w.publish(makeEvents(randFor(t), w.pub, n))
	run := w.runConsumer(nil, webhookArgs(dest)...)
	db := w.ledgerDB()
	consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("%d rows in review", n), func() bool {
		return count(t, db, `SELECT count(*) FROM outbox WHERE status = 'review'`) == n
	})
	return w, run, db, admin.Address{Stream: stream, Durable: "jetledger"}
}

// auditInvariants checks one ledger after an action taken as who (a LIKE
// pattern) on rows
// ending in status to: every row has at most one record of it, and a row
// has one exactly when it is in status to. It returns the records.
func auditInvariants(t *testing.T, db *sql.DB, who, to string) int {
	t.Helper()
	if n := count(t, db, `SELECT count(*) FROM (SELECT target FROM jetledger_audit WHERE who LIKE ? GROUP BY target HAVING count(*) > 1)`, who); n != 0 {
		t.Errorf("%d rows with more than one record of %s's action", n, who)
	}
	if n := count(t, db, `SELECT count(*) FROM jetledger_audit a LEFT JOIN outbox o ON o.id = a.target WHERE a.who LIKE ? AND coalesce(o.status, '') != ?`, who, to); n != 0 {
		t.Errorf("%d records of %s's action on rows that are not %s", n, who, to)
	}
	if n := count(t, db, `SELECT count(*) FROM outbox o WHERE o.status = ? AND NOT EXISTS (SELECT 1 FROM jetledger_audit a WHERE a.target = o.id AND a.who LIKE ?)`, to, who); n != 0 {
		t.Errorf("%d rows %s with no record of %s's action", n, to, who)
	}
	return count(t, db, `SELECT count(*) FROM jetledger_audit WHERE who LIKE ?`, who)
}

// found lists the admin APIs answering through nc, as "durable/role" →
// their micro ids.
func found(t *testing.T, nc *nats.Conn) map[string][]string {
	t.Helper()
	fs, err := admin.Discover(context.Background(), nc, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, f := range fs {
		k := f.Durable + "/" + f.Role
		out[k] = append(out[k], f.ID)
	}
	return out
}

// exactlyOneEach says whether found holds exactly one API under each of
// want and none else.
func exactlyOneEach(got map[string][]string, want ...string) bool {
	if len(got) != len(want) {
		return false
	}
	for _, k := range want {
		if len(got[k]) != 1 {
			return false
		}
	}
	return true
}

// gateway stands in front of a webhooktest.Destination and can hold the
// DELETEs that reach it: before the item is deleted (the destination
// never sees it unless it is let through while its client still waits),
// or after it is deleted, with no answer ever (the client sees nothing).
type gateway struct {
	dest    *webhooktest.Destination
	srv     *httptest.Server
	base    string
	mu      sync.Mutex
	mode    string // "", "before", "after"
	gate    chan struct{}
	arrived chan string
}

func newGateway(t *testing.T, dest *webhooktest.Destination) *gateway {
	g := &gateway{dest: dest, base: strings.TrimSuffix(dest.URL(), "/items"), arrived: make(chan string, 100)}
	g.srv = httptest.NewServer(http.HandlerFunc(g.serve))
	t.Cleanup(func() {
		g.setMode("")
		g.srv.CloseClientConnections()
		g.srv.Close()
	})
	return g
}

func (g *gateway) args(extra ...string) []string {
	return append([]string{"--webhook", g.srv.URL + "/items", "--webhook-delete-url", g.srv.URL + "/items/{external_id}",
		"--webhook-lookup-url", g.srv.URL + "/by-key/{key}", "--webhook-timeout", "10s"}, extra...)
}

// setMode holds DELETEs as mode says ("" lets them through), releasing
// any held.
func (g *gateway) setMode(mode string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gate != nil {
		close(g.gate)
	}
	g.mode, g.gate = mode, make(chan struct{})
}

func (g *gateway) forward(w http.ResponseWriter, r *http.Request) int {
	body, _ := io.ReadAll(r.Body)
	req, _ := http.NewRequestWithContext(context.Background(), r.Method, g.base+r.URL.RequestURI(), strings.NewReader(string(body)))
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if w != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
		}
		return 0
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if w != nil {
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		w.Write(out) //nolint:errcheck // test server
	}
	return resp.StatusCode
}

func (g *gateway) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodDelete {
		g.forward(w, r)
		return
	}
	g.mu.Lock()
	mode, gate := g.mode, g.gate
	g.mu.Unlock()
	switch mode {
	case "before":
		g.arrived <- r.URL.Path
		select {
		case <-gate:
		case <-r.Context().Done():
			return // its client is gone: nothing deleted
		}
	case "after":
		g.forward(nil, r) // deleted at the destination
		g.arrived <- r.URL.Path
		select {
		case <-gate:
		case <-r.Context().Done():
		}
		return // never answered
	}
	g.forward(w, r)
}

// atDestination says whether the destination holds an item under key.
func atDestination(dest *webhooktest.Destination, key string) bool {
	for _, it := range dest.Items() {
		if it.Key == key {
			return true
		}
	}
	return false
}

// noCancelledItemThere: no row of db says cancelled while its item is
// still at the destination.
func noCancelledItemThere(t *testing.T, db *sql.DB, dest *webhooktest.Destination, what string) {
	t.Helper()
	for _, r := range outboxRows(t, db) {
		if r.Status == "cancelled" && atDestination(dest, r.ID) {
			t.Errorf("%s: row %s is cancelled while its item is still at the destination", what, r.ID)
		}
	}
}
