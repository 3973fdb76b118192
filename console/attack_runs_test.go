package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/admin/admintest"
	"github.com/jetledger/jetledger/console"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// detachedSite is newSite served over a connection of its own, closed at
// once: its ledger is filled, and the test serves its API as it likes.
func detachedSite(t *testing.T, srvURL string, addr admin.Address) *site {
	t.Helper()
	nc, err := nats.Connect(srvURL)
	if err != nil {
		t.Fatal(err)
	}
	js := mustJS(t, nc)
	s := newSite(t, nc, js, addr)
	nc.Close()
	return s
}

// serveSite serves s's API over a connection of its own; stop closes it
// (as a run that stops or dies).
func serveSite(t *testing.T, srvURL string, s *site, canceller admin.Canceller) (stop func()) {
	t.Helper()
	nc, err := nats.Connect(srvURL)
	if err != nil {
		t.Fatal(err)
	}
	if canceller == nil {
		canceller = admintest.SinkCanceller{Store: s.st, Sink: mustSink(t, s)}
	}
	srv, err := admin.Serve(admin.Config{Conn: nc, Store: s.st, JetStream: mustJS(t, nc), Address: s.addr, Canceller: canceller, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil { // its subscriptions at the server before anyone asks
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() { once.Do(func() { srv.Stop(); nc.Close() }) }
	t.Cleanup(stop)
	return stop
}

func mustSink(t *testing.T, s *site) *webhook.Sink {
	t.Helper()
	sink, err := webhook.New(webhook.Config{URL: s.dest.URL(), DeleteURL: s.dest.DeleteURL()})
	if err != nil {
		t.Fatal(err)
	}
	return sink
}

// Two operators (two sessions) confirm the same bulk retry and the same
// cancel of a sent row, and both say yes at once: each row is changed
// once, the other's result says which it left; the audit has one record
// per row.
func TestAttackTwoOperatorsActAtOnce(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	nc, js := consumertest.Connect(t, srv)
	s := newSite(t, nc, js, admin.Address{Stream: "PAY", Durable: "pay"})
	// Two consoles, as two people may run.
	ac1 := newAttackConsole(t, nc, "", true, false)
	ac2 := newAttackConsole(t, nc, "", true, false)
	op1, _ := opClient(t, ac1.srv.URL)
	op2, _ := opClient(t, ac2.srv.URL)
	ctx := context.Background()

	confirm := func(op *client, form url.Values) url.Values {
		t.Helper()
		_, conf := op.post("/confirm", form)
		f := forms(conf)
		if len(f) == 0 {
			t.Fatalf("no go-ahead form\n%s", conf)
		}
		return f[0]
	}
	bulk := func(op *client) url.Values {
		_, q := op.get("/attention")
		f := formWith(t, q, "status", "failed")
		f.Set("action", "outbox.retry")
		return confirm(op, f)
	}
	cancel := func(op *client) url.Values {
		_, row := op.get("/outbox/-/PAY/pay/" + s.sentID[0])
		f := forms(row)[0]
		f.Set("action", "outbox.cancel")
		return confirm(op, f)
	}
	for _, tc := range []struct {
		name string
		make func(*client) url.Values
		rows []string
	}{{"bulk retry", bulk, s.failed}, {"cancel of a sent row", cancel, s.sentID}} {
		f1, f2 := tc.make(op1), tc.make(op2)
		var wg sync.WaitGroup
		var done [2]string
		for i, p := range []struct {
			op *client
			f  url.Values
		}{{op1, f1}, {op2, f2}} {
			wg.Go(func() { _, done[i] = p.op.post("/act", p.f) })
		}
		wg.Wait()
		total := 0
		for _, d := range done {
			var n int
			fmt.Sscanf(between(d, `<p id="done"><b>`, "</b>"), "%d", &n)
			total += n
		}
		if total != len(tc.rows) {
			t.Errorf("%s: %d rows done in all by the two, want %d\n%s\n%s", tc.name, total, len(tc.rows), between(done[0], "<main", "</main>"), between(done[1], "<main", "</main>"))
		}
		for _, d := range done {
			if !strings.Contains(d, "<b>0</b> of") && !strings.Contains(d, fmt.Sprintf("<b>%d</b> of", len(tc.rows))) {
				t.Logf("%s: a result split the rows: %s", tc.name, between(d, `<p id="done">`, "</p>"))
			}
		}
		for _, id := range tc.rows {
			audit, err := s.st.AuditOf(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, a := range audit {
				if a.Who == "ada" {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%s: row %s has %d audit records by ada, want 1: %+v", tc.name, id, n, audit)
			}
		}
	}
	if n := len(s.dest.Items()); n != 0 {
		t.Errorf("the destination holds %d after the cancel", n)
	}
}

// The run stops (or dies) while the console is open: the row's page and
// the go-ahead answer at once, explained; the watcher's next read says
// the partition no longer answers and keeps its rows' need visible (rule
// 17: nothing waits on a person silently); when the run comes back the
// console sees it again, and the go-ahead given before acts.
func TestAttackTheRunStopsWhileThePageIsOpen(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	nc, _ := consumertest.Connect(t, srv)
	s := detachedSite(t, srv.ClientURL(), admin.Address{Stream: "PAY", Durable: "pay"})
	stop := serveSite(t, srv.ClientURL(), s, nil)
	ac := newAttackConsole(t, nc, "", true, false)
	op, _ := opClient(t, ac.srv.URL)
	_, row := op.get("/outbox/-/PAY/pay/" + s.failed[0])
	f := forms(row)[0]
	f.Set("action", "outbox.retry")
	_, conf := op.post("/confirm", f)
	goAhead := forms(conf)[0]

	stop()
	began := time.Now()
	code, body := op.post("/act", goAhead)
	if took := time.Since(began); took > 5*time.Second || code != http.StatusConflict || !strings.Contains(body, "No run answers") {
		t.Errorf("the go-ahead with the run stopped: %d after %s\n%s", code, took, between(body, "<main", "</main>"))
	}
	began = time.Now()
	code, body = op.get("/outbox/-/PAY/pay/" + s.failed[1])
	if took := time.Since(began); took > 5*time.Second || code != http.StatusBadGateway || !strings.Contains(body, "No run answers") {
		t.Errorf("a row's page with the run stopped: %d after %s\n%s", code, took, between(body, "<main", "</main>"))
	}
	ac.h.Refresh(context.Background())
	_, sites := op.get("/")
	_, queue := op.get("/attention")
	t.Logf("the sites with the run stopped:\n%s", between(sites, `<tbody>`, "</tbody>"))
	if !strings.Contains(sites, "PAY/pay") || !strings.Contains(queue, "PAY/pay") {
		t.Errorf("the partition whose run stopped is gone from the console: the sites page says nothing of PAY/pay, the queue neither")
	}

	serveSite(t, srv.ClientURL(), s, nil)
	ac.h.Refresh(context.Background())
	if _, queue = op.get("/attention"); !strings.Contains(queue, s.failed[0]) {
		_, sites = op.get("/")
		t.Errorf("the run back: the queue lacks its rows\n%s\n%s", between(sites, "<main", "</main>"), between(queue, "<tbody>", "</tbody>"))
	}
	if _, body = op.post("/act", goAhead); !strings.Contains(body, "<b>1</b> of 1 done") {
		t.Errorf("the go-ahead given before, the run back: %s", between(body, "<main", "</main>"))
	}
}

// A run whose API is subscribed but does not answer (a paused process, a
// ledger stuck on its disk): the watcher's read of every site waits for it
// until the whole refresh's deadline (Refresh + DiscoverWait + 30s), so
// every page is that stale; a row's page waits callTimeout (10s); the
// go-ahead waits 5 minutes. Expected: each call bounded by seconds, the
// other sites read on time.
func TestAttackAHungRunDoesNotStallTheConsole(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	nc, js := consumertest.Connect(t, srv)
	quietSite(t, nc, js, admin.Address{Stream: "OK", Durable: "ok"})
	hung := admin.Address{Stream: "HUNG", Durable: "hung"}
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	svc, err := micro.AddService(nc, micro.Config{Name: admin.ServiceName, Version: admin.APIVersion, QueueGroupDisabled: true,
		Metadata: map[string]string{"site": "", "stream": hung.Stream, "durable": hung.Durable, "role": "owner", "version": "test"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Stop() })
	for _, e := range []string{"status", "outbox.show", "outbox.retry"} {
		if err := svc.AddEndpoint(strings.ReplaceAll(e, ".", "_"), micro.HandlerFunc(func(micro.Request) { <-hang }), micro.WithEndpointSubject(hung.Subject(e))); err != nil {
			t.Fatal(err)
		}
	}
	h, err := console.NewHandler(&console.Options{Conn: nc, Refresh: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 25*time.Second)
	defer cancel()
	began := time.Now()
	h.Refresh(ctx)
	took := time.Since(began)
	t.Logf("a refresh with one hung run took %s", took)
	if took > 15*time.Second {
		t.Errorf("one hung run held the whole refresh %s", took)
	}
}

// A partition whose only answering API is a standby's: shown "no owner"
// with its standby counted, its need in the queue; its row's page and an
// action explain that no run answers; nothing is asked of the standby.
func TestAttackAStandbyOnlyPartition(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	nc, js := consumertest.Connect(t, srv)
	s := detachedSite(t, srv.ClientURL(), admin.Address{Stream: "PAY", Durable: "pay"})
	sb, err := admin.Serve(admin.Config{Conn: nc, Store: s.st, JetStream: js, Address: s.addr, Version: "test",
		Standby: func(context.Context) (string, error) { return "", nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Stop() })
	ac := newAttackConsole(t, nc, "", true, false)
	op, token := opClient(t, ac.srv.URL)
	_, sites := op.get("/")
	if !strings.Contains(sites, "PAY/pay: <b>no owner</b>, 1 standby") {
		t.Errorf("the sites page\n%s", between(sites, "<tbody>", "</tbody>"))
	}
	_, queue := op.get("/attention")
	if !strings.Contains(queue, "no_owner") {
		t.Errorf("the queue lacks the partition with no owner\n%s", between(queue, "<tbody>", "</tbody>"))
	}
	if code, body := op.get("/outbox/-/PAY/pay/" + s.failed[0]); code != http.StatusBadGateway || !strings.Contains(body, "No run answers") {
		t.Errorf("a row of it: %d\n%s", code, between(body, "<main", "</main>"))
	}
	f := url.Values{"token": {token}, "site": {"-"}, "stream": {"PAY"}, "durable": {"pay"}, "action": {"outbox.retry"}, "id": {s.failed[0]}, "seen": {time.Now().UTC().Format(time.RFC3339Nano)}}
	if code, body := op.post("/act", f); code != http.StatusConflict || !strings.Contains(body, "No run answers") {
		t.Errorf("an action on it: %d\n%s", code, between(body, "<main", "</main>"))
	}
	if it, _ := s.st.Get(context.Background(), s.failed[0]); it.Status != ledger.StatusFailed {
		t.Fatalf("the standby's copy changed: %s", it.Status)
	}
}

// gatedCanceller waits for gate before cancelling: the owner is slower
// than another answer.
type gatedCanceller struct {
	admin.Canceller
	gate chan struct{}
}

func (g gatedCanceller) CancelAs(ctx context.Context, id string, p ledger.Params) (outbox.CancelOutcome, error) {
	<-g.gate
	return g.Canceller.CancelAs(ctx, id, p)
}

// An owner fenced after a takeover still holds its subscriptions (the
// admin API takes no queue group for that reason) and refuses an action
// with 421 at once, while the new owner does it: the first answer wins,
// so the console says "this run no longer owns the partition", 0 done,
// while the row was cancelled (deleted at the destination). Expected: a
// result that says what was done, or at least not that nothing was.
func TestAttackAFencedOwnerAnsweringFirstHidesWhatWasDone(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	nc, _ := consumertest.Connect(t, srv)
	s := detachedSite(t, srv.ClientURL(), admin.Address{Stream: "PAY", Durable: "pay"})
	gate := make(chan struct{})
	serveSite(t, srv.ClientURL(), s, gatedCanceller{admintest.SinkCanceller{Store: s.st, Sink: mustSink(t, s)}, gate})
	ac := newAttackConsole(t, nc, "", true, false)
	op, _ := opClient(t, ac.srv.URL)
	_, row := op.get("/outbox/-/PAY/pay/" + s.sentID[0])
	f := forms(row)[0]
	f.Set("action", "outbox.cancel")
	_, conf := op.post("/confirm", f)
	goAhead := forms(conf)[0]

	// The fenced old owner: refuses at once, then lets the new owner go on.
	fenced, err := nc.Subscribe(s.addr.Subject("outbox.cancel"), func(m *nats.Msg) {
		r := nats.NewMsg(m.Reply)
		r.Header.Set(micro.ErrorCodeHeader, admin.CodeNotOwner)
		r.Header.Set(micro.ErrorHeader, "ledger: not the changelog's owner: fenced")
		nc.PublishMsg(r) //nolint:errcheck // the test reads the console's answer
		nc.Flush()       //nolint:errcheck
		close(gate)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fenced.Unsubscribe() })
	code, body := op.post("/act", goAhead)
	result := between(body, "<main", "</main>")
	consumertest.Eventually(t, 30*time.Second, "the new owner's cancel done", func() bool {
		it, _ := s.st.Get(context.Background(), s.sentID[0])
		return it.Status == ledger.StatusCancelled
	})
	t.Logf("the result (%d), the row cancelled and deleted at the destination (%d items left):\n%s", code, len(s.dest.Items()), result)
	if strings.Contains(result, "<b>0</b> of") {
		t.Errorf("the result says nothing was done; the row was cancelled and deleted at the destination")
	}
}

// More than 10 000 rows by a filter (the admin API takes 20 000): the
// confirmation carries every id as its own form field, and net/http
// refuses a form of more than 10 000 fields (urlmaxqueryparams), so the
// go-ahead is refused as "the form's token is not this session's".
func TestAttackABulkActionOnMoreThanTenThousandRows(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	nc, js := consumertest.Connect(t, srv)
	// 10 050 transactions, one per row: unsynced, so that a loaded CI host
	// takes seconds, not minutes (what is tested is the form, not the disk).
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{Synchronous: "OFF"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srvAPI, err := admin.Serve(admin.Config{Conn: nc, Store: st, JetStream: js, Address: admin.Address{Stream: "PAY", Durable: "pay"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srvAPI.Stop() })
	const n = 10_050
	d := ledger.Delivery{MessageID: "many", Stream: "S", Sequence: 1, Subject: "ev", Data: []byte("{}"), Delivered: 1}
	if _, err := st.ApplyBatch(context.Background(), []ledger.Delivery{d}, func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		for range n {
			if _, err := tx.Enqueue(ctx, "webhook", d.Data); err != nil {
				return err
			}
		}
		return nil
	}, ledger.Budget{}); err != nil {
		t.Fatal(err)
	}
	ac := newAttackConsole(t, nc, "", true, false)
	op, token := opClient(t, ac.srv.URL)
	op.http.Timeout = 5 * time.Minute // the action's own bound
	_, conf := op.post("/confirm", url.Values{"token": {token}, "site": {"-"}, "stream": {"PAY"}, "durable": {"pay"}, "action": {"outbox.cancel"}, "status": {"queued"}})
	if !strings.Contains(conf, fmt.Sprintf("<b>%d</b> row(s)", n)) {
		t.Fatalf("the confirmation\n%s", between(conf, "<main", "</main>"))
	}
	f := forms(conf)[0]
	code, body := op.post("/act", f)
	if code != http.StatusOK || !strings.Contains(body, fmt.Sprintf("<b>%d</b> of %d done", n, n)) {
		t.Errorf("the go-ahead on %d rows: %d %.300s", n, code, between(body, "<main", "</main>"))
	}
}

func mustJS(t *testing.T, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}
