// Package webhooktest runs a webhook destination for tests, in the manner of
// net/http/httptest: it stores POSTed items by idempotency key and can be
// told to fail, hang, answer late or close without answering.
package webhooktest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// StoredItem is one item a Destination accepted.
type StoredItem struct {
	Key        string // Idempotency-Key
	MessageID  string
	ExternalID string
	Body       []byte
}

// Destination is a webhook receiver for tests: it stores POSTed items and
// answers {"id": "<external id>"}; DELETE /items/<external id> removes one;
// GET /by-key/<idempotency key> looks one up (LookupURL).
// It can be told to fail before or after storing, to drop the connection
// after storing, to hold requests until released, and whether to honour
// Idempotency-Key (a repeated key returns the stored item instead of storing
// another).
type Destination struct {
	srv        *httptest.Server
	idempotent bool

	mu           sync.Mutex
	items        map[string]StoredItem // by external id
	keys         map[string]string     // idempotency key → external id (idempotent mode)
	requests     map[string]int        // POSTs per idempotency key
	status       int                   // non-zero: answer POSTs with it, store nothing
	failAfter    int                   // non-zero: store, then answer POSTs with it
	closeAfter   bool                  // store, then close the connection without an answer
	deleteStatus int                   // non-zero: answer DELETEs with it
	hold         chan struct{}         // non-nil: POSTs wait for it to close
	holdAfter    bool                  // hold after storing: the item is there, the answer is late
	abandoned    int                   // held requests whose client gave up
	delay        time.Duration         // answer every POST this much later: a slow destination
	next         int
	lookups      int
	lookupsOf    map[string]int // lookups per idempotency key
	lookupStatus int            // non-zero: answer every lookup with it
	lookupFail   map[string]int // key → status to answer its lookups with
	arrived      chan string
}

// NewDestination starts a Destination, closed by tb.Cleanup.
func NewDestination(tb testing.TB, idempotent bool) *Destination {
	tb.Helper()
	d := &Destination{idempotent: idempotent, items: map[string]StoredItem{}, keys: map[string]string{},
		requests: map[string]int{}, lookupsOf: map[string]int{}, lookupFail: map[string]int{}, arrived: make(chan string, 100_000)}
	d.srv = httptest.NewServer(http.HandlerFunc(d.serve))
	tb.Cleanup(func() {
		d.Release()
		d.srv.Close()
	})
	return d
}

// URL is where to POST items.
func (d *Destination) URL() string { return d.srv.URL + "/items" }

// LookupURL is the lookup template for webhook.Config.LookupURL: the
// destination answers 200 with the item's id if it holds an item stored
// under the key, 404 otherwise.
func (d *Destination) LookupURL() string { return d.srv.URL + "/by-key/{key}" }

// DeleteURL is the delete template for webhook.Config.DeleteURL.
func (d *Destination) DeleteURL() string { return d.srv.URL + "/items/{external_id}" }

// Arrived receives the idempotency key of each POST as it arrives, before
// any hold: tests wait on it instead of sleeping.
func (d *Destination) Arrived() <-chan string { return d.arrived }

// Hold makes POSTs wait until Release; a request whose client gives up
// meanwhile stores nothing.
func (d *Destination) Hold() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.hold == nil {
		d.hold = make(chan struct{})
	}
}

// Abandoned counts the held requests whose client gave up, as the server
// saw it: a test that releases a hold after its client timed out waits for
// this first, or the request may still be held, and store, on the release.
func (d *Destination) Abandoned() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.abandoned
}

// HoldAfterStore makes POSTs store their item first and then wait until
// Release before answering: the send has happened but its outcome is unknown
// to the sender.
func (d *Destination) HoldAfterStore() {
	d.Hold()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.holdAfter = true
}

// SetDelay makes every POST take at least delay: a slow destination.
func (d *Destination) SetDelay(delay time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.delay = delay
}

// Release lets held and future POSTs through.
func (d *Destination) Release() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.hold != nil {
		close(d.hold)
		d.hold = nil
	}
	d.holdAfter = false
}

// FailWith answers POSTs with status (0: accept again).
func (d *Destination) FailWith(status int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.status = status
}

// FailAfterStoreWith makes POSTs store their item and then answer with
// status: an application that committed the work and then failed, so the
// sender sees an error for an item that is there. 0 answers normally again,
// and also ends CloseAfterStore.
func (d *Destination) FailAfterStoreWith(status int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failAfter, d.closeAfter = status, false
}

