package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/publisher"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	_ "modernc.org/sqlite"
)

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond) // a poll interval, not a synchronisation
	}
}

// hub is a nats-server with JetStream in domain "hub" and a leaf node port.
func hub(t *testing.T) (*server.Server, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0") // a free port for the leaf nodes
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, JetStreamDomain: "hub",
		ServerName: "hub", StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
		LeafNode: server.LeafNodeOpts{Host: "127.0.0.1", Port: port}})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("hub not ready")
	}
	return s, fmt.Sprintf("nats-leaf://127.0.0.1:%d", port)
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The edge example joins the hub as a leaf, applies N orders published to
// it through the SQL handler, publishes N effects through the outbox's NATS
// sink (which the hub reads by the edge's domain), and serves its metrics
// and health.
func TestEdgeAppliesOrdersAndPublishesEffects(t *testing.T) {
	t.Parallel()
	const n = 10
	h, leafURL := hub(t)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	addr, done := startEdge(ctx, t, Config{Hub: leafURL, Domain: "site1", Dir: dir, Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})

	nc, err := nats.Connect(addr[0])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := publisher.New(js, publisher.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := pub.Publish(ctx, publisher.Message{Subject: "orders.new", ExpectStream: "ORDERS", Data: fmt.Appendf(nil, `{"n":%d}`, i)}); err != nil {
			t.Fatal(err)
		}
	}

	// The hub reaches the edge's effects stream through the leaf link, by domain.
	hc, err := nats.Connect(h.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	site, err := jetstream.NewWithDomain(hc, "site1")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, fmt.Sprintf("%d effects seen from the hub", n), func() bool {
		s, err := site.Stream(ctx, "EFFECTS")
		if err != nil {
			return false
		}
		info, err := s.Info(ctx)
		return err == nil && info.State.Msgs == n
	})
	eventually(t, 10*time.Second, "healthy", func() bool {
		code, _ := get(t, "http://"+addr[1]+"/healthz")
		return code == http.StatusOK
	})
	code, body := get(t, "http://"+addr[1]+"/metrics")
	if code != http.StatusOK || !strings.Contains(body, "jetledger_") {
		t.Fatalf("/metrics: %d %.300s", code, body)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
	if rows := countOrders(t, filepath.Join(dir, "edge.db")); rows != n {
		t.Fatalf("%d orders applied, want %d", rows, n)
	}
}

// startEdge runs the example until ctx ends, and returns its NATS URL and
// HTTP address once it serves, and the channel of run's result.
func startEdge(ctx context.Context, t *testing.T, cfg Config) ([2]string, chan error) {
	t.Helper()
	ready := make(chan [2]string, 1)
	done := make(chan error, 1)
	cfg.Ready = func(natsURL, httpAddr string) { ready <- [2]string{natsURL, httpAddr} }
	go func() { done <- run(ctx, cfg) }()
	select {
	case addr := <-ready:
		return addr, done
	case err := <-done:
		t.Fatalf("run: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the edge did not start")
	}
	return [2]string{}, nil
}

// countOrders counts the orders the SQL handler applied.
func countOrders(t *testing.T, file string) int {
	t.Helper()
	db, err := sql.Open("sqlite", file+"?_pragma=busy_timeout(10000)&_pragma=query_only(ON)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows int
	if err := db.QueryRow(`SELECT count(*) FROM orders WHERE body LIKE '{"n":%'`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	return rows
}
