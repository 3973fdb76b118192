package integration

import (
	"database/sql"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"

	"github.com/jetledger/jetledger/consumer/consumertest"
)

// lookupReport is what the soak's lookup phases found, on the rows the
// faults left in review.
type lookupReport struct {
	ReviewBefore   int     `json:"review_before"`   // rows in review after the faults
	HeldBefore     int     `json:"held_before"`     // of which the destination held the item
	DenyingLookups int     `json:"denying_lookups"` // lookups the denying lookup answered: it was asked
	DenyingChanged int     `json:"denying_changed"` // rows it moved out of review or sent again: must be 0
	Found          int     `json:"found"`           // settled as sent by the true lookup, not sent again
	Resent         int     `json:"resent"`          // never seen by the destination: sent again, once
	Unanswered     int     `json:"unanswered"`      // rows whose lookups the destination would not answer
	ReviewAfter    int     `json:"review_after"`    // rows in review at the end
	SentTwice      int     `json:"sent_twice"`
	Lost           int     `json:"lost"`
	AppliedTwice   int     `json:"applied_twice"`
	Seconds        float64 `json:"seconds"`
}

// settleByLookup restarts run twice on the rows the faults left in review.
// First with a lookup that answers 404 for every key (a lookup URL pointing
// at the wrong place): it denies the newest sent row, so it must settle
// nothing; every row stays in review and nothing is sent again. Then with
// the destination's true lookup, told not to answer for one row: every other
// row leaves review, as sent without a second request when the destination
// holds its item, sent again once when it does not; the unanswered one
// stays. The ledger and the destination are then checked as after the faults.
func settleByLookup(t *testing.T, w *world, dest *webhooktest.Destination, db *sql.DB, startConsumer func(...string) *proc,
	published, uncertain map[string]event) *lookupReport {
	t.Helper()
	began := time.Now()
	held := map[string]bool{}
	for _, it := range dest.Items() {
		held[it.Key] = true
	}
	type before struct {
		held     bool
		requests int
	}
	rep := &lookupReport{}
	review := map[string]before{}
	ids := reviewIDs(t, db)
	for _, id := range ids {
		review[id] = before{held[id], dest.Requests(id)}
		if held[id] {
			rep.HeldBefore++
		}
	}
	rep.ReviewBefore = len(ids)

	// A lookup that denies everything.
	asked := dest.Lookups()
	dest.FailLookupsWith(http.StatusNotFound)
	run := startConsumer("--webhook-lookup-url", dest.LookupURL())
	// Every round of the dispatcher looks rows in review up before it sends:
	// once a new message is sent and nothing is queued, whatever a lookup
	// queued again has been sent.
	marker := event{ID: w.pub.NewID(), Account: "acct-lookup", Amount: 1}
	w.publish([]event{marker})
	published[marker.ID] = marker
	consumertest.Eventually(t, time.Minute, "a new message sent and nothing queued", func() bool {
		return count(t, db, `SELECT count(*) FROM outbox WHERE message_id = ? AND status = 'sent'`, marker.ID) == 1 &&
			count(t, db, `SELECT count(*) FROM outbox WHERE status NOT IN ('sent', 'review')`) == 0
	})
	stopRun(t, run)
	rep.DenyingLookups = dest.Lookups() - asked
	if len(review) > 0 && rep.DenyingLookups == 0 {
		t.Errorf("the denying lookup was never asked, so its phase shows nothing")
	}
	status := outboxStatuses(t, db)
	for _, id := range ids {
		if n := dest.Requests(id); status[id] != "review" || n != review[id].requests {
			rep.DenyingChanged++
			t.Errorf("a lookup that denies the newest sent row changed row %s: now %s, %d requests (was review, %d)", id, status[id], n, review[id].requests)
		}
	}

	// The true lookup, which cannot say for one row still in review.
	dest.FailLookupsWith(0)
	var refused []string
	if left := reviewIDs(t, db); len(left) >= 2 {
		refused = left[len(left)-1:]
		dest.FailLookupsWith(http.StatusServiceUnavailable, refused...)
	}
	run = startConsumer("--webhook-lookup-url", dest.LookupURL())
	if !poll(time.Minute, func() bool {
		return count(t, db, `SELECT count(*) FROM outbox WHERE status = 'review'`) == len(refused) &&
			count(t, db, `SELECT count(*) FROM outbox WHERE status <> 'sent' AND status <> 'review'`) == 0 &&
			(len(refused) == 0 || dest.LookupsOf(refused[0]) > 0)
	}) {
		t.Errorf("rows in review did not settle within a minute, %d of them left", count(t, db, `SELECT count(*) FROM outbox WHERE status = 'review'`))
	}
	stopRun(t, run)

	var final soakReport
	checkSoak(t, db, dest, published, uncertain, &final)
	rep.SentTwice, rep.Lost, rep.AppliedTwice, rep.ReviewAfter = final.SentTwice, final.Lost, final.AppliedTwice, final.Review
	status = outboxStatuses(t, db)
	for _, id := range ids {
		b, n := review[id], dest.Requests(id)
		switch {
		case len(refused) == 1 && id == refused[0] && status[id] == "review" && n == b.requests:
			rep.Unanswered++
		case status[id] == "sent" && b.held && n == b.requests:
			rep.Found++
		case status[id] == "sent" && !b.held && n == b.requests+1:
			rep.Resent++
		default:
			t.Errorf("row %s (item held: %v, %d requests) after the lookup: %s, %d requests", id, b.held, b.requests, status[id], n)
		}
	}
	rep.Seconds = time.Since(began).Seconds()
	return rep
}