// CloseAfterStore makes POSTs store their item and then close the connection
// without writing a response, until FailAfterStoreWith(0): the work is done
// but the sender sees its connection drop.
func (d *Destination) CloseAfterStore() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failAfter, d.closeAfter = 0, true
}

// FailDeletesWith answers DELETEs with status (0: delete again).
func (d *Destination) FailDeletesWith(status int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.deleteStatus = status
}

// Requests is how many POSTs carried key.
func (d *Destination) Requests(key string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.requests[key]
}

// Items returns the stored (not deleted) items.
func (d *Destination) Items() []StoredItem {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]StoredItem, 0, len(d.items))
	for _, it := range d.items {
		out = append(out, it)
	}
	return out
}

func (d *Destination) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/items":
		d.post(w, r)
	case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/items/"):
		d.delete(w, strings.TrimPrefix(r.URL.Path, "/items/"))
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/by-key/"):
		d.lookup(w, strings.TrimPrefix(r.URL.Path, "/by-key/"))
	default:
		http.Error(w, "not found", http.StatusNotFound)
	}
}

func (d *Destination) post(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	key := r.Header.Get("Idempotency-Key")
	d.mu.Lock()
	d.requests[key]++
	hold, holdAfter, status, delay := d.hold, d.holdAfter, d.status, d.delay
	failAfter, closeAfter := d.failAfter, d.closeAfter
	d.mu.Unlock()
	d.arrived <- key
	wait := func() bool {
		if delay > 0 {
			t := time.NewTimer(delay)
			defer t.Stop()
			select {
			case <-t.C:
			case <-r.Context().Done():
				return false
			}
		}
		if hold == nil {
			return true
		}
		select {
		case <-hold:
			return true
		case <-r.Context().Done():
			d.mu.Lock()
			d.abandoned++
			d.mu.Unlock()
			return false // the client gave up
		}
	}
	if !holdAfter && !wait() {
		return // nothing stored
	}
	if status != 0 {
		http.Error(w, fmt.Sprintf("destination says %d", status), status)
		return
	}
	d.mu.Lock()
	ext, seen := d.keys[key]
	if !seen || !d.idempotent {
		d.next++
		ext = fmt.Sprintf("ext-%d", d.next)
		d.items[ext] = StoredItem{Key: key, MessageID: r.Header.Get("Jetledger-Message-Id"), ExternalID: ext, Body: body}
		d.keys[key] = ext
	}
	d.mu.Unlock()
	if holdAfter && !wait() {
		return // stored, but the answer never leaves
	}
	if closeAfter {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
		return // stored, and the connection drops without an answer
	}
	if failAfter != 0 {
		http.Error(w, fmt.Sprintf("destination stored it, then says %d", failAfter), failAfter)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(map[string]string{"id": ext}) //nolint:errcheck // test server
}

func (d *Destination) delete(w http.ResponseWriter, ext string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.deleteStatus != 0 {
		http.Error(w, "delete refused", d.deleteStatus)
		return
	}
	if _, ok := d.items[ext]; !ok {
		http.Error(w, "no such item", http.StatusNotFound)
		return
	}
	delete(d.items, ext)
	w.WriteHeader(http.StatusNoContent)
}

func (d *Destination) lookup(w http.ResponseWriter, key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lookups++
	d.lookupsOf[key]++
	if status := cmp.Or(d.lookupFail[key], d.lookupStatus); status != 0 {
		http.Error(w, fmt.Sprintf("lookup answered %d by the test", status), status)
		return
	}
	for ext, it := range d.items {
		if it.Key == key {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]string{"id": ext}) //nolint:errcheck // test server
			return
		}
	}
	http.Error(w, "never seen", http.StatusNotFound)
}

// Lookups is how many lookups by key the destination answered.
func (d *Destination) Lookups() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lookups
}

// LookupsOf is how many lookups asked about key.
func (d *Destination) LookupsOf(key string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lookupsOf[key]
}

// FailLookupsWith answers the lookups of keys with status instead of the
// truth: 404 for every key is a lookup URL that points at the wrong place,
// a 5xx for some keys a destination that cannot say for those. Without
// keys it applies to every key; status 0 answers truly again (without keys:
// for every key).
func (d *Destination) FailLookupsWith(status int, keys ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(keys) == 0 {
		d.lookupStatus = status
		if status == 0 {
			clear(d.lookupFail)
		}
		return
	}
	for _, k := range keys {
		if status == 0 {
			delete(d.lookupFail, k)
		} else {
			d.lookupFail[k] = status
		}
	}
}
