package webhook_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/signature"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"

	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/ledger"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var item = ledger.OutboxItem{ID: "01OUTBOX", MessageID: "msg-1", Payload: []byte(`{"a":1}`)}

func TestSendHeadersAndSignature(t *testing.T) {
	t.Parallel()
	var got http.Header
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		body, _ = io.ReadAll(r.Body)
		w.Header().Set("X-Item", "hdr-7")
		w.Write([]byte(`{"id":"json-7"}`))
	}))
	defer srv.Close()
	s, err := webhook.New(webhook.Config{URL: srv.URL, Secret: "s3cret", ExternalIDHeader: "X-Item"})
	if err != nil {
		t.Fatal(err)
	}
	ext, err := s.Send(context.Background(), item)
	if err != nil || ext != "hdr-7" {
		t.Fatalf("Send = %q, %v", ext, err)
	}
	if got.Get(webhook.HeaderIdempotencyKey) != item.ID || got.Get(webhook.HeaderMessageID) != item.MessageID || string(body) != string(item.Payload) {
		t.Fatalf("headers %v body %s", got, body)
	}
	// v2, then the deprecated v1 that webhook.Sign still computes.
	ts := got.Get(webhook.HeaderTimestamp)
	if want := signature.Sign([]string{"s3cret"}, ts, item.ID, item.MessageID, body) + ", " + webhook.Sign("s3cret", ts, body); got.Get(webhook.HeaderSignature) != want {
		t.Fatalf("signature %q, want %q", got.Get(webhook.HeaderSignature), want)
	}
}

func TestExternalID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, header, body, field, want string
	}{
		{name: "json string", body: `{"id":"a1"}`, field: "id", want: "a1"},
		{name: "json number", body: `{"id":42}`, field: "id", want: "42"},
		{name: "other field", body: `{"ref":"r9"}`, field: "ref", want: "r9"},
		{name: "missing field", body: `{"x":1}`, field: "id", want: "fallback"},
		{name: "not json", body: `ok`, field: "id", want: "fallback"},
		{name: "empty string", body: `{"id":"  "}`, field: "id", want: "fallback"},
		{name: "header wins", header: "h1", body: `{"id":"a1"}`, field: "id", want: "h1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			hdrName := ""
			if tt.header != "" {
				h.Set("X-Id", tt.header)
				hdrName = "X-Id"
			}
			if got := webhook.ExternalID(h, []byte(tt.body), hdrName, tt.field, "fallback"); got != tt.want {
				t.Fatalf("ExternalID = %q, want %q", got, tt.want)
			}
		})
	}
}

// Every status is answered after the destination stored the item: what
// Send reports decides whether the dispatcher may send it again.
func TestSendClassification(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		retryOn []int // Config.RetryOn; nil is the default
		status  int
		wantErr error
	}{
		{name: "429 is retried by default", status: 429, wantErr: outbox.ErrRetryable},
		{name: "429 not listed is rejected", retryOn: []int{}, status: 429, wantErr: outbox.ErrRejected},
		{name: "503 documented as not processed is retried", retryOn: []int{503}, status: 503, wantErr: outbox.ErrRetryable},
		{name: "500 stays unknown when only 503 is listed", retryOn: []int{503}, status: 500, wantErr: outbox.ErrAmbiguous},
		{name: "500 after the work was recorded is an unknown outcome", status: 500, wantErr: outbox.ErrAmbiguous},
		{name: "503 is an unknown outcome by default", status: 503, wantErr: outbox.ErrAmbiguous},
		{name: "502 from a gateway", status: 502, wantErr: outbox.ErrAmbiguous},
		{name: "504 from a gateway", status: 504, wantErr: outbox.ErrAmbiguous},
		{name: "599", status: 599, wantErr: outbox.ErrAmbiguous},
		{name: "400", status: 400, wantErr: outbox.ErrRejected},
		{name: "404", status: 404, wantErr: outbox.ErrRejected},
		{name: "redirect: not followed, and the POST may have been processed", status: 302, wantErr: outbox.ErrAmbiguous},
		{name: "303 see other after processing", status: 303, wantErr: outbox.ErrAmbiguous},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dest := webhooktest.NewDestination(t, false)
			dest.FailAfterStoreWith(tt.status)
			s, err := webhook.New(webhook.Config{URL: dest.URL(), RetryOn: tt.retryOn})
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Send(context.Background(), item)
			var se *outbox.SendError
			if !errors.Is(err, tt.wantErr) || !errors.As(err, &se) || se.Status != tt.status {
				t.Fatalf("err = %v, want %v with status %d", err, tt.wantErr, tt.status)
			}
			if n := dest.Requests(item.ID); n != 1 {
				t.Fatalf("destination saw %d requests, want 1", n)
			}
		})
	}
}

