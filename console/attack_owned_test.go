package console_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/natsconn"
	"github.com/jetledger/jetledger/service"
	"github.com/jetledger/jetledger/stream"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ownedRun is one host's run of the owned partition S/d.
type ownedRun struct {
	cfg  service.Config
	stop context.CancelFunc
	done chan error
}

func startOwned(t *testing.T, url, name string, dest *webhooktest.Destination) *ownedRun {
	t.Helper()
	cfg := service.Config{DB: filepath.Join(t.TempDir(), "l.db"), NATS: &natsconn.Config{URL: url}, Logger: slog.New(slog.DiscardHandler),
		Stream:   stream.Config{Name: "S", Subjects: []string{"s.>"}, Limits: stream.Limits{MaxAge: time.Hour}},
		Consumer: consumer.Config{Durable: "d", Plan: ackwait.Plan{Deadline: 5 * time.Second, BatchSize: 10}},
		Webhook:  &webhook.Config{URL: dest.URL(), DeleteURL: dest.DeleteURL()},
		Outbox:   service.Outbox{MaxAttempts: 1},
		Owner:    &service.Owner{Name: name, Standby: true}}
	ctx, stop := context.WithCancel(t.Context())
	r := &ownedRun{cfg: cfg, stop: stop, done: make(chan error, 1)}
	go func() { r.done <- service.Run(ctx, cfg) }()
	t.Cleanup(func() { stop(); <-r.done })
	return r
}

// roles are the roles of the APIs that answer at S/d.
func roles(t *testing.T, nc *nats.Conn) []string {
	found, err := admin.Discover(t.Context(), nc, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range found {
		if f.Stream == "S" && f.Durable == "d" {
			out = append(out, f.Role)
		}
	}
	return out
}

// An owned partition's owner stops between the confirmation and the
// go-ahead, and its standby takes over: the go-ahead, given while no run
// owns it, is refused and explained, changing nothing; given again once
// the standby owns it, it acts on the new owner's ledger; no row is
// retried twice, and the result says what was left and why.
func TestAttackTheOwnerChangesBetweenConfirmAndAct(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	nc, js := consumertest.Connect(t, srv)
	dest := webhooktest.NewDestination(t, false)
	dest.FailWith(http.StatusUnprocessableEntity) // every send rejected: the rows fail
	a := startOwned(t, srv.ClientURL(), "a", dest)
	consumertest.Eventually(t, time.Minute, "a owns S/d", func() bool { return strings.Join(roles(t, nc), ",") == "owner" })
	b := startOwned(t, srv.ClientURL(), "b", dest)
	consumertest.Eventually(t, time.Minute, "b stands by", func() bool { return strings.Join(roles(t, nc), ",") == "owner,standby" })
	for i := range 3 {
		m := nats.NewMsg("s.x")
		m.Data = fmt.Appendf(nil, `{"n":%d}`, i)
		m.Header.Set(jetstream.MsgIDHeader, fmt.Sprint("m-", i))
		consumertest.Eventually(t, time.Minute, "a publish", func() bool { _, err := js.PublishMsg(t.Context(), m); return err == nil })
	}
	ac := newAttackConsole(t, nc, "", true, false)
	op, _ := opClient(t, ac.srv.URL)
	var queue string
	consumertest.Eventually(t, time.Minute, "3 failed rows in the queue", func() bool {
		ac.h.Refresh(t.Context())
		_, queue = op.get("/attention")
		return strings.Contains(queue, "3 failed at - S/d")
	})
	f := formWith(t, queue, "status", "failed")
	f.Set("action", "outbox.retry")
	_, conf := op.post("/confirm", f)
	if !strings.Contains(conf, "<b>3</b> row(s)") {
		t.Fatalf("the confirmation\n%s", between(conf, "<main", "</main>"))
	}
	goAhead := forms(conf)[0]
	ids := strings.Fields(goAhead.Get("ids")) // the confirmation carries them in one field

	a.stop()
	if err := <-a.done; err != nil {
		t.Fatalf("a's run: %v", err)
	}
	a.done <- nil // for the cleanup
	code, body := op.post("/act", goAhead)
	t.Logf("the go-ahead, a stopped: %d %s", code, strings.TrimSpace(between(between(body, "<main", "</main>"), `<section`, "</section>")))
	if code == http.StatusOK && !strings.Contains(body, "<b>3</b> of 3 done") && !strings.Contains(body, "Changed since") {
		t.Errorf("the go-ahead with a stopped: %d\n%s", code, between(body, "<main", "</main>"))
	}
	consumertest.Eventually(t, 2*time.Minute, "b owns S/d", func() bool { return strings.Join(roles(t, nc), ",") == "owner" })
	code, body = op.post("/act", goAhead)
	result := between(between(body, "<main", "</main>"), `<section`, "</section>")
	t.Logf("the go-ahead, b owning: %d %s", code, strings.TrimSpace(result))
	// Each row: retried at most once by ada, on b's ledger.
	retried := 0
	for _, id := range ids {
		var row admin.Row
		if err := admin.Call(t.Context(), nc, admin.Address{Stream: "S", Durable: "d"}, "outbox.show", admin.OutboxShow{ID: id}, &row); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, h := range row.History {
			if h.Who == "ada" {
				n++
			}
		}
		if n > 1 {
			t.Errorf("row %s retried %d times: %+v", id, n, row.History)
		}
		retried += n
		if row.Status != ledger.StatusFailed && row.Status != ledger.StatusQueued && row.Status != ledger.StatusSending {
			t.Errorf("row %s: %s", id, row.Status)
		}
	}
	t.Logf("rows retried on b's ledger: %d of %d", retried, len(ids))
	if retried == 0 && strings.Contains(result, "Changed since you saw it") {
		attackOpen(t, "the new owner's copy dates its rows by its own apply: every row is reported changed though no one changed it")
		t.Errorf("after the takeover every row is reported 'changed since you saw it', none retried: %s", result)
	}
	if retried != 3 && !strings.Contains(result, "Changed since") {
		t.Errorf("%d of 3 retried, and the result does not say why: %s", retried, result)
	}
	// The same go-ahead again (a double click, a reload): nothing more.
	_, body = op.post("/act", goAhead)
	if !strings.Contains(body, "<b>0</b> of 3 done") || strings.Count(body, "Changed since you saw it") != 3 {
		t.Errorf("the go-ahead given twice: %s", between(body, `<p id="done">`, "</table>"))
	}
	b.stop()
}
