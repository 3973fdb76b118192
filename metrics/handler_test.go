package metrics_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/metrics"
)

// get is the status and body of url.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// Serve answers /metrics with the collectors and /healthz with the handler
// given, until its ctx ends; then it returns nil and the port is closed.
func TestServeUntilCancelled(t *testing.T) {
	t.Parallel()
	col, err := metrics.New(metrics.Config{Consumer: counts{}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	healthz := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "fine") })
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- metrics.Serve(ctx, ln, healthz, col) }()
	base := "http://" + ln.Addr().String()
	if code, body := get(t, base+"/metrics"); code != http.StatusOK || !strings.Contains(body, "jetledger_messages_applied_total 3") {
		t.Errorf("/metrics: %d %.300s", code, body)
	}
	if code, body := get(t, base+"/healthz"); code != http.StatusOK || body != "fine" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve = %v after cancel, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its ctx ended")
	}
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Error("the listener is still open after Serve returned")
	}
}
