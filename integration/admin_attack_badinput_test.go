package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Promise 6: bad input to the admin API never changes anything and gets a
// clear error: malformed JSON, wrong types, missing fields, an action
// without seen, a bogus status, ids and a status together, a list too big
// for a message, a huge list of unknown ids, a huge list repeating one real
// id (changed once, recorded once), an unknown endpoint, a wrong partition
// through the CLI.
func TestAdminAttackBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	const n = 20
	w, run, db, addr := reviewWorld(t, n)
	nc := w.js.Conn()
	raw := func(endpoint string, body []byte) (code, desc string, data []byte, err error) {
		msg, err := nc.Request(addr.Subject(endpoint), body, 30*time.Second)
		if err != nil {
			return "", "", nil, err
		}
		return msg.Header.Get(micro.ErrorCodeHeader), msg.Header.Get(micro.ErrorHeader), msg.Data, nil
	}
	var dry admin.Acted
	if err := callAdmin(nc, addr, "outbox.resolve", admin.Act{Who: "probe", Status: ledger.StatusReview, As: ledger.StatusFailed, DryRun: true}, &dry, 10*time.Second); err != nil || dry.Matched != n {
		t.Fatalf("the dry run: %v %+v", err, dry)
	}
	seen := dry.Seen.Format(time.RFC3339Nano)
	for _, c := range []struct{ endpoint, body, want string }{
		{"outbox.resolve", `{"who":`, "400"},
		{"outbox.resolve", `not json at all`, "400"},
		{"outbox.resolve", `{"who":"x","ids":"` + dry.IDs[0] + `"}`, "400"},
		{"outbox.resolve", `{"who":"x","ids":["` + dry.IDs[0] + `"],"seen":"` + seen + `","as":"failed"} trailing`, "400"},
		{"outbox.resolve", `{"who":"x","ids":["` + dry.IDs[0] + `"],"as":"failed"}`, "400"},                          // no seen
		{"outbox.resolve", `{"ids":["` + dry.IDs[0] + `"],"seen":"` + seen + `","as":"failed"}`, "400"},              // no who
		{"outbox.resolve", `{"who":"x","ids":["` + dry.IDs[0] + `"],"seen":"` + seen + `","as":"cancelled"}`, "400"}, // bad as
		{"outbox.resolve", `{"who":"x","ids":["` + dry.IDs[0] + `"],"seen":"` + seen + `","as":"sent"}`, "400"},      // sent without external id
		{"outbox.resolve", `{"who":"x","ids":["` + dry.IDs[0] + `"],"status":"review","seen":"` + seen + `","as":"failed"}`, "400"},
		{"outbox.resolve", `{"who":"x","before":"2030-01-01T00:00:00Z","ids":["` + dry.IDs[0] + `"],"seen":"` + seen + `","as":"failed"}`, "400"},
		{"outbox.resolve", `{"who":"x","status":"bogus","dry_run":true,"as":"failed"}`, "400"},
		{"outbox.retry", `{"who":"x","status":"review; DROP TABLE outbox","seen":"` + seen + `"}`, "400"},
		{"outbox.resolve", `null`, "400"},
		{"outbox.resolve", `[]`, "400"},
		{"outbox.list", `{"limit":5000}`, "400"},
		{"outbox.list", `{"limit":-1}`, "400"},
		{"outbox.list", `{"limit":1e30}`, "400"},
		{"outbox.list", `{"status":"bogus"}`, "400"},
		{"outbox.show", `{}`, "400"},
		{"outbox.show", `{"id":"NOPE"}`, "404"},
		{"dlq.discard", `{"id":-1,"who":"x"}`, "400"},
		{"dlq.discard", `{"id":999,"who":"x"}`, "404"},
		{"dlq.discard", `{"id":1}`, "400"},
		{"conflicts.ack", `{"id":"1","who":"x"}`, "400"},
		{"consumers.forget", `{"stream":"EV","durable":"jetledger","who":"x"}`, "409"},
	} {
		code, desc, data, err := raw(c.endpoint, []byte(c.body))
		if err != nil || code != c.want || desc == "" {
			t.Errorf("%s %s: code %q (%q) %s %v, want %s with a reason", c.endpoint, c.body, code, desc, data, err, c.want)
		} else {
			t.Logf("%s %.60s → %s %s", c.endpoint, c.body, code, desc)
		}
	}
	// An unknown endpoint: nothing answers; the error should say so clearly.
	err := callAdmin(nc, addr, "outbox.delete", admin.Act{Who: "x", IDs: dry.IDs}, nil, 5*time.Second)
	t.Logf("an unknown endpoint: %v", err)
	if err == nil {
		t.Errorf("an unknown endpoint answered")
	}
	// Too big for one message: refused by the client, nothing sent.
	big := make([]string, 60_000)
	for i := range big {
		big[i] = fmt.Sprintf("01JZZZZZZZZZZZZZZZZZ%06d", i) // unknown, each its own
	}
	err = callAdmin(nc, addr, "outbox.resolve", admin.Act{Who: "big", IDs: big, Seen: dry.Seen, As: ledger.StatusFailed}, nil, 30*time.Second)
	if !errors.Is(err, nats.ErrMaxPayload) {
		t.Errorf("60000 ids: %v, want the client's max payload error", err)
	}
	// One real id 5000 times: changed once, recorded once.
	same := make([]string, 5_000)
	for i := range same {
		same[i] = dry.IDs[0]
	}
	var out admin.Acted
	err = callAdmin(nc, addr, "outbox.resolve", admin.Act{Who: "repeat", IDs: same, Seen: dry.Seen, As: ledger.StatusFailed}, &out, time.Minute)
	if err != nil || len(out.Done) != 1 || out.SkippedCount != 0 { // the repeats are one row
		t.Errorf("one id 5000 times: %v, done %d skipped %d", err, len(out.Done), out.SkippedCount)
	}
	if got := auditInvariants(t, db, "repeat", "failed"); got != 1 {
		t.Errorf("one id 5000 times: %d records, want 1", got)
	}
	// 30000 ids, over ActLimit: refused (400). 20000 unknown ids: each
	// skipped as not found, answered within 30s (the ledger takes ~0.1ms
	// a row), the first SkipsMax said with why (all 20000 would not fit
	// a message: the answer was lost and the caller waited, before).
	var e *admin.Error
	if err := callAdmin(nc, addr, "outbox.resolve", admin.Act{Who: "unknown", IDs: big[:30_000], Seen: dry.Seen, As: ledger.StatusFailed}, nil, 30*time.Second); !errors.As(err, &e) || e.Code != admin.CodeBadRequest {
		t.Errorf("30000 ids: %v, want %s", err, admin.CodeBadRequest)
	}
	start := time.Now()
	out = admin.Acted{}
	err = callAdmin(nc, addr, "outbox.resolve", admin.Act{Who: "unknown", IDs: big[:admin.ActLimit], Seen: dry.Seen, As: ledger.StatusFailed}, &out, 30*time.Second)
	if err != nil || len(out.Done) != 0 || out.SkippedCount != admin.ActLimit || len(out.Skipped) != admin.SkipsMax {
		t.Errorf("20000 unknown ids: no answer (%v) after %v, done %d skipped %d (%d said)", err, time.Since(start).Round(time.Millisecond), len(out.Done), out.SkippedCount, len(out.Skipped))
	}
	// The same through the CLI: 15000 unknown ids to retry; it must exit
	// (1, each skipped said), not wait for ever.
	args := append([]string{"outbox", "retry", "--nats", w.srv.ClientURL(), "--who", "cli-unknown"}, big[:15_000]...)
	p := start_(t, args...)
	select {
	case <-p.done:
		if code := p.wait(0); code != 1 || !strings.Contains(p.output(), "skipped") {
			t.Errorf("a retry of 15000 unknown ids through the CLI: exit %d\n%.2000s", code, p.output())
		}
	case <-time.After(time.Minute):
		t.Errorf("a retry of 15000 unknown ids through the CLI has not exited after a minute (its output: %.500q)", p.output())
		p.kill()
	}
	if n := count(t, db, `SELECT count(*) FROM jetledger_audit WHERE who != 'repeat'`); n != 0 {
		t.Errorf("bad input left %d records", n)
	}
	if got := count(t, db, `SELECT count(*) FROM outbox WHERE status = 'review'`); got != n-1 {
		t.Errorf("%d rows in review, want %d: bad input changed rows", got, n-1)
	}
	// The CLI asked for a partition no run serves, or a bogus date.
	url := w.srv.ClientURL()
	if out, code := cli(t, "outbox", "list", "--nats", url, "--partition", "7"); code == 0 || !strings.Contains(out, "partition 7") {
		t.Errorf("a wrong partition: exit %d\n%s", code, out)
	}
	if out, code := cli(t, "outbox", "resolve", "--nats", url, "--status", "review", "--before", "yesterday", "--as", "failed", "--all"); code == 0 || !strings.Contains(out, "--before") {
		t.Errorf("a bogus --before: exit %d\n%s", code, out)
	}
	if got := count(t, db, `SELECT count(*) FROM outbox WHERE status = 'review'`); got != n-1 {
		t.Errorf("%d rows in review after the CLI's bad input, want %d", got, n-1)
	}
	var st admin.Status
	if err := callAdmin(nc, addr, "status", nil, &st, 10*time.Second); err != nil {
		t.Errorf("status after the bad input: %v", err)
	}
	b, _ := json.Marshal(st.Outbox)
	t.Logf("status after: %s", b)
	run.signal(syscall.SIGTERM)
	if code := run.wait(time.Minute); code != 0 {
		t.Fatalf("run exited %d", code)
	}
}

// start_ starts a CLI command without waiting for it.
func start_(t *testing.T, args ...string) *proc {
	t.Helper()
	return start(t, nil, args...)
}
