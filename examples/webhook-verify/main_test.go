package main

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"

	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/ledger"
)

// jetledger's webhook sink is accepted with the secret and refused
// without it; a captured request replayed under another key is refused.
func TestHandlerVerifiesTheSink(t *testing.T) {
	t.Parallel()
	var captured http.Header
	h := handler([]string{"s3cret"})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		captured = r.Header.Clone()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	item := ledger.OutboxItem{ID: "o1", MessageID: "m1", Payload: []byte(`{"a":1}`)}
	for _, tt := range []struct {
		secret  string
		wantErr error
	}{{secret: "s3cret"}, {secret: "guess", wantErr: outbox.ErrRejected}} {
		sink, err := webhook.New(webhook.Config{URL: srv.URL, Secret: tt.secret})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sink.Send(t.Context(), item); !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
			t.Fatalf("secret %q: send %v, want %v", tt.secret, err, tt.wantErr)
		}
	}
	sink, err := webhook.New(webhook.Config{URL: srv.URL, Secret: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Send(t.Context(), item); err != nil {
		t.Fatal(err)
	}
	captured.Set(webhook.HeaderIdempotencyKey, "o2")
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, bytes.NewReader(item.Payload))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = captured
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("replayed under another key: status %d, want 401", resp.StatusCode)
	}
}

// The receiver links neither SQLite nor NATS nor any of jetledger but
// package signature: what it imports, not what its test does.
func TestLinksNoSQLiteNorNATS(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	allowed := map[string]bool{
		"github.com/jetledger/jetledger/examples/webhook-verify":           true,
		"github.com/jetledger/jetledger/consumer/outbox/webhook/signature": true,
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list -deps listed nothing")
	}
	for _, dep := range deps {
		if strings.Contains(dep, "modernc.org/sqlite") || strings.Contains(dep, "nats-io") || !allowed[dep] {
			t.Errorf("the receiver links %s; want the standard library and package signature only", dep)
		}
	}
}
