package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
	"github.com/jetledger/jetledger/ledger"
)

// The README's receiver: one route, POST /hook, answering the item's id.
// Every DELETE, on any path, is the mux's 404.
func postOnlyReceiver(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hook", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)                                                                              //nolint:errcheck // test receiver
		json.NewEncoder(w).Encode(map[string]string{"id": "item-" + r.Header.Get(webhook.HeaderIdempotencyKey)}) //nolint:errcheck // test receiver
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/hook"
}

// sentRow adds an outbox row for message msgID to st and sends it to s.
func sentRow(t *testing.T, st *ledger.Store, s *webhook.Sink, msgID string) ledger.OutboxItem {
	t.Helper()
	ctx := context.Background()
	var id string
	if _, err := st.ApplyBatch(ctx, []ledger.Delivery{{MessageID: msgID, Stream: "S", Sequence: 1, Subject: "s", Data: []byte(`{}`)}},
		func(ctx context.Context, tx *ledger.Tx, _ ledger.Delivery) error {
			var err error
			id, err = tx.Enqueue(ctx, s.Name(), []byte(`{"charge":1}`))
			return err
		}, ledger.Budget{}); err != nil {
		t.Fatal(err)
	}
	it, err := st.Transition(ctx, id, ledger.Claim, ledger.Params{Worker: "w", Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ext, err := s.Send(ctx, it)
	if err != nil {
		t.Fatal(err)
	}
	if it, err = st.Transition(ctx, id, ledger.Sent, ledger.Params{Worker: "w", ExternalID: ext}); err != nil {
		t.Fatal(err)
	}
	return it
}

func openLedger(t *testing.T, path string) *ledger.Store {
	t.Helper()
	st, err := ledger.Open(path, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// outbox cancel through a delete URL the receiver has no route for: every
// DELETE is a 404, which proves nothing. The command fails (exit 1), the
// error says the item may still be at the destination, and the row is still
// sent, to be cancelled once a delete works.
func TestOutboxCancelUnconfirmedDeleteFails(t *testing.T) {
	t.Parallel()
	hook := postOnlyReceiver(t)
	path := filepath.Join(t.TempDir(), "l.db")
	hookSink, err := webhook.New(webhook.Config{URL: hook, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	st := openLedger(t, path)
	row := sentRow(t, st, hookSink, "m1")
	deleteURL := hook + "/{external_id}"

	if code, _, _ := runMain("outbox", "cancel", row.ID, "--db", path, "--webhook-delete-url", deleteURL); code != exitFailure {
		t.Fatalf("outbox cancel: exit %d, want %d", code, exitFailure)
	}
	s, err := deleteSink(webhookDelete{DeleteURL: deleteURL, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cancelOutbox(context.Background(), st, s, row.ID); !errors.Is(err, outbox.ErrStillAtDestination) || !errors.Is(err, outbox.ErrDeleteUnconfirmed) {
		t.Fatalf("cancel err = %v, want ErrStillAtDestination and ErrDeleteUnconfirmed", err)
	}
	if it, err := st.Get(context.Background(), row.ID); err != nil || it.Status != ledger.StatusSent || it.ExternalID != row.ExternalID {
		t.Fatalf("row %+v, %v; want it still sent as %s", it, err, row.ExternalID)
	}
}

// With --webhook-lookup-url, a 404 for an item that is gone (deleted before;
// its row never heard) is confirmed: the lookup does not find it and finds
// the other sent row. The cancel succeeds.
func TestOutboxCancelNotFoundConfirmedByLookup(t *testing.T) {
	t.Parallel()
	dest := webhooktest.NewDestination(t, false)
	s, err := webhook.New(webhook.Config{URL: dest.URL(), DeleteURL: dest.DeleteURL(), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "l.db")
	st := openLedger(t, path)
	sentRow(t, st, s, "m1")
	row := sentRow(t, st, s, "m2")
	if err := s.Delete(context.Background(), row.ExternalID); err != nil {
		t.Fatal(err)
	}
	dest.FailDeletesWith(http.StatusNotFound)
	args := []string{"outbox", "cancel", row.ID, "--db", path, "--webhook-delete-url", dest.DeleteURL()}
	if code, _, _ := runMain(args...); code != exitFailure {
		t.Fatalf("outbox cancel without a lookup: exit %d, want %d", code, exitFailure)
	}
	if code, _, _ := runMain(append(args, "--webhook-lookup-url", dest.LookupURL())...); code != exitOK {
		t.Fatalf("outbox cancel with a lookup: exit %d, want %d", code, exitOK)
	}
	if it, err := st.Get(context.Background(), row.ID); err != nil || it.Status != ledger.StatusCancelled {
		t.Fatalf("row %+v, %v; want cancelled", it, err)
	}
}
