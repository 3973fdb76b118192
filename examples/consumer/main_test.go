package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/signature"
	"github.com/jetledger/jetledger/node"
	_ "modernc.org/sqlite"
)

var quiet = slog.New(slog.DiscardHandler)

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

// hooks is a destination that counts the distinct idempotency keys of
// requests whose signature verifies (package signature), and the requests
// refused.
type hooks struct {
	secret string
	mu     sync.Mutex
	keys   map[string]string // key → body
	bad    int
}

func (h *hooks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	if signature.Verify([]string{h.secret}, r.Header, body, 0) != nil {
		h.bad++
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	h.keys[r.Header.Get(webhook.HeaderIdempotencyKey)] = string(body)
	fmt.Fprintf(w, `{"id":%q}`, "x-"+r.Header.Get(webhook.HeaderIdempotencyKey))
}

func (h *hooks) count() (int, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.keys), h.bad
}

// The consumer example creates its stream, applies N published orders to
// its orders table, and sends N signed webhooks, one per order.
func TestConsumerAppliesAndSendsWebhooks(t *testing.T) {
	t.Parallel()
	const n = 20
	dir := t.TempDir()
	nd, err := node.Start(t.Context(), node.Config{StoreDir: filepath.Join(dir, "nats"), Listen: "127.0.0.1:0", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nd.Close)
	js, err := nd.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	dest := &hooks{secret: "s3cret", keys: map[string]string{}}
	srv := httptest.NewServer(dest)
	t.Cleanup(srv.Close)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	db := filepath.Join(dir, "app.db")
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, Config{NATSURL: nd.ClientURL(), DB: db, HookURL: srv.URL, Secret: "s3cret", Logger: quiet})
	}()

	eventually(t, 20*time.Second, "the example to create ORDERS", func() bool {
		_, err := js.Stream(ctx, "ORDERS")
		return err == nil
	})
	orders := make([]order, n)
	for i := range orders {
		orders[i] = order{ID: fmt.Sprint("o", i), Total: i * 10}
	}
	if err := publishOrders(ctx, js, orders); err != nil {
		t.Fatal(err)
	}

	eventually(t, 30*time.Second, fmt.Sprintf("%d signed webhooks", n), func() bool {
		got, _ := dest.count()
		return got >= n
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
	got, bad := dest.count()
	if got != n || bad != 0 {
		t.Fatalf("%d distinct webhooks and %d refused, want %d and 0", got, bad, n)
	}
	for _, body := range dest.keys {
		var o order
		if err := json.Unmarshal([]byte(body), &o); err != nil || !strings.HasPrefix(o.ID, "o") {
			t.Fatalf("webhook body %q is not an order: %v", body, err)
		}
	}
	sdb, err := sql.Open("sqlite", db+"?_pragma=busy_timeout(10000)&_pragma=query_only(ON)")
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	var rows, total int
	if err := sdb.QueryRow(`SELECT count(*), coalesce(sum(total), 0) FROM orders`).Scan(&rows, &total); err != nil {
		t.Fatal(err)
	}
	if rows != n || total != 10*n*(n-1)/2 {
		t.Fatalf("orders: %d rows totalling %d, want %d totalling %d", rows, total, n, 10*n*(n-1)/2)
	}
}

// With NATS down the example returns an error saying so; it does not panic.
func TestConsumerWithNATSDownReturnsAnError(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "nats://" + l.Addr().String()
	l.Close() // nothing listens there now
	err = run(t.Context(), Config{NATSURL: url, DB: filepath.Join(t.TempDir(), "app.db"), HookURL: "http://127.0.0.1:1/", Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), "connect to NATS") {
		t.Fatalf("run with NATS down: %v, want a connect error", err)
	}
}
