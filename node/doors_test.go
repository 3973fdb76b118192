package node_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/node"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// door is a subject only the run may write, and the stream that keeps
// what is written there, which captures captures (none: a bucket's).
type door struct {
	name, subject, stream, captures string
}

// runsDoors are the run's own subjects: an effects stream, an owned partition's changelog (changelog.Names), the
// lease and fleet buckets (changelog.LeaseBucket, fleet.Bucket), the
// snapshot store (changelog.SnapshotBucket), and a stream on the rest of
// _JETLEDGER.> (the admin API to come). Written out: node's tests do not
// build on the packages above it.
func runsDoors() []door {
	return []door{
		{"effects", "effects.1", "EFFECTS", "effects.>"},
		{"changelog", "_JETLEDGER.changelog.EV_run", "JETLEDGER_CL_EV_run", "_JETLEDGER.changelog.EV_run"},
		{"lease", "$KV.JETLEDGER_LEASES.p0", "KV_JETLEDGER_LEASES", ""},
		{"fleet", "$KV.JETLEDGER_FLEET.site1", "KV_JETLEDGER_FLEET", ""},
		{"snapshot", "$O.JETLEDGER_SNAPSHOTS.C.x", "OBJ_JETLEDGER_SNAPSHOTS", ""},
		{"_JETLEDGER", "_JETLEDGER.admin.x", "JETLEDGER_ADMIN", "_JETLEDGER.admin.>"},
	}
}

// doorsWorld is a server with the publishers' stream and the run's own
// streams, made by the run's connection (own), and a publisher's.
type doorsWorld struct {
	srv      *server.Server
	own, pjs jetstream.JetStream
	pub      *nats.Conn
	stream   string // the publishers' stream, on prefix.>
	prefix   string
}

