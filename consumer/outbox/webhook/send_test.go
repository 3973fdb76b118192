package webhook_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"

	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/ledger"
)

// An empty payload must not let net/http repeat the POST either: with
// Body = http.NoBody and an Idempotency-Key header, net/http would take the
// request as safe to replay on a reused connection that dropped.
func TestSendNeverRepeatsAnEmptyPayload(t *testing.T) {
	t.Parallel()
	dest := webhooktest.NewDestination(t, false)
	s, err := webhook.New(webhook.Config{URL: dest.URL()})
	if err != nil {
		t.Fatal(err)
	}
	first := ledger.OutboxItem{ID: "01FIRSTEMPTY", MessageID: "msg-0", Payload: []byte(`{"a":0}`)}
	if _, err := s.Send(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	dest.CloseAfterStore()
	empty := ledger.OutboxItem{ID: "01EMPTYPAYLOAD", MessageID: "msg-empty", Payload: []byte{}}
	_, err = s.Send(context.Background(), empty)
	if n := dest.Requests(empty.ID); n != 1 || !errors.Is(err, outbox.ErrAmbiguous) {
		t.Fatalf("destination saw %d requests for the empty item (want 1); Send err = %v (want %v)", n, err, outbox.ErrAmbiguous)
	}
}

// 303 See Other answers a POST that was processed (Post/Redirect/Get): the
// item is there, so it is an unknown outcome, never a failure that `outbox
// retry` would send again.
func TestSeeOtherAfterProcessingIsAnUnknownOutcome(t *testing.T) {
	t.Parallel()
	var stored atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stored.Add(1) // the work is done
		w.Header().Set("Location", "/items/42")
		w.WriteHeader(http.StatusSeeOther)
	}))
	t.Cleanup(srv.Close)
	s, err := webhook.New(webhook.Config{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Send(context.Background(), item)
	if !errors.Is(err, outbox.ErrAmbiguous) {
		t.Fatalf("303 See Other after the destination stored the item (stored=%d): err = %v, want ErrAmbiguous", stored.Load(), err)
	}
}
