package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/ledger"
)

// start runs the example on a free port and returns its URL and the items
// it applied.
func start(t *testing.T, secret string) (string, func() map[string]int) {
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
		done <- run(ctx, Config{Secret: secret, Listener: ln, Logger: slog.New(slog.DiscardHandler),
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

// A wrong secret, a missing signature and a stale timestamp are refused
// with 401, which the sink takes as a rejection (no retry), and nothing is
// applied.
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
	body := []byte(`{"id":"a"}`)
	stale := strconv.FormatInt(time.Now().Add(-time.Hour).Unix(), 10)
	for name, h := range map[string]http.Header{
		"unsigned": {webhook.HeaderIdempotencyKey: {"o2"}},
		"stale": {webhook.HeaderIdempotencyKey: {"o2"}, webhook.HeaderTimestamp: {stale},
			webhook.HeaderSignature: {webhook.Sign("s3cret", stale, body)}},
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

// Without a secret the receiver does not start.
func TestReceiverNeedsASecret(t *testing.T) {
	t.Parallel()
	if err := run(t.Context(), Config{Listen: "127.0.0.1:0"}); err == nil {
		t.Fatal("run without a secret: nil error")
	}
}