// makeStreams makes the publishers' stream and those of runsDoors.
func (w *doorsWorld) makeStreams(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	if _, err := w.own.CreateStream(ctx, jetstream.StreamConfig{Name: w.stream, Subjects: []string{w.prefix + ".>"}}); err != nil {
		t.Fatal(err)
	}
	for _, d := range runsDoors() {
		if d.captures == "" {
			continue
		}
		if _, err := w.own.CreateStream(ctx, jetstream.StreamConfig{Name: d.stream, Subjects: []string{d.captures}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range []string{"JETLEDGER_LEASES", "JETLEDGER_FLEET"} {
		if _, err := w.own.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: b}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.own.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "JETLEDGER_SNAPSHOTS"}); err != nil {
		t.Fatal(err)
	}
}

// connect connects to srv with opts; the connection is closed at the
// test's end. Errors the server reports (permission violations) are
// dropped: a door is judged by what was stored.
func connect(t *testing.T, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, append(opts, nats.MaxReconnects(0), nats.Timeout(5*time.Second),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// embeddedDoors is an embedded node with an admin and publishers, its
// world and the admin's connection.
func embeddedDoors(t *testing.T) (*doorsWorld, *nats.Conn) {
	t.Helper()
	n, err := node.Start(t.Context(), node.Config{Listen: "127.0.0.1:0", StoreDir: filepath.Join(t.TempDir(), "nats"),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Token: "admin-secret",
		Publishers: node.PublishRole{Tokens: []string{"pub"}, Stream: "EV", Subjects: []string{"ev.>"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	own, err := n.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	w := &doorsWorld{srv: n.Server(), own: own, stream: "EV", prefix: "ev"}
	w.makeStreams(t)
	w.pub = connect(t, n.ClientURL(), nats.Token("pub"), nats.CustomInboxPrefix(node.PublisherInboxPrefix))
	if w.pjs, err = jetstream.New(w.pub); err != nil {
		t.Fatal(err)
	}
	return w, connect(t, n.ClientURL(), nats.Token("admin-secret"))
}

// settle returns once whatever the publisher sent before has reached the
// streams it could reach: the publisher's connection is read in order,
// and its own publish is acked after its earlier ones (one stream, one
// queue of acks).
func (w *doorsWorld) settle(t *testing.T) {
	t.Helper()
	if err := w.pub.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.pjs.Publish(t.Context(), w.prefix+".settle", nil); err != nil {
		t.Fatalf("a publisher's own publish, with its inbox for the ack: %v", err)
	}
}

// marker writes the door's subject as the run and returns the sequence
// its stream gave it.
func (w *doorsWorld) marker(t *testing.T, d door) uint64 {
	t.Helper()
	ack, err := w.own.Publish(t.Context(), d.subject, []byte("run"))
	if err != nil {
		t.Fatalf("the run's write to %s: %v", d.subject, err)
	}
	if ack.Stream != d.stream {
		t.Fatalf("the run's write to %s went to %s, want %s", d.subject, ack.Stream, d.stream)
	}
	return ack.Sequence
}

// wroteBehind runs attack, which settles, and reports how many messages
// it wrote behind the door: the run writes there before and after it.
func (w *doorsWorld) wroteBehind(t *testing.T, d door, attack func()) uint64 {
	t.Helper()
	before := w.marker(t, d)
	attack()
	return w.marker(t, d) - before - 1
}

// Item 17 of issue 42: a publisher set its publish's reply subject to
// another stream's subject, the server delivered its PubAck there, and the
// effects stream stored {"stream":"PAY","seq":2} (PAY: the publishers'
// stream there). For each of the run's
// own subjects, a publisher's publish to its stream whose reply is that
// subject stores nothing there, nor does the API's answer to its stream
// info or stream names requests; the publisher's own acks still come.
func TestPublisherReplyWritesIntoNoOtherStream(t *testing.T) {
	t.Parallel()
	w, _ := embeddedDoors(t)
	w.checkReplies(t)
	w.checkAPIReplies(t)
	// The acks of an async publisher still come, under its inbox.
	futures := make([]jetstream.PubAckFuture, 3)
	for i := range futures {
		var err error
		if futures[i], err = w.pjs.PublishAsync("ev.async", nil); err != nil {
			t.Fatal(err)
		}
	}
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			if ack.Stream != "EV" {
				t.Errorf("async ack %d from %s", i, ack.Stream)
			}
		case err := <-f.Err():
			t.Fatalf("async publish %d: %v", i, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("async publish %d: no ack", i)
		}
	}
}

// checkReplies: a publish to the publishers' stream with each door as its
// reply stores nothing behind the door.
func (w *doorsWorld) checkReplies(t *testing.T) {
	t.Helper()
	for _, d := range runsDoors() {
		n := w.wroteBehind(t, d, func() {
			if err := w.pub.PublishMsg(&nats.Msg{Subject: w.prefix + ".attack", Reply: d.subject, Data: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
			w.settle(t)
		})
		if n != 0 {
			t.Errorf("%s: the publisher's ack with reply %s was stored in %s", d.name, d.subject, d.stream)
		}
	}
}

// checkAPIReplies: the two API requests a publisher may make, with each
// door as their reply, store nothing behind the door.
func (w *doorsWorld) checkAPIReplies(t *testing.T) {
	t.Helper()
	for _, d := range runsDoors() {
		n := w.wroteBehind(t, d, func() {
			for _, api := range []string{"$JS.API.STREAM.INFO." + w.stream, "$JS.API.STREAM.NAMES"} {
				total := w.apiTotal(t)
				if err := w.pub.PublishMsg(&nats.Msg{Subject: api, Reply: d.subject}); err != nil {
					t.Fatal(err)
				}
				w.settleAPI(t, total)
			}
		})
		if n != 0 {
			t.Errorf("%s: the API's answers to the publisher were stored in %s: %d", d.name, d.stream, n)
		}
	}
}

// apiTotal is the JetStream API requests the server took so far.
func (w *doorsWorld) apiTotal(t *testing.T) uint64 {
	t.Helper()
	jsz, err := w.srv.Jsz(&server.JSzOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return jsz.API.Total
}

// settleAPI returns once the server has answered a request beyond total,
// and that answer has reached the streams it could reach: the answers
// leave from one queue, in order, and the publisher's own request's
// comes after.
func (w *doorsWorld) settleAPI(t *testing.T, total uint64) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(10 * time.Second); ; <-tick.C {
		jsz, err := w.srv.Jsz(&server.JSzOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if jsz.API.Total > total && jsz.API.Inflight == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the publisher's API request was not answered: %+v", jsz.API)
		}
	}
	if _, err := w.pjs.Stream(t.Context(), w.stream); err != nil {
		t.Fatalf("the publisher's own stream info: %v", err)
	}
}

// Item 16 of issue 42: the run's own subjects are the run's to write. A
// publisher's publish to each of them stores nothing, whether straight
// there or as the reply of its publish to its stream; its purge, deletion,
// message deletion and update of their streams go unanswered. The run,
// and the admin, write there.
func TestOnlyTheRunWritesItsOwnSubjects(t *testing.T) {
	t.Parallel()
	w, admin := embeddedDoors(t)
	w.checkDirect(t)
	w.checkReplies(t)
	w.checkAPI(t)
	for _, d := range runsDoors() {
		if _, err := admin.Request(d.subject, []byte("admin"), 5*time.Second); err != nil {
			t.Errorf("%s: the admin's write to %s: %v", d.name, d.subject, err)
		}
	}
}

// checkDirect: a publisher's publish to each door stores nothing there.
func (w *doorsWorld) checkDirect(t *testing.T) {
	t.Helper()
	for _, d := range runsDoors() {
		n := w.wroteBehind(t, d, func() {
			if err := w.pub.Publish(d.subject, []byte(`{"fence":true}`)); err != nil {
				t.Fatal(err)
			}
			w.settle(t)
		})
		if n != 0 {
			t.Errorf("%s: the publisher's publish to %s was stored in %s", d.name, d.subject, d.stream)
		}
	}
}

// checkAPI: the publisher's purge, deletion, message deletion and update
// of each door's stream go unanswered, and the stream keeps its messages.
func (w *doorsWorld) checkAPI(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	for _, d := range runsDoors() {
		w.marker(t, d)
		before, err := w.own.Stream(ctx, d.stream)
		if err != nil {
			t.Fatal(err)
		}
		for _, api := range []string{"STREAM.PURGE.", "STREAM.DELETE.", "STREAM.MSG.DELETE.", "STREAM.UPDATE."} {
			c, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			_, err := w.pub.RequestWithContext(c, "$JS.API."+api+d.stream, []byte(`{"seq":1}`))
			cancel()
			if err == nil {
				t.Errorf("%s: the publisher's $JS.API.%s%s was answered", d.name, api, d.stream)
			}
		}
		after, err := w.own.Stream(ctx, d.stream)
		if a, b := after.CachedInfo().State, before.CachedInfo().State; err != nil || a.Msgs != b.Msgs || a.FirstSeq != b.FirstSeq || a.LastSeq != b.LastSeq {
			t.Errorf("%s: %s after the publisher's requests: %v", d.name, d.stream, err)
		}
	}
}

// The publishers' account changes nothing of what they publish: the
// stream keeps their headers and no server one, a repeated id is a
// duplicate, an expected stream is checked, and no mapping of a reply is
// left behind.
func TestPublishersAccountKeepsWhatTheyPublish(t *testing.T) {
	t.Parallel()
	w, _ := embeddedDoors(t)
	ctx := t.Context()
	h := nats.Header{"X-Mine": []string{"1"}, server.ClientInfoHdr: []string{`{"acc":"forged"}`}}
	for i, wantDup := range []bool{false, true} {
		ack, err := w.pjs.PublishMsg(ctx, &nats.Msg{Subject: "ev.1", Header: h}, jetstream.WithMsgID("m1"))
		if err != nil || ack.Sequence != 1 || ack.Duplicate != wantDup {
			t.Fatalf("publish %d of id m1: %+v %v", i, ack, err)
		}
	}
	if _, err := w.pjs.PublishMsg(ctx, &nats.Msg{Subject: "ev.1"}, jetstream.WithExpectStream("OTHER")); err == nil {
		t.Fatal("a publish expecting another stream was stored")
	}
	s, err := w.own.Stream(ctx, "EV")
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Header) != 2 || m.Header.Get("X-Mine") != "1" || m.Header.Get(jetstream.MsgIDHeader) != "m1" {
		t.Errorf("stored headers %v, want X-Mine and Nats-Msg-Id alone", m.Header)
	}
	acc, err := w.srv.LookupAccount(node.PublisherAccount)
	if err != nil {
		t.Fatal(err)
	}
	// The server drops a reply's mapping as it routes the reply, which
	// under load (CI's) may come after the client has read it: a mapping
	// left behind is one still there long after.
	consumertest.Eventually(t, 30*time.Second, "no reply mapping left in the publishers' account", func() bool {
		return acc.NumPendingReverseResponses() == 0
	})
}
