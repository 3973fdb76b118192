package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/signature"
	"github.com/jetledger/jetledger/ledger"
)

// start runs the example on a free port and returns its URL and the items
// it applied.
func start(t *testing.T, secrets ...string) (string, func() map[string]int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	applied := map[string]int{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, Config{Secrets: secrets, Listener: ln, Logger: slog.New(slog.DiscardHandler),
			Received: func(key string, _ []byte) { mu.Lock(); applied[key]++; mu.Unlock() }})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	return "http://" + ln.Addr().String() + "/hooks", func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return map[string]int{"keys": len(applied), "o1": applied["o1"], "o2": applied["o2"]}
	}
}

// jetledger's own webhook sink is accepted, and an item sent again under
// the same Idempotency-Key is applied once and answered with the same id.
func TestReceiverVerifiesAndDedupes(t *testing.T) {
	t.Parallel()
	url, applied := start(t, "s3cret")
	sink, err := webhook.New(webhook.Config{URL: url, Secret: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	item := ledger.OutboxItem{ID: "o1", MessageID: "m1", Sink: "webhook", Payload: []byte(`{"id":"a"}`)}
	first, err := sink.Send(t.Context(), item)
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	again, err := sink.Send(t.Context(), item)
	if err != nil || again != first || first == "" {
		t.Fatalf("resend answered %q, %v; want the first answer %q", again, err, first)
	}
	if _, err := sink.Send(t.Context(), ledger.OutboxItem{ID: "o2", MessageID: "m2", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if got := applied(); got["keys"] != 2 || got["o1"] != 1 || got["o2"] != 1 {
		t.Fatalf("applied %v, want o1 and o2 once each", got)
	}
}

// A wrong secret, a missing signature, a stale timestamp, a v1-only
// signature and a captured request replayed under another Idempotency-Key
// are refused with 401, which the sink takes as a rejection (no retry), and
// nothing is applied.
func TestReceiverRefusesBadSignatures(t *testing.T) {
	t.Parallel()
	url, applied := start(t, "s3cret")
	wrong, err := webhook.New(webhook.Config{URL: url, Secret: "guess"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = wrong.Send(t.Context(), ledger.OutboxItem{ID: "o1", Payload: []byte(`{}`)})
	if !errors.Is(err, outbox.ErrRejected) {
		t.Fatalf("wrong secret: %v, want outbox.ErrRejected", err)
	}
	captured := capture(t, webhook.Config{Secret: "s3cret"}, ledger.OutboxItem{ID: "o1", MessageID: "m1", Payload: []byte(`{"id":"a"}`)})
	body := []byte(`{"id":"a"}`)
	stale := signature.Timestamp(time.Now().Add(-time.Hour))
	for name, h := range map[string]http.Header{
		"unsigned": {webhook.HeaderIdempotencyKey: {"o2"}},
		"stale": {webhook.HeaderIdempotencyKey: {"o2"}, webhook.HeaderTimestamp: {stale},
			webhook.HeaderSignature: {signature.Sign([]string{"s3cret"}, stale, "o2", "", body)}},
		"v1 only": {webhook.HeaderIdempotencyKey: {"o2"}, webhook.HeaderTimestamp: {captured.Get(webhook.HeaderTimestamp)},
			webhook.HeaderSignature: {signature.SignV1([]string{"s3cret"}, captured.Get(webhook.HeaderTimestamp), body)}},
		"replayed under another key": func() http.Header {
			h := captured.Clone()
			h.Set(webhook.HeaderIdempotencyKey, "o2") // the message id kept: the key alone is signed
			return h
		}(),
	} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = h
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s: status %d, want 401", name, resp.StatusCode)
		}
	}
	if got := applied(); got["keys"] != 0 {
		t.Fatalf("applied %v after refused requests, want none", got)
	}
}

// capture is the headers of the request a sink with cfg sends for it.
func capture(t *testing.T, cfg webhook.Config, it ledger.OutboxItem) http.Header {
	t.Helper()
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	}))
	t.Cleanup(srv.Close)
	cfg.URL = srv.URL
	sink, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Send(t.Context(), it); err != nil {
		t.Fatal(err)
	}
	return <-got
}

// While the sender rotates, it signs with the old and the new secret: a
// receiver holding only the new one, or only the old one, accepts.
func TestReceiverAcceptsARotatingSender(t *testing.T) {
	t.Parallel()
	for _, secrets := range [][]string{{"new"}, {"old"}, {"new", "old"}} {
		url, applied := start(t, secrets...)
		sink, err := webhook.New(webhook.Config{URL: url, Secret: "old", Secrets: []string{"new"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sink.Send(t.Context(), ledger.OutboxItem{ID: "o1", MessageID: "m1", Payload: []byte(`{}`)}); err != nil {
			t.Fatalf("receiver with %q: %v", secrets, err)
		}
		if got := applied(); got["o1"] != 1 {
			t.Fatalf("receiver with %q applied %v, want o1 once", secrets, got)
		}
	}
}

// Without a secret the receiver does not start.
func TestReceiverNeedsASecret(t *testing.T) {
	t.Parallel()
	if err := run(t.Context(), Config{Listen: "127.0.0.1:0"}); err == nil {
		t.Fatal("run without a secret: nil error")
	}
}
