package webhook_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/signature"
)

// receiver is a destination that verifies every request with a
// signature.Verifier: 401 when refused, 2xx otherwise. It keeps each
// request and Verify's answer to it.
type receiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []received
}

type received struct {
	header http.Header
	body   []byte
	err    error
}

func newReceiver(t testing.TB, v signature.Verifier) *receiver {
	t.Helper()
	rc := &receiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		err := v.Verify(r.Header, body)
		rc.mu.Lock()
		rc.seen = append(rc.seen, received{header: r.Header.Clone(), body: body, err: err})
		rc.mu.Unlock()
		if err != nil {
			http.Error(w, "refused", http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, `{"id":%q}`, "ext-"+r.Header.Get(webhook.HeaderIdempotencyKey))
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// last is the latest request and Verify's answer; the handler records it
// before it answers, so it is there once the sender has the answer.
func (rc *receiver) last(t testing.TB) received {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.seen) == 0 {
		t.Fatal("the receiver saw no request")
	}
	return rc.seen[len(rc.seen)-1]
}

// send posts one item through a real sink with cfg to rc and returns
// Verify's answer to it.
func send(t testing.TB, rc *receiver, cfg webhook.Config) (received, error) {
	t.Helper()
	cfg.URL = rc.srv.URL
	s, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, sendErr := s.Send(context.Background(), item)
	return rc.last(t), sendErr
}

// replay posts a request the sink sent, edited, to rc, as someone who
// captured it would, and returns Verify's answer.
func replay(t testing.TB, rc *receiver, req received) error {
	t.Helper()
	r, err := http.NewRequestWithContext(context.Background(), http.MethodPost, rc.srv.URL, bytes.NewReader(req.body))
	if err != nil {
		t.Fatal(err)
	}
	r.Header = req.header
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	got := rc.last(t)
	if (got.err == nil) != (resp.StatusCode == http.StatusOK) {
		t.Fatalf("status %d for Verify = %v", resp.StatusCode, got.err)
	}
	return got.err
}

func at(d time.Duration) func() time.Time { return func() time.Time { return time.Now().Add(d) } }

// The sink's requests verify; a captured one sent again with its body,
// its Idempotency-Key, its message id or its timestamp changed is refused,
// and so is one stripped to its v1 entries (which sign no key).
func TestSignedRequestsCannotBeAltered(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		edit    func(r *received)
		wantErr error
	}{
		{name: "unaltered, within the tolerance", edit: func(*received) {}},
		{name: "body", edit: func(r *received) { r.body = []byte(`{"a":2}`) }, wantErr: signature.ErrBadSignature},
		{name: "Idempotency-Key", edit: func(r *received) { r.header.Set(webhook.HeaderIdempotencyKey, "01FORGED") }, wantErr: signature.ErrBadSignature},
		{name: "message id", edit: func(r *received) { r.header.Set(webhook.HeaderMessageID, "msg-forged") }, wantErr: signature.ErrBadSignature},
		{name: "timestamp", edit: func(r *received) {
			r.header.Set(webhook.HeaderTimestamp, signature.Timestamp(time.Now().Add(time.Minute)))
		}, wantErr: signature.ErrBadSignature},
		{name: "new key, only the v1 entry kept", edit: func(r *received) {
			r.header.Set(webhook.HeaderIdempotencyKey, "01FORGED")
			_, v1, _ := strings.Cut(r.header.Get(webhook.HeaderSignature), ", ")
			r.header.Set(webhook.HeaderSignature, v1)
		}, wantErr: signature.ErrOnlyV1},
		{name: "signature dropped", edit: func(r *received) { r.header.Del(webhook.HeaderSignature) }, wantErr: signature.ErrNoSignature},
		{name: "signature malformed", edit: func(r *received) { r.header.Set(webhook.HeaderSignature, "v2=nothex, v1") }, wantErr: signature.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rc := newReceiver(t, signature.Verifier{Secrets: []string{"s3cret"}})
			sent, err := send(t, rc, webhook.Config{Secret: "s3cret"})
			if err != nil || sent.err != nil {
				t.Fatalf("the sink's own request: send %v, verify %v", err, sent.err)
			}
			tt.edit(&sent)
			if err := replay(t, rc, sent); !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("replayed: Verify = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// A receiver whose clock is past the tolerance from the sink's, either
// way, refuses the sink's request; the sink takes the 401 as a rejection.
func TestSignedRequestsExpire(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		skew    time.Duration // the receiver's clock minus the sink's
		wantErr error
	}{
		{name: "inside the tolerance", skew: 4 * time.Minute},
		{name: "inside the tolerance, behind", skew: -4 * time.Minute},
		{name: "too old", skew: 6 * time.Minute, wantErr: signature.ErrStale},
		{name: "too far in the future", skew: -6 * time.Minute, wantErr: signature.ErrStale},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rc := newReceiver(t, signature.Verifier{Secrets: []string{"s3cret"}, Tolerance: 5 * time.Minute, Now: at(tt.skew)})
			got, err := send(t, rc, webhook.Config{Secret: "s3cret"})
			if !errors.Is(got.err, tt.wantErr) || (got.err == nil) != (tt.wantErr == nil) {
				t.Fatalf("Verify = %v, want %v", got.err, tt.wantErr)
			}
			if tt.wantErr != nil && !errors.Is(err, outbox.ErrRejected) {
				t.Fatalf("send: %v, want outbox.ErrRejected", err)
			}
		})
	}
}

// During a rotation the sink signs with the old and the new secret: a
// receiver holding either accepts, one holding neither refuses.
func TestRotatedSecrets(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		sink     webhook.Config
		receiver []string
		wantErr  error
	}{
		{name: "old and new, receiver has the new", sink: webhook.Config{Secret: "old", Secrets: []string{"new"}}, receiver: []string{"new"}},
		{name: "old and new, receiver has the old", sink: webhook.Config{Secret: "old", Secrets: []string{"new"}}, receiver: []string{"old"}},
		{name: "old and new, receiver has neither", sink: webhook.Config{Secret: "old", Secrets: []string{"new"}}, receiver: []string{"other"}, wantErr: signature.ErrBadSignature},
		{name: "both in Secrets", sink: webhook.Config{Secrets: []string{"old", "new"}}, receiver: []string{"new"}},
		{name: "new only, receiver has both", sink: webhook.Config{Secret: "new"}, receiver: []string{"old", "new"}},
		{name: "old dropped, receiver has only the old", sink: webhook.Config{Secret: "new"}, receiver: []string{"old"}, wantErr: signature.ErrBadSignature},
		{name: "unsigned", sink: webhook.Config{}, receiver: []string{"new"}, wantErr: signature.ErrNoSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rc := newReceiver(t, signature.Verifier{Secrets: tt.receiver})
			got, _ := send(t, rc, tt.sink)
			if !errors.Is(got.err, tt.wantErr) || (got.err == nil) != (tt.wantErr == nil) {
				t.Fatalf("Verify = %v, want %v", got.err, tt.wantErr)
			}
		})
	}
}

// With two secrets the sink sends a v2 and a v1 entry for each, or only
// the v2 entries with OmitV1.
func TestSignatureEntries(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, signature.Verifier{Secrets: []string{"new"}})
	got, err := send(t, rc, webhook.Config{Secret: "old", Secrets: []string{"new"}})
	if err != nil {
		t.Fatal(err)
	}
	ts := got.header.Get(webhook.HeaderTimestamp)
	both := []string{"old", "new"}
	want := signature.Sign(both, ts, item.ID, item.MessageID, item.Payload) + ", " + signature.SignV1(both, ts, item.Payload)
	if sig := got.header.Get(webhook.HeaderSignature); sig != want {
		t.Fatalf("signature %q, want %q", sig, want)
	}
	got, err = send(t, rc, webhook.Config{Secret: "old", Secrets: []string{"new"}, OmitV1: true})
	if err != nil {
		t.Fatal(err)
	}
	ts = got.header.Get(webhook.HeaderTimestamp)
	if sig, want := got.header.Get(webhook.HeaderSignature), signature.Sign(both, ts, item.ID, item.MessageID, item.Payload); sig != want {
		t.Fatalf("signature with OmitV1 %q, want %q", sig, want)
	}
}
