package natssink_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/consumer/outbox/natssink"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is the ledger's clock, moved by the test.
type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *clock) add(d time.Duration) { c.ns.Add(int64(d)) }

type env struct {
	srv  *server.Server
	nc   *nats.Conn
	js   jetstream.JetStream
	st   *ledger.Store
	clk  *clock
	logs *consumertest.LogBuffer
}

// newEnv starts a server with a stream EFF on effects.> whose duplicate
// window is window, and a ledger.
func newEnv(t *testing.T, opts *server.Options, window time.Duration, cfg jetstream.StreamConfig) *env {
	t.Helper()
	srv := consumertest.RunServerWithOptions(t, opts)
	nc, js := consumertest.Connect(t, srv, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	cfg.Name, cfg.Subjects, cfg.Duplicates = "EFF", []string{"effects.>"}, window
	consumertest.CreateStream(t, js, cfg)
	clk := &clock{}
	clk.ns.Store(time.Now().UnixNano())
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &env{srv: srv, nc: nc, js: js, st: st, clk: clk, logs: &consumertest.LogBuffer{}}
}

func (e *env) sink(t *testing.T) *natssink.Sink {
	t.Helper()
	s, err := natssink.New(t.Context(), e.js, e.nc, natssink.Config{Subject: "effects.site1", Timeout: time.Second, Now: e.clk.now, Ledger: e.st})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// enqueue applies one message per id whose handler adds an outbox row for
// the nats sink; it returns the row ids.
func (e *env) enqueue(t *testing.T, ids ...string) []string {
	t.Helper()
	var rows []string
	for _, id := range ids {
		_, err := e.st.ApplyBatch(t.Context(), []ledger.Delivery{{MessageID: id, Stream: "IN", Sequence: 1, Subject: "in", Data: []byte(id)}},
			func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
				row, err := tx.Enqueue(ctx, natssink.NameDefault, []byte(`{"for":"`+d.MessageID+`"}`))
				rows = append(rows, row)
				return err
			}, ledger.Budget{})
		if err != nil {
			t.Fatal(err)
		}
	}
	return rows
}

func (e *env) run(t *testing.T, cfg outbox.Config) *outbox.Dispatcher {
	t.Helper()
	d, stop := e.start(t, cfg)
	t.Cleanup(stop)
	return d
}

// start runs a dispatcher until stop, which waits for it to return.
func (e *env) start(t *testing.T, cfg outbox.Config) (d *outbox.Dispatcher, stop func()) {
	t.Helper()
	cfg.PollInterval = 10 * time.Millisecond
	cfg.Backoff.Base = 10 * time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(e.logs, nil))
	d, err := outbox.New(e.st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	return d, func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("dispatcher: %v", err)
			}
		})
	}
}

func (e *env) status(t *testing.T, id string) ledger.OutboxItem {
	t.Helper()
	it, err := e.st.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return it
}

func (e *env) waitStatus(t *testing.T, id string, want ledger.Status) ledger.OutboxItem {
	t.Helper()
	consumertest.Eventually(t, 10*time.Second, "outbox row "+id+" "+string(want), func() bool { return e.status(t, id).Status == want })
	return e.status(t, id)
}

// stored is the Nats-Msg-Id of every message in EFF, in order.
func (e *env) stored(t *testing.T) []string {
	t.Helper()
	return e.storedIn(t, "EFF")
}

// storedIn is the Nats-Msg-Id of every message in stream name, in order.
func (e *env) storedIn(t *testing.T, name string) []string {
	t.Helper()
	s, err := e.js.Stream(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(t.Context(), seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.Header.Get(jetstream.MsgIDHeader))
	}
	return ids
}

