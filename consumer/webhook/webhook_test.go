package webhook_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/webhook"
	"github.com/jetledger/jetledger/ledger"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var item = ledger.OutboxItem{ID: "01OUTBOX", MessageID: "msg-1", Payload: []byte(`{"a":1}`)}

func TestSendHeadersAndSignature(t *testing.T) {
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
	if want := webhook.Sign("s3cret", got.Get(webhook.HeaderTimestamp), body); got.Get(webhook.HeaderSignature) != want {
		t.Fatalf("signature %q, want %q", got.Get(webhook.HeaderSignature), want)
	}
}

func TestExternalID(t *testing.T) {
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

func TestSendClassification(t *testing.T) {
	tests := []struct {
		name   string
		status int
		want   error
	}{
		{"400", 400, consumer.ErrRejected},
		{"404", 404, consumer.ErrRejected},
		{"redirect", 302, consumer.ErrRejected},
		{"429", 429, consumer.ErrRetryable},
		{"500", 500, consumer.ErrRetryable},
		{"503", 503, consumer.ErrRetryable},
		{"502 from a gateway", 502, consumer.ErrAmbiguous},
		{"504 from a gateway", 504, consumer.ErrAmbiguous},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.status == 302 {
					w.Header().Set("Location", "/elsewhere")
				}
				w.WriteHeader(tt.status)
				w.Write([]byte("nope"))
			}))
			defer srv.Close()
			s, _ := webhook.New(webhook.Config{URL: srv.URL})
			_, err := s.Send(context.Background(), item)
			var se *consumer.SendError
			if !errors.Is(err, tt.want) || !errors.As(err, &se) || se.Status != tt.status {
				t.Fatalf("err = %v, want %v with status %d", err, tt.want, tt.status)
			}
		})
	}
}

func TestSendTransportErrors(t *testing.T) {
	// Nothing listens: connection refused, the request never arrived.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	s, _ := webhook.New(webhook.Config{URL: "http://" + addr})
	if _, err := s.Send(context.Background(), item); !errors.Is(err, consumer.ErrRetryable) {
		t.Fatalf("refused: err = %v, want retryable", err)
	}
	// A destination that does not answer in time: the request may have arrived.
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	s, _ = webhook.New(webhook.Config{URL: srv.URL, Timeout: 50 * time.Millisecond})
	if _, err := s.Send(context.Background(), item); !errors.Is(err, consumer.ErrAmbiguous) {
		t.Fatalf("timeout: err = %v, want ambiguous", err)
	}
}

func TestDelete(t *testing.T) {
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
	status = http.StatusNotFound // already gone counts as deleted
	if err := s.Delete(context.Background(), "x"); err != nil {
		t.Fatal(err)
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
	for _, cfg := range []webhook.Config{
		{},
		{URL: "ftp://x"},
		{URL: "/relative"},
		{URL: "http://ok", DeleteURL: "nope"},
		{URL: "http://ok", Timeout: -1},
	} {
		if _, err := webhook.New(cfg); !errors.Is(err, webhook.ErrInvalidConfig) {
			t.Errorf("New(%+v) err = %v", cfg, err)
		}
	}
}