// poll reports whether cond came true within timeout.
func poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond) // poll interval, not synchronisation
	}
	return true
}

// reviewIDs returns the rows in review, in id order.
func reviewIDs(t testing.TB, db *sql.DB) []string {
	t.Helper()
	var ids []string
	for _, r := range outboxRows(t, db) {
		if r.Status == "review" {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

func outboxStatuses(t testing.TB, db *sql.DB) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range outboxRows(t, db) {
		out[r.ID] = r.Status
	}
	return out
}

// stopRun stops run with SIGTERM and expects exit 0.
func stopRun(t testing.TB, run *proc) {
	t.Helper()
	run.stop()
	if code := run.wait(time.Minute); code != 0 {
		t.Errorf("run exited %d", code)
	}
}

// One row in review whose item the destination holds (the connection
// dropped after it stored it) and one it never got (a 502 before storing):
// run with a lookup that denies everything leaves both alone; run with the
// destination's lookup (given by environment variable) settles the first as
// sent with the destination's id, without a request, and sends the second
// again, once.
func TestRunLookupSettlesReview(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Minute)
	dest := webhooktest.NewDestination(t, false)
	run := w.runConsumer(nil, webhookArgs(dest)...)
	db := w.ledgerDB()
	sendOne := func(id string, status string) string {
		t.Helper()
		w.publish([]event{{ID: id, Account: "a", Amount: 1}})
		var key string
		consumertest.Eventually(t, 30*time.Second, id+" "+status, func() bool {
			for _, r := range outboxRows(t, db) {
				if r.MessageID == id {
					key = r.ID
					return r.Status == status
				}
			}
			return false
		})
		return key
	}
	sendOne("sent-1", "sent") // the row a lookup is proven on
	dest.CloseAfterStore()
	held := sendOne("held-1", "review")
	dest.FailAfterStoreWith(0)
	dest.FailWith(http.StatusBadGateway)
	missing := sendOne("missing-1", "review")
	dest.FailWith(0)
	stopRun(t, run)
	if dest.Requests(held) != 1 || dest.Requests(missing) != 1 || len(dest.Items()) != 2 {
		t.Fatalf("before lookups: requests %d and %d, %d items", dest.Requests(held), dest.Requests(missing), len(dest.Items()))
	}

	dest.FailLookupsWith(http.StatusNotFound)
	run = w.runConsumer(nil, webhookArgs(dest, "--webhook-lookup-url", dest.LookupURL())...)
	sendOne("sent-2", "sent") // after a round that looked rows in review up
	stopRun(t, run)
	st := outboxStatuses(t, db)
	if dest.Lookups() == 0 || st[held] != "review" || st[missing] != "review" || dest.Requests(held) != 1 || dest.Requests(missing) != 1 {
		t.Fatalf("a lookup that denies everything: %d lookups, rows %s and %s, requests %d and %d",
			dest.Lookups(), st[held], st[missing], dest.Requests(held), dest.Requests(missing))
	}

	dest.FailLookupsWith(0)
	run = w.runConsumer([]string{"JETLEDGER_WEBHOOK_LOOKUP_URL=" + dest.LookupURL()}, webhookArgs(dest)...)
	h := waitRowStatus(t, db, held, "sent", 30*time.Second)
	waitRowStatus(t, db, missing, "sent", 30*time.Second)
	stopRun(t, run)
	byKey := map[string][]webhooktest.StoredItem{}
	for _, it := range dest.Items() {
		byKey[it.Key] = append(byKey[it.Key], it)
	}
	if dest.Requests(held) != 1 || len(byKey[held]) != 1 || h.ExternalID != byKey[held][0].ExternalID {
		t.Errorf("held row: %d requests, items %+v, row %+v", dest.Requests(held), byKey[held], h)
	}
	if dest.Requests(missing) != 2 || len(byKey[missing]) != 1 {
		t.Errorf("missing row: %d requests, items %+v", dest.Requests(missing), byKey[missing])
	}
}

// --webhook-lookup-url is checked before anything starts: exit 2 naming it.
func TestLookupURLUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		env  string
		want string
	}{
		{args: []string{"--webhook", "http://127.0.0.1:1/items", "--webhook-lookup-url", "http://127.0.0.1:1/items"}, want: "{key}"},
		{args: []string{"--webhook", "http://127.0.0.1:1/items"}, env: "JETLEDGER_WEBHOOK_LOOKUP_URL=http://127.0.0.1:1/by-key", want: "{key}"},
		{args: []string{"--webhook", "http://127.0.0.1:1/items", "--webhook-lookup-url", "ftp://127.0.0.1:1/{key}"}, want: "http"},
		{args: []string{"--webhook-lookup-url", "http://127.0.0.1:1/{key}"}, want: "needs --webhook"},
	} {
		var env []string
		if tc.env != "" {
			env = []string{tc.env}
		}
		p := start(t, env, append([]string{"run", "--db", t.TempDir() + "/l.db", "--nats", "nats://127.0.0.1:1", "--stream", stream}, tc.args...)...)
		if code, out := p.wait(30*time.Second), p.output(); code != 2 || !strings.Contains(out, "--webhook-lookup-url") || !strings.Contains(out, tc.want) {
			t.Errorf("%v %s: exit %d, want 2 naming --webhook-lookup-url and %q:\n%s", tc.args, tc.env, code, tc.want, out)
		}
	}
}