// A request that got no response is retryable only when it provably never
// reached the destination.
func TestSendTransportErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		url     func(t testing.TB) string
		timeout time.Duration
		wantErr error
	}{
		{name: "connection refused", url: refusingURL, wantErr: outbox.ErrRetryable},
		{name: "untrusted TLS certificate", url: untrustedTLSURL, wantErr: outbox.ErrRetryable},
		{name: "timeout after the request left", url: silentURL, timeout: 50 * time.Millisecond, wantErr: outbox.ErrAmbiguous},
		{name: "connection closed after the work was recorded", url: func(t testing.TB) string {
			dest := webhooktest.NewDestination(t, false)
			dest.CloseAfterStore()
			return dest.URL()
		}, wantErr: outbox.ErrAmbiguous},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := webhook.New(webhook.Config{URL: tt.url(t), Timeout: tt.timeout})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Send(context.Background(), item); !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// refusingURL is an address nothing listens on: the request never arrives.
func refusingURL(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// untrustedTLSURL is a TLS server whose certificate the default client does
// not trust: the handshake fails before a byte of the request is sent.
func untrustedTLSURL(t testing.TB) string {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("request arrived despite the failed handshake")
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake error is the point
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL
}

// silentURL is a server that never answers while the test runs.
func silentURL(t testing.TB) string {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	return srv.URL
}

// net/http repeats a request with an Idempotency-Key by itself when a reused
// connection drops before the answer. The sink must not let it: the
// destination would do the work twice while Send reports one outcome.
func TestSendNeverRepeatsARequest(t *testing.T) {
	t.Parallel()
	dest := webhooktest.NewDestination(t, false)
	s, err := webhook.New(webhook.Config{URL: dest.URL()})
	if err != nil {
		t.Fatal(err)
	}
	// A first send leaves a keep-alive connection for the second to reuse.
	first := ledger.OutboxItem{ID: "01FIRST", MessageID: "msg-0", Payload: []byte(`{"a":0}`)}
	if _, err := s.Send(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	dest.CloseAfterStore()
	_, err = s.Send(context.Background(), item)
	if n := dest.Requests(item.ID); n != 1 || !errors.Is(err, outbox.ErrAmbiguous) {
		t.Fatalf("destination saw %d requests for the item (want 1); Send err = %v (want %v)", n, err, outbox.ErrAmbiguous)
	}
}

func TestDelete(t *testing.T) {
	t.Parallel()
	var paths []string
	status := http.StatusNoContent
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.Method+" "+r.URL.EscapedPath())
		w.WriteHeader(status)
	}))
	defer srv.Close()
	s, _ := webhook.New(webhook.Config{URL: srv.URL, DeleteURL: srv.URL + "/items/{external_id}"})
	if err := s.Delete(context.Background(), "a/b"); err != nil {
		t.Fatal(err)
	}
	if paths[0] != "DELETE /items/a%2Fb" {
		t.Fatalf("request %q", paths[0])
	}
	status = http.StatusNotFound // gone, or no route: not a delete until proved
	if err := s.Delete(context.Background(), "x"); !errors.Is(err, outbox.ErrNoSuchItem) {
		t.Fatalf("404 delete err = %v, want ErrNoSuchItem", err)
	}
	status = http.StatusForbidden
	if err := s.Delete(context.Background(), "x"); err == nil {
		t.Fatal("403 delete succeeded")
	}
	noDelete, _ := webhook.New(webhook.Config{URL: srv.URL})
	if err := noDelete.Delete(context.Background(), "x"); err == nil {
		t.Fatal("delete without DeleteURL succeeded")
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     webhook.Config
		wantErr error
	}{
		{name: "no URL", cfg: webhook.Config{}, wantErr: webhook.ErrInvalidConfig},
		{name: "not http", cfg: webhook.Config{URL: "ftp://x"}, wantErr: webhook.ErrInvalidConfig},
		{name: "relative URL", cfg: webhook.Config{URL: "/relative"}, wantErr: webhook.ErrInvalidConfig},
		{name: "bad DeleteURL", cfg: webhook.Config{URL: "http://ok", DeleteURL: "nope"}, wantErr: webhook.ErrInvalidConfig},
		{name: "negative Timeout", cfg: webhook.Config{URL: "http://ok", Timeout: -1}, wantErr: webhook.ErrInvalidConfig},
		{name: "RetryOn a success", cfg: webhook.Config{URL: "http://ok", RetryOn: []int{429, 200}}, wantErr: webhook.ErrInvalidConfig},
		{name: "RetryOn below 100", cfg: webhook.Config{URL: "http://ok", RetryOn: []int{99}}, wantErr: webhook.ErrInvalidConfig},
		{name: "RetryOn above 599", cfg: webhook.Config{URL: "http://ok", RetryOn: []int{600}}, wantErr: webhook.ErrInvalidConfig},
		{name: "RetryOn 503", cfg: webhook.Config{URL: "http://ok", RetryOn: []int{429, 503}}},
		{name: "RetryOn none", cfg: webhook.Config{URL: "http://ok", RetryOn: []int{}}},
		{name: "an empty secret in Secrets", cfg: webhook.Config{URL: "http://ok", Secrets: []string{"a", ""}}, wantErr: webhook.ErrInvalidConfig},
		{name: "three secrets", cfg: webhook.Config{URL: "http://ok", Secrets: []string{"a", "b", "c"}}, wantErr: webhook.ErrInvalidConfig},
		{name: "Secret repeated in Secrets", cfg: webhook.Config{URL: "http://ok", Secret: "a", Secrets: []string{"a"}}, wantErr: webhook.ErrInvalidConfig},
		{name: "two secrets", cfg: webhook.Config{URL: "http://ok", Secret: "old", Secrets: []string{"new"}}},
		{name: "two in Secrets", cfg: webhook.Config{URL: "http://ok", Secrets: []string{"old", "new"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := webhook.New(tt.cfg); !errors.Is(err, tt.wantErr) {
				t.Fatalf("New(%+v) err = %v, want %v", tt.cfg, err, tt.wantErr)
			}
		})
	}
}