func TestSendPublishesWithTheOutboxID(t *testing.T) {
	e := newEnv(t, &server.Options{}, 2*time.Minute, jetstream.StreamConfig{})
	sink := e.sink(t)
	rows := e.enqueue(t, "m1", "m2", "m3")
	e.run(t, outbox.Config{Sink: sink})
	for _, id := range rows {
		e.waitStatus(t, id, ledger.StatusSent)
	}
	// Four workers send in any order: each row once, its external id the
	// sequence of its own message.
	stored := e.stored(t)
	if len(stored) != len(rows) {
		t.Fatalf("stream holds ids %v, want the outbox ids %v once each", stored, rows)
	}
	seq := map[string]string{}
	for i, id := range stored {
		seq[id] = fmt.Sprintf("EFF:%d", i+1)
	}
	for _, id := range rows {
		if it := e.status(t, id); seq[id] == "" || it.ExternalID != seq[id] {
			t.Errorf("row %s external id %q, want %q (stream holds %v)", id, it.ExternalID, seq[id], stored)
		}
	}
	// A repeat inside the window is the stream's duplicate: sent, same copy.
	ext, err := sink.Send(t.Context(), e.status(t, rows[1]))
	if err != nil || ext != seq[rows[1]] {
		t.Fatalf("repeat of row 2: %q, %v; want %s", ext, err, seq[rows[1]])
	}
	if n := len(e.stored(t)); n != 3 {
		t.Fatalf("stream holds %d messages after a repeat, want 3", n)
	}
	s, _ := e.js.Stream(t.Context(), "EFF")
	first := e.status(t, stored[0])
	m, err := s.GetMsg(t.Context(), 1)
	if err != nil || m.Header.Get(natssink.HeaderMessageID) != first.MessageID || string(m.Data) != string(first.Payload) {
		t.Fatalf("message 1: %+v %v", m, err)
	}
}

// Rows wait queued while the server is gone, using up no attempts, and go
// out once after it is back.
func TestOutageKeepsRowsQueued(t *testing.T) {
	store := t.TempDir()
	e := newEnv(t, &server.Options{StoreDir: store}, 2*time.Minute, jetstream.StreamConfig{})
	port := e.srv.Addr().(*net.TCPAddr).Port
	sink := e.sink(t)
	before := e.enqueue(t, "m1")
	e.run(t, outbox.Config{Sink: sink, MaxAttempts: 2})
	e.waitStatus(t, before[0], ledger.StatusSent)

	e.srv.Shutdown()
	e.srv.WaitForShutdown()
	consumertest.Eventually(t, 5*time.Second, "the client to notice", func() bool { return e.nc.Status() != nats.CONNECTED })
	during := e.enqueue(t, "m2", "m3", "m4")
	consumertest.Eventually(t, 5*time.Second, "the dispatcher to log the outage", func() bool { return e.logs.Has("destination unreachable") })
	// With MaxAttempts 2 and 10ms backoff, rows claimed during the outage
	// would fail within a few rounds: give it fifty.
	deadline := time.Now().Add(50 * 10 * time.Millisecond)
	for time.Now().Before(deadline) {
		for _, id := range during {
			if it := e.status(t, id); it.Status != ledger.StatusQueued || it.Attempts != 0 {
				t.Fatalf("during the outage row %s is %s after %d attempts, want queued and untouched", id, it.Status, it.Attempts)
			}
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}

	consumertest.RunServerWithOptions(t, &server.Options{StoreDir: store, Port: port})
	for _, id := range during {
		if it := e.waitStatus(t, id, ledger.StatusSent); it.Attempts != 1 {
			t.Errorf("row %s sent after %d attempts, want 1", id, it.Attempts)
		}
	}
	if got, want := e.stored(t), append(before, during...); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("stream holds %v, want each row once: %v", got, want)
	}
	if !e.logs.Has("destination reachable again") {
		t.Error("no log line for the end of the outage")
	}
	// A restart keeps the stream's creation time: the same instance, which
	// can still prove what it never got.
	for _, id := range during {
		if got, was := e.status(t, id).SentTo.Instance, e.status(t, before[0]).SentTo.Instance; got != was || was == "" {
			t.Errorf("row %s sent to %q after the restart, %q before", id, got, was)
		}
	}
}

