package main

import (
	"errors"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/partition"
	"github.com/jetledger/jetledger/consumer/requeue"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/publisher"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// runCommand runs args in process as main does and returns the command's
// error itself, for errors.Is.
func runCommand(t *testing.T, args ...string) error {
	t.Helper()
	parser, err := newParser(&cli{}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	kctx, err := parser.Parse(args)
	if err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return kctx.Run(&invocation{ctx: t.Context(), stdout: io.Discard, stderr: io.Discard})
}

// deadLettered publishes m into stream as a producer would and records it
// in a new ledger at db as run does when it gives up on the message: the
// stored subject, sequence and headers, as delivered. It returns the dead
// letter's id.
func deadLettered(t *testing.T, js jetstream.JetStream, db, stream string, m publisher.Message) int64 {
	t.Helper()
	ctx := t.Context()
	p, err := publisher.New(js, publisher.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ack, err := p.Publish(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := s.GetMsg(ctx, ack.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	st, err := ledger.Open(db, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.RecordDeadLetters(ctx, []ledger.DeadLetter{{MessageID: ack.ID, Stream: ack.Stream, Sequence: ack.Sequence,
		Subject: raw.Subject, Headers: raw.Header, Payload: raw.Data, Reason: "test", Deliveries: 1}}); err != nil {
		t.Fatal(err)
	}
	dls, err := st.DeadLetters(ctx, 0)
	for _, d := range dls {
		if d.MessageID == ack.ID {
			return d.ID
		}
	}
	t.Fatalf("dead letter %s not recorded: %v %v", ack.ID, dls, err)
	return 0
}

// deadLetters is how many dead letters the ledger at db keeps.
func deadLetters(t *testing.T, db string) int64 {
	t.Helper()
	st, err := ledger.Open(db, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, err := st.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return s.DeadLetters
}

// messagesIn is the number of messages stream holds.
func messagesIn(t *testing.T, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	s, err := js.Stream(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// A requeue pointed at another server (a wrong --nats, a NATS context)
// must not count its stream's acknowledgement: a stream of another name
// capturing the subject, a stream of the same name that holds another
// message at the dead letter's sequence or never reached it, and a stream
// that looks like the dead letter's while another one captures the subject
// are all refused, the dead letter is kept and they store nothing. Pointed
// at run's server, the requeue lands in PAY and the dead letter goes.
func TestRequeueRefusesAnotherServersStream(t *testing.T) {
	t.Parallel()
	home := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, home)
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "PAY", Subjects: []string{"pay.*"}, Duplicates: time.Second})
	dir := t.TempDir()
	db1, db2 := filepath.Join(dir, "one.db"), filepath.Join(dir, "two.db")
	dl1 := deadLettered(t, js, db1, "PAY", publisher.Message{Subject: "pay.alice", ID: "evt-1", Data: []byte(`{"amount":1}`)})
	dl2 := deadLettered(t, js, db2, "PAY", publisher.Message{Subject: "pay.alice", ID: "evt-2", Data: []byte(`{"amount":2}`)})

	// OTHER captures pay.>.
	other := consumertest.RunServer(t)
	_, ojs := consumertest.Connect(t, other)
	consumertest.CreateStream(t, ojs, jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"pay.>"}})
	// A PAY of its own, holding one message of another id.
	twin := consumertest.RunServer(t)
	_, tjs := consumertest.Connect(t, twin)
	consumertest.CreateStream(t, tjs, jetstream.StreamConfig{Name: "PAY", Subjects: []string{"pay.>"}})
	if _, err := tjs.PublishMsg(t.Context(), &nats.Msg{Subject: "pay.alice", Header: nats.Header{jetstream.MsgIDHeader: {"twin-1"}}}); err != nil {
		t.Fatal(err)
	}
	// A PAY holding evt-1 at seq 1, as run's does, that has since given
	// pay.> to OTHER: only the publish's expected stream can catch it.
	moved := consumertest.RunServer(t)
	_, mjs := consumertest.Connect(t, moved)
	consumertest.CreateStream(t, mjs, jetstream.StreamConfig{Name: "PAY", Subjects: []string{"pay.>"}})
	if _, err := mjs.PublishMsg(t.Context(), &nats.Msg{Subject: "pay.alice", Header: nats.Header{jetstream.MsgIDHeader: {"evt-1"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := mjs.UpdateStream(t.Context(), jetstream.StreamConfig{Name: "PAY", Subjects: []string{"moved.>"}}); err != nil {
		t.Fatal(err)
	}
	consumertest.CreateStream(t, mjs, jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"pay.>"}})

	tests := []struct {
		name    string
		db      string
		id      int64
		js      jetstream.JetStream
		srv     string
		stream  string // the stream that must store nothing
		want    uint64 // what it held before
		wantErr error
	}{
		{"another stream captures the subject", db1, dl1, ojs, other.ClientURL(), "OTHER", 0, requeue.ErrWrongStream},
		{"same name, another message at its sequence", db1, dl1, tjs, twin.ClientURL(), "PAY", 1, requeue.ErrWrongStream},
		{"same name, never reached its sequence", db2, dl2, tjs, twin.ClientURL(), "PAY", 1, requeue.ErrWrongStream},
		{"same name and message, another stream captures the subject", db1, dl1, mjs, moved.ClientURL(), "OTHER", 0, publisher.ErrWrongStream},
	}
	for _, tc := range tests {
		err := runCommand(t, "dlq", "requeue", "--db", tc.db, "--nats", tc.srv, strconv.FormatInt(tc.id, 10))
		if !errors.Is(err, tc.wantErr) || !errors.Is(err, requeue.ErrWrongStream) {
			t.Errorf("%s: requeue error %v, want %v", tc.name, err, tc.wantErr)
		}
		if n := deadLetters(t, tc.db); n != 1 {
			t.Errorf("%s: %d dead letters after the refused requeue, want it kept", tc.name, n)
		}
		if n := messagesIn(t, tc.js, tc.stream); n != tc.want {
			t.Errorf("%s: %s holds %d messages, want %d", tc.name, tc.stream, n, tc.want)
		}
	}

	// Past PAY's duplicate window, the requeues to run's server land.
	for _, dl := range []struct {
		db string
		id int64
	}{{db1, dl1}, {db2, dl2}} {
		consumertest.Eventually(t, 10*time.Second, "requeue into PAY", func() bool {
			err := runCommand(t, "dlq", "requeue", "--db", dl.db, "--nats", home.ClientURL(), strconv.FormatInt(dl.id, 10))
			if err != nil && !errors.Is(err, requeue.ErrStillInWindow) {
				t.Fatalf("requeue into PAY: %v", err)
			}
			return err == nil
		})
		if n := deadLetters(t, dl.db); n != 0 {
			t.Errorf("%d dead letters after the requeue", n)
		}
	}
	if n := messagesIn(t, js, "PAY"); n != 4 {
		t.Errorf("PAY holds %d messages, want the originals and the requeued copies", n)
	}
}

// publish --stream says which stream must store the messages: on a server
// where another stream captures the subject nothing is stored there.
func TestPublishToAStreamRefusesAnotherStream(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"pay.>"}})
	err := runCommand(t, "publish", "--nats", srv.ClientURL(), "--subject", "pay.alice", "--stream", "PAY", "--data", `{"amount":1}`)
	if !errors.Is(err, publisher.ErrWrongStream) {
		t.Errorf("publish --stream PAY into OTHER: %v, want publisher.ErrWrongStream", err)
	}
	if n := messagesIn(t, js, "OTHER"); n != 0 {
		t.Errorf("OTHER stored %d messages", n)
	}
	if err := runCommand(t, "publish", "--nats", srv.ClientURL(), "--subject", "pay.alice", "--stream", "OTHER", "--data", `{"amount":1}`); err != nil {
		t.Fatalf("publish --stream OTHER: %v", err)
	}
	if n := messagesIn(t, js, "OTHER"); n != 1 {
		t.Errorf("OTHER stored %d messages, want 1", n)
	}
}

// A dead letter first published with an expectation of the stream's state
// then (Nats-Expected-Last-Sequence) is requeued without it: it held for
// that publish, and the stream would refuse the copy now.
func TestRequeueDropsTheFirstPublishsExpectations(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "PAY", Subjects: []string{"pay.*"}, Duplicates: time.Second})
	db := filepath.Join(t.TempDir(), "pay.db")
	id := deadLettered(t, js, db, "PAY", publisher.Message{Subject: "pay.alice", ID: "evt-1",
		Header: nats.Header{jetstream.ExpectedLastSeqHeader: {"0"}}})
	consumertest.Eventually(t, 10*time.Second, "requeue into PAY", func() bool {
		err := runCommand(t, "dlq", "requeue", "--db", db, "--nats", srv.ClientURL(), strconv.FormatInt(id, 10))
		if err != nil && !errors.Is(err, requeue.ErrStillInWindow) {
			t.Fatalf("requeue: %v", err)
		}
		return err == nil
	})
	if n := messagesIn(t, js, "PAY"); n != 2 {
		t.Errorf("PAY holds %d messages, want the original and the requeued copy", n)
	}
}

// anEdge is a hub whose stream HUB captures pay.* with the duplicate
// window hub, and an edge (its own domain, a leaf of the hub) whose stream
// PAY captures nothing and sources HUB with the window edge.
type anEdge struct {
	hjs, ejs jetstream.JetStream
	url      string // the edge's server
}

func startEdge(t *testing.T, hub, edge time.Duration) anEdge {
	return startEdgeWith(t, jetstream.StreamConfig{Duplicates: hub}, jetstream.StreamConfig{Duplicates: edge})
}

// startEdgeWith is startEdge with the hub's and the edge's streams
// configured as hub and edge: names, the hub's subjects and the edge's
// source are set here, the edge's source filter kept.
func startEdgeWith(t *testing.T, hub, edge jetstream.StreamConfig) anEdge {
	t.Helper()
	hs, hjs, u := consumertest.RunHub(t)
	hub.Name, hub.Subjects = "HUB", []string{"pay.*"}
	consumertest.CreateStream(t, hjs, hub)
	ejs, edgeURL := startLeaf(t, u, "site")
	filter := ""
	if len(edge.Sources) > 0 {
		filter = edge.Sources[0].FilterSubject
	}
	edge.Name, edge.Sources = "PAY", []*jetstream.StreamSource{{Name: "HUB", Domain: "hub", FilterSubject: filter}}
	consumertest.CreateStream(t, ejs, edge)
	waitLeafs(t, hs, 1)
	return anEdge{hjs: hjs, ejs: ejs, url: edgeURL}
}

// deadLetter publishes id at the hub, waits for the edge's stream to source
// it at seq 1, and records that copy in a new ledger as run records a dead
// letter at the edge (dead letter 1). It returns the ledger and when the
// edge's stream stored the copy, which is when its duplicate window took
// the id.
func (e anEdge) deadLetter(t *testing.T, id string) (db string, stored time.Time) {
	t.Helper()
	if _, err := e.hjs.PublishMsg(t.Context(), &nats.Msg{Subject: "pay.alice", Data: []byte(`{}`), Header: nats.Header{jetstream.MsgIDHeader: {id}}}); err != nil {
		t.Fatal(err)
	}
	consumertest.Eventually(t, 10*time.Second, "the edge's stream sourcing the message", func() bool { return messagesIn(t, e.ejs, "PAY") == 1 })
	s, err := e.ejs.Stream(t.Context(), "PAY")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := s.GetMsg(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	db = filepath.Join(t.TempDir(), "site.db")
	st, err := ledger.Open(db, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.RecordDeadLetters(t.Context(), []ledger.DeadLetter{{MessageID: id, Stream: "PAY", Sequence: 1,
		Subject: raw.Subject, Headers: raw.Header, Payload: raw.Data, Reason: "test", Deliveries: 1}}); err != nil {
		t.Fatal(err)
	}
	return db, raw.Time
}

// requeueUntilDone requeues dead letter 1 of db at the edge until it is no
// longer refused for a duplicate window, checking that every refusal kept
// the dead letter, and returns the refusals.
func (e anEdge) requeueUntilDone(t *testing.T, db string) []*requeue.WindowError {
	t.Helper()
	refused, err := e.requeueOutsideTheWindows(t, db)
	if err != nil {
		t.Fatalf("requeue at the edge: %v", err)
	}
	return refused
}

// requeueOutsideTheWindows requeues dead letter 1 of db at the edge, with
// args, until it is no longer refused for a duplicate window, checking that
// every refusal kept the dead letter; it returns the refusals and the last
// answer.
func (e anEdge) requeueOutsideTheWindows(t *testing.T, db string, args ...string) ([]*requeue.WindowError, error) {
	t.Helper()
	var refused []*requeue.WindowError
	var last error
	consumertest.Eventually(t, 30*time.Second, "requeue at the edge", func() bool {
		err := runCommand(t, append([]string{"dlq", "requeue", "--db", db, "--nats", e.url, "1"}, args...)...)
		var we *requeue.WindowError
		switch {
		case !errors.Is(err, requeue.ErrStillInWindow):
			last = err
			return true
		case !errors.As(err, &we):
			t.Fatalf("requeue at the edge: %v is errStillInWindow but no *requeue.WindowError", err)
		}
		if n := deadLetters(t, db); n != 1 {
			t.Fatalf("%d dead letters after a refused requeue (%v), want it kept", n, err)
		}
		refused = append(refused, we)
		return false
	})
	return refused, last
}

// At an edge the dead letter's stream captures no subject: it sources the
// hub's. A requeue must land in the hub's stream, the origin of the copies
// the edge's stream gets, and from there reach the edge's stream again
// before the dead letter goes.
func TestRequeueAtAnEdgeGoesThroughTheHub(t *testing.T) {
	t.Parallel()
	e := startEdge(t, time.Second, time.Second)
	db, _ := e.deadLetter(t, "evt-1")
	e.requeueUntilDone(t, db)
	if n := deadLetters(t, db); n != 0 {
		t.Errorf("%d dead letters after the requeue", n)
	}
	if n := messagesIn(t, e.hjs, "HUB"); n != 2 {
		t.Errorf("HUB holds %d messages, want the original and the requeued copy", n)
	}
	if n := messagesIn(t, e.ejs, "PAY"); n != 2 {
		t.Errorf("PAY holds %d messages when the requeue returned, want the original and the copy sourced from HUB", n)
	}
}

// The edge's stream deduplicates the copies it sources with its own window,
// which took the id when it stored the original (after the hub did) and may
// be longer than the hub's. While it holds the id, a copy the hub stores is
// dropped at the edge: requeue must refuse (errStillInWindow, naming the
// edge's stream and when to try again) and keep the dead letter, and once
// the window has passed, land the copy in the edge's stream.
func TestRequeueAtAnEdgeWaitsForTheEdgesWindow(t *testing.T) {
	t.Parallel()
	const hub, edge = 200 * time.Millisecond, 3 * time.Second
	e := startEdge(t, hub, edge)
	db, stored := e.deadLetter(t, "evt-1")
	refused := e.requeueUntilDone(t, db)
	done := time.Now()
	if n := messagesIn(t, e.ejs, "PAY"); n != 2 {
		t.Fatalf("PAY holds %d messages when the requeue returned (after %s), want the original and the copy: the copy was dropped by PAY's window and the dead letter deleted",
			n, done.Sub(stored).Round(time.Millisecond))
	}
	if done.Before(stored.Add(edge)) {
		t.Errorf("requeued %s after the edge stored the original, inside its %s window", done.Sub(stored), edge)
	}
	if len(refused) == 0 {
		t.Fatal("never refused while the edge's window held the id")
	}
	last := refused[len(refused)-1]
	if last.Stream != "PAY" || last.Until.Before(stored.Add(edge)) {
		t.Errorf("last refusal: stream %q until %s, want PAY until at least %s", last.Stream, last.Until, stored.Add(edge))
	}
	if n := deadLetters(t, db); n != 0 {
		t.Errorf("%d dead letters after the requeue", n)
	}
	if n := messagesIn(t, e.hjs, "HUB"); n != 2 {
		t.Errorf("HUB holds %d messages, want the original and one requeued copy", n)
	}
}

// A copy the hub stored that the edge's stream does not take in within
// --wait (here the edge's stream is full, as it is while the link to the
// hub is down) is not a requeue: the dead letter is kept (requeue.ErrNotArrived).
// Once the copy arrives after all, the next requeue finds it there,
// publishes nothing more and removes the dead letter.
func TestRequeueAtAnEdgeKeepsTheDeadLetterUntilTheCopyArrives(t *testing.T) {
	t.Parallel()
	e := startEdgeWith(t, jetstream.StreamConfig{Duplicates: 100 * time.Millisecond},
		jetstream.StreamConfig{Duplicates: 100 * time.Millisecond, MaxMsgs: 1, Discard: jetstream.DiscardNew})
	db, _ := e.deadLetter(t, "evt-1")
	if _, err := e.requeueOutsideTheWindows(t, db, "--wait", "300ms"); !errors.Is(err, requeue.ErrNotArrived) {
		t.Fatalf("requeue into a full edge stream: %v, want errNotArrived", err)
	}
	if n := deadLetters(t, db); n != 1 {
		t.Fatalf("%d dead letters after a copy that did not arrive, want it kept", n)
	}
	if n := messagesIn(t, e.hjs, "HUB"); n != 2 {
		t.Fatalf("HUB holds %d messages, want the original and the copy", n)
	}
	if _, err := e.ejs.UpdateStream(t.Context(), jetstream.StreamConfig{Name: "PAY", Duplicates: 100 * time.Millisecond,
		Sources: []*jetstream.StreamSource{{Name: "HUB", Domain: "hub"}}}); err != nil {
		t.Fatal(err)
	}
	consumertest.Eventually(t, 30*time.Second, "the copy sourced to the edge once there is room", func() bool { return messagesIn(t, e.ejs, "PAY") == 2 })
	if err := runCommand(t, "dlq", "requeue", "--db", db, "--nats", e.url, "1"); err != nil {
		t.Fatalf("requeue once the copy arrived: %v", err)
	}
	if n := deadLetters(t, db); n != 0 {
		t.Errorf("%d dead letters after the copy arrived and the requeue found it", n)
	}
	if n := messagesIn(t, e.hjs, "HUB"); n != 2 {
		t.Errorf("HUB holds %d messages, want no further copy published", n)
	}
}

// An interest stream acknowledges a publish no consumer is interested in
// and stores nothing. A requeue into one without consumers (run's durable
// deleted) is no requeue: the dead letter is kept (requeue.ErrNotArrived). With
// run's durable there, the copy is stored for it and the dead letter goes.
func TestRequeueIntoAnInterestStreamWithoutConsumersKeepsTheDeadLetter(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	s := consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "PAY", Subjects: []string{"pay.*"}, Duplicates: 100 * time.Millisecond,
		Retention: jetstream.InterestPolicy})
	// The original is stored while run's durable exists.
	if _, err := s.CreateConsumer(t.Context(), jetstream.ConsumerConfig{Durable: "run", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "pay.db")
	id := deadLettered(t, js, db, "PAY", publisher.Message{Subject: "pay.alice", ID: "evt-1"})
	if err := s.DeleteConsumer(t.Context(), "run"); err != nil {
		t.Fatal(err)
	}
	requeueOutsideTheWindow := func() error {
		var err error
		consumertest.Eventually(t, 10*time.Second, "requeue outside PAY's window", func() bool {
			err = runCommand(t, "dlq", "requeue", "--db", db, "--nats", srv.ClientURL(), strconv.FormatInt(id, 10))
			return !errors.Is(err, requeue.ErrStillInWindow)
		})
		return err
	}
	if err := requeueOutsideTheWindow(); !errors.Is(err, requeue.ErrNotArrived) {
		t.Fatalf("requeue into PAY without consumers: %v, want errNotArrived", err)
	}
	if n := deadLetters(t, db); n != 1 {
		t.Fatalf("%d dead letters after a copy PAY did not store, want it kept", n)
	}
	if _, err := s.CreateConsumer(t.Context(), jetstream.ConsumerConfig{Durable: "run", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	if err := requeueOutsideTheWindow(); err != nil {
		t.Fatalf("requeue into PAY with run's durable: %v", err)
	}
	if n := deadLetters(t, db); n != 0 {
		t.Errorf("%d dead letters after the requeue", n)
	}
	// The original went with the first durable's interest.
	if n := messagesIn(t, js, "PAY"); n != 1 {
		t.Errorf("PAY holds %d messages, want the copy for run's durable", n)
	}
}

// A site sources its share of a partitioned hub (--hub-filter N.>): its
// dead letter is stored as the hub's mapping stored it (N.pay.alice), a
// subject no stream captures. The copy must be published on the subject
// the hub's mapping turns into that one, so it lands in the share the site
// sources.
func TestRequeueAtAnEdgeOfAPartitionedHub(t *testing.T) {
	t.Parallel()
	tr, err := partition.Transform("pay.*", 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	st, err := server.NewSubjectTransform(tr.Source, tr.Destination)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := st.Match("pay.alice")
	if err != nil {
		t.Fatal(err)
	}
	share := strings.SplitN(stored, ".", 2)[0] + ".>"
	e := startEdgeWith(t, jetstream.StreamConfig{Duplicates: 100 * time.Millisecond, SubjectTransform: tr},
		jetstream.StreamConfig{Duplicates: 100 * time.Millisecond, Sources: []*jetstream.StreamSource{{FilterSubject: share}}})
	db, _ := e.deadLetter(t, "evt-1")
	e.requeueUntilDone(t, db)
	if n := deadLetters(t, db); n != 0 {
		t.Errorf("%d dead letters after the requeue", n)
	}
	if n := messagesIn(t, e.ejs, "PAY"); n != 2 {
		t.Errorf("PAY holds %d messages when the requeue returned, want the original and the copy in the site's share", n)
	}
}
