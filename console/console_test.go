package console_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/console"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// Every route that acts refuses whoever may not act: no session (401), a
// viewer (403, whether or not a page offered the action), an operator's
// form without its session's token or sent from another site (403). A
// viewer sees the queue with no action offered. Nothing changed.
func TestTheConsoleRefusesWhoMayNotAct(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	nc, js := consumertest.Connect(t, srv)
	s := newSite(t, nc, js, admin.Address{Stream: "PAY", Durable: "pay"})
	_, web := newConsole(t, nc, "/console")

	form := url.Values{"site": {"-"}, "stream": {"PAY"}, "durable": {"pay"}, "action": {"outbox.retry"}, "id": {s.review[0]}, "seen": {"2099-01-01T00:00:00Z"}}
	anon := newClient(t, web.URL+"/console")
	if code, body := anon.get("/attention"); code != http.StatusOK || !strings.Contains(body, `id="signin"`) {
		t.Fatalf("no session: the queue answered %d, want the sign-in page\n%s", code, body)
	}
	viewer := newClient(t, web.URL+"/console")
	viewer.signIn("vic", "vic-secret")
	code, body := viewer.get("/attention")
	if code != http.StatusOK || !strings.Contains(body, s.review[0]) || strings.Contains(body, "/confirm") {
		t.Fatalf("a viewer's queue: %d, want the rows and no action\n%s", code, body)
	}
	vtoken := tokenRe.FindStringSubmatch(body)[1]
	op := newClient(t, web.URL+"/console")
	op.signIn("ada", "ada-secret")
	_, body = op.get("/attention")
	otoken := tokenRe.FindStringSubmatch(body)[1]

	for _, path := range []string{"/confirm", "/act"} {
		with := func(token string) url.Values {
			f := url.Values{}
			for k, v := range form {
				f[k] = v
			}
			f.Set("token", token)
			return f
		}
		if code, _ := anon.post(path, with("")); code != http.StatusUnauthorized {
			t.Errorf("%s with no session: %d, want 401", path, code)
		}
		if code, _ := viewer.post(path, with(vtoken)); code != http.StatusForbidden {
			t.Errorf("%s as a viewer: %d, want 403", path, code)
		}
		if code, _ := op.post(path, with("forged")); code != http.StatusForbidden {
			t.Errorf("%s with another token: %d, want 403", path, code)
		}
		req, _ := http.NewRequest(http.MethodPost, op.base+path, strings.NewReader(with(otoken).Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		resp, err := op.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Body.Close(); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s from another site: %d, want 403", path, resp.StatusCode)
		}
	}
	if code, _ := op.post("/signin", url.Values{"name": {"ada"}, "secret": {"wrong"}}); code != http.StatusUnauthorized {
		t.Errorf("a wrong secret: %d, want 401", code)
	}
	it, err := s.st.Get(context.Background(), s.review[0])
	if err != nil || it.Status != ledger.StatusReview {
		t.Fatalf("the row after the refusals: %v %v, want it in review still", it.Status, err)
	}
}

// An operator finds every kind of need in the queue, sees a row's payload
// only when asked, and acts: a bulk retry by filter (counted first), a
// cancel of a sent row (the confirmation says it deletes; the destination
// sees the DELETE), a dead letter discarded and a conflict acknowledged.
// The ledger and its audit say who did each, from the console.
func TestAnOperatorSettlesTheQueue(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	nc, js := consumertest.Connect(t, srv)
	s := newSite(t, nc, js, admin.Address{Stream: "PAY", Durable: "pay"})
	h, web := newConsole(t, nc, "")
	op := newClient(t, web.URL)
	op.signIn("ada", "ada-secret")
	ctx := context.Background()

	_, body := op.get("/attention")
	for _, want := range []string{s.review[0], s.review[1], s.failed[0], "dead letter 1", "conflict 1"} {
		if !strings.Contains(body, want) {
			t.Fatalf("the queue lacks %s\n%s", want, body)
		}
	}
	_, row := op.get("/outbox/-/PAY/pay/" + s.review[0])
	if strings.Contains(row, "4111") || !strings.Contains(row, "show-payload") {
		t.Fatalf("a row's page shows its payload unasked\n%s", row)
	}
	if _, row = op.get("/outbox/-/PAY/pay/" + s.review[0] + "?payload=1"); !strings.Contains(row, "4111") {
		t.Fatalf("the payload asked for is not shown\n%s", row)
	}

	// Retry every failed row: the confirmation counts 2.
	bulk := formWith(t, body, "status", "failed")
	bulk.Set("action", "outbox.retry")
	_, conf := op.post("/confirm", bulk)
	if !strings.Contains(conf, "<b>2</b> row(s)") {
		t.Fatalf("the bulk retry's confirmation\n%s", conf)
	}
	_, done := op.post("/act", forms(conf)[0])
	if !strings.Contains(done, "<b>2</b> of 2 done") {
		t.Fatalf("the bulk retry's result\n%s", done)
	}
	for _, id := range s.failed {
		if it, _ := s.st.Get(ctx, id); it.Status != ledger.StatusQueued {
			t.Errorf("row %s after the retry: %s, want queued", id, it.Status)
		}
	}

	// Cancel the sent row: deleted at the destination first.
	_, row = op.get("/outbox/-/PAY/pay/" + s.sentID[0])
	cancel := forms(row)[0]
	cancel.Set("action", "outbox.cancel")
	_, conf = op.post("/confirm", cancel)
	if !strings.Contains(conf, `id="will-delete"`) {
		t.Fatalf("cancelling a sent row: the confirmation does not say it deletes\n%s", conf)
	}
	if _, done = op.post("/act", forms(conf)[0]); !strings.Contains(done, "<b>1</b> of 1 done") {
		t.Fatalf("the cancel's result\n%s", done)
	}
	if it, _ := s.st.Get(ctx, s.sentID[0]); it.Status != ledger.StatusCancelled || len(s.dest.Items()) != 0 {
		t.Fatalf("the sent row cancelled: %s, %d items at the destination; want cancelled and deleted", it.Status, len(s.dest.Items()))
	}

	// The dead letter discarded, the conflict acknowledged.
	for _, a := range []struct{ page, action string }{{"/dlq/-/PAY/pay/1", "dlq.discard"}, {"/conflict/-/PAY/pay/1", "conflicts.ack"}} {
		_, page := op.get(a.page)
		f := forms(page)[0]
		f.Set("action", a.action)
		_, conf := op.post("/confirm", f)
		if _, done := op.post("/act", forms(conf)[0]); !strings.Contains(done, "<b>1</b> of 1 done") {
			t.Fatalf("%s: %s", a.action, done)
		}
	}
	h.Refresh(ctx)
	if _, body = op.get("/attention"); strings.Contains(body, "dead letter 1") || strings.Contains(body, "conflict 1") || strings.Contains(body, s.failed[0]) {
		t.Fatalf("the queue after the actions still lists them\n%s", body)
	}
	audit, err := s.st.AuditOf(ctx, s.sentID[0])
	if err != nil || len(audit) == 0 || audit[len(audit)-1].Who != "ada" || !strings.HasPrefix(audit[len(audit)-1].From, "console, client ") {
		t.Fatalf("the cancel's audit: %+v %v, want ada from the console", audit, err)
	}
}

// formWith is the first action form of body whose field has value.
func formWith(t *testing.T, body, field, value string) url.Values {
	t.Helper()
	for _, f := range forms(body) {
		if f.Get(field) == value {
			return f
		}
	}
	t.Fatalf("no form with %s=%s\n%s", field, value, body)
	return nil
}

// A row changed after its page was shown is not touched by the action
// taken on that page, and the result says it changed.
func TestARowChangedBehindThePageIsNotTouched(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	nc, js := consumertest.Connect(t, srv)
	s := newSite(t, nc, js, admin.Address{Stream: "PAY", Durable: "pay"})
	_, web := newConsole(t, nc, "/ops")
	op := newClient(t, web.URL+"/ops")
	op.signIn("ada", "ada-secret")
	ctx := context.Background()

	_, row := op.get("/outbox/-/PAY/pay/" + s.review[0])
	f := forms(row)[0]
	f.Set("action", "outbox.resolve-failed")
	_, conf := op.post("/confirm", f)
	// Behind the page's back, someone finds it at the destination.
	if _, err := s.st.Transition(ctx, s.review[0], ledger.ResolveSent, ledger.Params{ExternalID: "x-1", Audit: &ledger.Audit{Who: "bob", From: "cli"}}); err != nil {
		t.Fatal(err)
	}
	code, done := op.post("/act", forms(conf)[0])
	if code != http.StatusOK || !strings.Contains(done, "Changed since you saw it: not touched") || !strings.Contains(done, "<b>0</b> of 1 done") {
		t.Fatalf("acting on a changed row: %d\n%s", code, done)
	}
	if it, _ := s.st.Get(ctx, s.review[0]); it.Status != ledger.StatusSent {
		t.Fatalf("the changed row: %s, want sent as the other person left it", it.Status)
	}
}

// After SignInFailures wrong secrets from one address, even the right one
// is refused (429) for SignInWindow: a password is not guessed at speed.
func TestSignInIsThrottledAfterFailures(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	nc, _ := consumertest.Connect(t, srv)
	_, web := newConsole(t, nc, "")
	c := newClient(t, web.URL)
	for i := range console.SignInFailures {
		if code, _ := c.post("/signin", url.Values{"name": {"ada"}, "secret": {"guess"}}); code != http.StatusUnauthorized {
			t.Fatalf("wrong secret %d: %d, want 401", i, code)
		}
	}
	if code, _ := c.post("/signin", url.Values{"name": {"ada"}, "secret": {"ada-secret"}}); code != http.StatusTooManyRequests {
		t.Fatalf("the right secret after %d failures: %d, want 429", console.SignInFailures, code)
	}
}

// A dead letter requeued from its page: published again to its stream
// with its own id, its record closed, audited with the signed-in name.
func TestADeadLetterIsRequeuedFromItsPage(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	nc, js := consumertest.Connect(t, srv)
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "S", Subjects: []string{"ev.>"}, Duplicates: 200 * time.Millisecond})
	for i := range 90 { // the dead letter's own message at seq 90: the stream it came from
		subject, id := "ev.x", fmt.Sprint("x-", i)
		if i == 89 {
			subject, id = "ev.bad", "dl-1"
		}
		if _, err := js.Publish(t.Context(), subject, []byte("{}"), jetstream.WithMsgID(id)); err != nil {
			t.Fatal(err)
		}
	}
	s := newSite(t, nc, js, admin.Address{Stream: "PAY", Durable: "pay"})
	_, web := newConsole(t, nc, "")
	op := newClient(t, web.URL)
	op.signIn("ada", "ada-secret")
	_, page := op.get("/dlq/-/PAY/pay/1")
	f := forms(page)[0]
	f.Set("action", "dlq.requeue")
	_, conf := op.post("/confirm", f)
	if !strings.Contains(conf, "published again to its stream") {
		t.Fatalf("the requeue's confirmation\n%s", conf)
	}
	// Refused (and kept) while the id is inside the stream's duplicate window.
	consumertest.Eventually(t, time.Minute, "the requeue done", func() bool {
		_, done := op.post("/act", forms(conf)[0])
		return strings.Contains(done, "<b>1</b> of 1 done")
	})
	ctx := context.Background()
	str, _ := js.Stream(ctx, "S")
	if info, _ := str.Info(ctx); info.State.LastSeq != 91 {
		t.Fatalf("the stream after the requeue: last %d, want 91 (one copy)", info.State.LastSeq)
	}
	if _, err := s.st.DeadLetter(ctx, 1); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("the dead letter after its requeue: %v, want gone", err)
	}
	m, err := str.GetLastMsgForSubject(ctx, "ev.bad")
	if err != nil || m.Header.Get(jetstream.MsgIDHeader) != "dl-1" {
		t.Fatalf("the requeued message: %v", err)
	}
	if rec, err := s.st.AuditOf(ctx, "dead letter 1"); err != nil || len(rec) != 1 || rec[0].Who != "ada" {
		t.Fatalf("the requeue's audit: %+v %v", rec, err)
	}
}

// A page's own update (console.js) without a session is 401, not the
// sign-in page to put inside the page; the script then reloads.
func TestAnUpdateWithoutASessionIs401(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	nc, _ := consumertest.Connect(t, srv)
	_, web := newConsole(t, nc, "")
	req, _ := http.NewRequest(http.MethodGet, web.URL+"/attention", nil)
	req.Header.Set("X-Console-Fragment", "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Body.Close(); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an update without a session: %d, want 401", resp.StatusCode)
	}
}