// A dead worker's row (lease expired mid-send) is sent again with the same
// id when the stream's window covers it, and goes to review when the window
// is too short for the dispatcher's horizon.
func TestWindowDecidesWhetherAnExpiredSendIsRepeated(t *testing.T) {
	for _, tc := range []struct {
		window time.Duration
		want   ledger.Status
	}{{2 * time.Minute, ledger.StatusSent}, {time.Second, ledger.StatusReview}} {
		t.Run(tc.window.String(), func(t *testing.T) {
			e := newEnv(t, &server.Options{}, tc.window, jetstream.StreamConfig{})
			rows := e.enqueue(t, "m1")
			sink := e.sink(t)
			to, err := sink.Position(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			// A worker that claimed the row, recording where its send goes
			// as every worker does, and died.
			if _, err := e.st.Transition(t.Context(), rows[0], ledger.Claim, ledger.Params{Worker: "dead", Lease: time.Second, SentTo: to}); err != nil {
				t.Fatal(err)
			}
			e.clk.add(2 * time.Second) // past the dead claim's lease
			e.run(t, outbox.Config{Sink: sink, Lease: 6 * time.Second})
			e.waitStatus(t, rows[0], tc.want)
			short := e.logs.Has("remembers an idempotency key for 1s")
			if short != (tc.want == ledger.StatusReview) {
				t.Errorf("short-window warning logged: %v", short)
			}
			if n, want := len(e.stored(t)), map[ledger.Status]int{ledger.StatusSent: 1, ledger.StatusReview: 0}[tc.want]; n != want {
				t.Errorf("stream holds %d messages, want %d", n, want)
			}
		})
	}
}

// A row made while the ledger's clock ran ahead looks younger than it is
// once the clock steps back: its age cannot tell whether the stream still
// remembers its id, so a send whose outcome is unknown is not repeated
// (review). Before, the negative age passed for "inside the window", and
// with the lease of a claim made ahead now expired at once, it was re-sent
// with the id after the window may have passed. (Found by a review of the
// lease fix, issue 20.)
func TestRowMadeAheadOfTheClockIsNotRepeatedByItsAge(t *testing.T) {
	e := newEnv(t, &server.Options{}, 2*time.Minute, jetstream.StreamConfig{})
	e.clk.add(2 * time.Hour) // the clock runs 2h ahead
	rows := e.enqueue(t, "m1")
	sink := e.sink(t)
	to, err := sink.Position(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Transition(t.Context(), rows[0], ledger.Claim, ledger.Params{Worker: "dead", Lease: time.Second, SentTo: to}); err != nil {
		t.Fatal(err)
	}
	// Corrected, and 3 minutes later (past the window) the dispatcher runs.
	e.clk.add(-2*time.Hour + 3*time.Minute)
	e.run(t, outbox.Config{Sink: sink, Lease: 6 * time.Second})
	e.waitStatus(t, rows[0], ledger.StatusReview)
	if n := len(e.stored(t)); n != 0 {
		t.Fatalf("stream holds %d messages, want 0: a row of unknown age was sent again", n)
	}
}

// A row whose earlier send may have landed is not sent again once it is
// older than the window: the stream would no longer drop the repeat.
func TestMaybeSentRowPastTheWindowGoesToReview(t *testing.T) {
	e := newEnv(t, &server.Options{}, time.Minute, jetstream.StreamConfig{})
	rows := e.enqueue(t, "m1")
	if _, err := e.st.Transition(t.Context(), rows[0], ledger.Claim, ledger.Params{Worker: "dead", Lease: time.Second}); err != nil {
		t.Fatal(err)
	}
	e.clk.add(2 * time.Minute) // the lease expires two minutes after the row was made
	e.run(t, outbox.Config{Sink: e.sink(t), Lease: 6 * time.Second, MaxAttempts: 1})
	it := e.waitStatus(t, rows[0], ledger.StatusReview)
	if n := len(e.stored(t)); n != 0 {
		t.Fatalf("stream holds %d messages, want 0: a row past the window was sent again", n)
	}
	if !strings.Contains(it.Error, "window") {
		t.Errorf("review reason %q does not say why", it.Error)
	}
}

func TestLookup(t *testing.T) {
	e := newEnv(t, &server.Options{}, 2*time.Minute, jetstream.StreamConfig{})
	sink := e.sink(t)
	rows := e.enqueue(t, "m1", "m2", "m3", "m4", "later", "m6", "later still")
	before, err := sink.Position(t.Context()) // as a claim records it
	if err != nil || before.Position != 0 {
		t.Fatalf("position of the empty stream: %+v, %v", before, err)
	}
	// m4's worker claims it there and dies before it sends.
	if _, err := e.st.Transition(t.Context(), rows[3], ledger.Claim, ledger.Params{Worker: "dead", Lease: time.Second, SentTo: before}); err != nil {
		t.Fatal(err)
	}
	for _, id := range rows[:3] {
		if _, err := sink.Send(t.Context(), e.status(t, id)); err != nil {
			t.Fatal(err)
		}
	}
	sent, never := e.status(t, rows[0]), e.status(t, rows[3])
	if ext, found, err := sink.Lookup(t.Context(), sent); err != nil || !found || ext != "EFF:1" {
		t.Fatalf("lookup of a sent row: %q %v %v; want EFF:1 found", ext, found, err)
	}
	unrecorded := never
	unrecorded.SentTo = ledger.Destination{}
	if _, found, err := sink.Lookup(t.Context(), unrecorded); !errors.Is(err, natssink.ErrCannotProve) || found {
		t.Fatalf("lookup of a row with no record of where it went: found %v, err %v; want ErrCannotProve", found, err)
	}
	// Nothing sent since m4's lease ended vouches that the stream still
	// holds what was stored then: it may be a restored older copy.
	if _, found, err := sink.Lookup(t.Context(), never); !errors.Is(err, natssink.ErrCannotProve) || found {
		t.Fatalf("lookup with no later send to vouch for the stream: found %v, err %v; want ErrCannotProve", found, err)
	}
	e.clk.add(2 * time.Second)
	e.sendByHand(t, sink, rows[4])
	if _, found, err := sink.Lookup(t.Context(), never); err != nil || found {
		t.Fatalf("lookup of a row never sent: found %v, err %v; want not found", found, err)
	}
	// Once a message after the row's position is gone from the stream,
	// "not found" proves nothing: one deleted in the middle, then the oldest.
	s, _ := e.js.Stream(t.Context(), "EFF")
	for _, seq := range []uint64{2, 1} {
		if err := s.DeleteMsg(t.Context(), seq); err != nil {
			t.Fatal(err)
		}
		if _, found, err := sink.Lookup(t.Context(), never); !errors.Is(err, natssink.ErrCannotProve) || found {
			t.Fatalf("lookup after deleting message %d: found %v, err %v; want ErrCannotProve", seq, found, err)
		}
	}
	// Messages gone from before the row's position do not matter.
	at, err := sink.Position(t.Context())
	if err != nil || at.Position != 4 {
		t.Fatalf("position: %+v, %v", at, err)
	}
	if _, err := e.st.Transition(t.Context(), rows[5], ledger.Claim, ledger.Params{Worker: "dead", Lease: time.Second, SentTo: at}); err != nil {
		t.Fatal(err)
	}
	e.clk.add(2 * time.Second)
	e.sendByHand(t, sink, rows[6])
	if _, found, err := sink.Lookup(t.Context(), e.status(t, rows[5])); err != nil || found {
		t.Fatalf("lookup of a row recorded after the deletes: found %v, err %v; want not found", found, err)
	}
	if ext, found, err := sink.Lookup(t.Context(), e.status(t, rows[2])); err != nil || !found || ext != "EFF:3" {
		t.Fatalf("a row still held is still found: %q %v %v", ext, found, err)
	}
}

func TestLookupOnAWorkQueueCannotSayNever(t *testing.T) {
	e := newEnv(t, &server.Options{}, 2*time.Minute, jetstream.StreamConfig{Retention: jetstream.WorkQueuePolicy})
	rows := e.enqueue(t, "m1")
	if _, found, err := e.sink(t).Lookup(t.Context(), e.status(t, rows[0])); err == nil || found {
		t.Fatalf("found %v, err %v; want an error: a work queue drops what was consumed", found, err)
	}
}

func TestSendErrorsSayWhetherTheItemMayHaveLanded(t *testing.T) {
	e := newEnv(t, &server.Options{MaxPayload: 2048}, 2*time.Minute, jetstream.StreamConfig{MaxMsgs: 1, Discard: jetstream.DiscardNew})
	sink := e.sink(t)
	rows := e.enqueue(t, "m1", "m2")
	if _, err := sink.Send(t.Context(), e.status(t, rows[0])); err != nil {
		t.Fatal(err)
	}
	// The stream is full and discards new messages: it answered, nothing stored.
	if _, err := sink.Send(t.Context(), e.status(t, rows[1])); !errors.Is(err, outbox.ErrRetryable) {
		t.Fatalf("publish to a full stream: %v, want retryable", err)
	}
	big := e.status(t, rows[1])
	big.Payload = make([]byte, 4096)
	if _, err := sink.Send(t.Context(), big); !errors.Is(err, outbox.ErrRejected) {
		t.Fatalf("payload over max_payload: %v, want rejected", err)
	}
	if _, err := natssink.New(t.Context(), e.js, e.nc, natssink.Config{Subject: "nowhere.x"}); err == nil {
		t.Fatal("a subject no stream captures was accepted")
	}
	if _, err := natssink.New(t.Context(), e.js, e.nc, natssink.Config{Subject: "effects.>"}); !errors.Is(err, natssink.ErrInvalidConfig) {
		t.Fatalf("wildcard subject: %v", err)
	}
}

// With a window too short to re-send, unknown outcomes go to review, and
// the lookup settles them: one the stream holds is sent (with its
// sequence), one it never got is sent again, once.
func TestReviewSettlesByReadingTheStream(t *testing.T) {
	e := newEnv(t, &server.Options{}, time.Second, jetstream.StreamConfig{})
	sink := e.sink(t)
	rows := e.enqueue(t, "m1", "landed", "lost")
	// m1 goes out normally first: the lookup proves itself on it.
	if _, err := sink.Send(t.Context(), e.status(t, rows[0])); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Transition(t.Context(), rows[0], ledger.Claim, ledger.Params{Worker: "w", Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Transition(t.Context(), rows[0], ledger.Sent, ledger.Params{Worker: "w", ExternalID: "EFF:1"}); err != nil {
		t.Fatal(err)
	}
	// Two workers claimed a row each, recording where it goes as the
	// dispatcher does, and died, one after its publish landed.
	to, err := sink.Position(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range rows[1:] {
		if _, err := e.st.Transition(t.Context(), id, ledger.Claim, ledger.Params{Worker: "dead", Lease: time.Second, SentTo: to}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sink.Send(t.Context(), e.status(t, rows[1])); err != nil {
		t.Fatal(err)
	}
	e.clk.add(2 * time.Second)
	// A row sent after the dead workers' leases ended vouches that the
	// stream still holds what they may have stored.
	later := e.enqueue(t, "later")[0]
	e.sendByHand(t, sink, later)
	d := e.run(t, outbox.Config{Sink: sink, Lease: 6 * time.Second})
	if it := e.waitStatus(t, rows[1], ledger.StatusSent); it.ExternalID != "EFF:2" {
		t.Errorf("the landed row settled as %q, want EFF:2", it.ExternalID)
	}
	if it := e.waitStatus(t, rows[2], ledger.StatusSent); it.ExternalID != "EFF:4" {
		t.Errorf("the lost row was sent as %q, want EFF:4", it.ExternalID)
	}
	if got, want := e.stored(t), []string{rows[0], rows[1], later, rows[2]}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("stream holds %v, want each row once: %v", got, want)
	}
	if n := d.Counts(); n.Found != 1 || n.Unseen != 1 || n.Review != 2 {
		t.Errorf("counts %+v, want 2 to review, 1 found and 1 unseen", n)
	}
}
