package natssink_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/consumer/outbox/natssink"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// unknownOutcome is the real sink whose every send reports its outcome
// unknown, as a publish whose acknowledgement was lost does: with landed the
// item is published first (the stream stored it), without it nothing is.
type unknownOutcome struct {
	*natssink.Sink
	landed bool
}

func (s unknownOutcome) Send(ctx context.Context, it ledger.OutboxItem) (string, error) {
	if s.landed {
		if _, err := s.Sink.Send(ctx, it); err != nil {
			return "", err
		}
	}
	return "", &outbox.SendError{Kind: outbox.ErrAmbiguous, Detail: "the stream's acknowledgement was lost"}
}

// Lookup hides the sink's (another signature): the dispatcher that leaves
// rows in review must not settle them itself.
func (unknownOutcome) Lookup() {}

// toReview sends rows through a dispatcher whose sends all end unknown; with
// the env's 1s window they go to review, not sent again.
func (e *env) toReview(t *testing.T, sink *natssink.Sink, landed bool, rows ...string) {
	t.Helper()
	_, stop := e.start(t, outbox.Config{Sink: unknownOutcome{sink, landed}})
	defer stop()
	for _, id := range rows {
		e.waitStatus(t, id, ledger.StatusReview)
	}
}

// landedAndLost puts two rows in review whose sends' outcomes were lost:
// landed's send is stored in the stream, lost's is not.
func (e *env) landedAndLost(t *testing.T, sink *natssink.Sink) (landed, lost string) {
	t.Helper()
	landed = e.enqueue(t, "landed")[0]
	e.toReview(t, sink, true, landed)
	lost = e.enqueue(t, "lost")[0]
	e.toReview(t, sink, false, lost)
	return landed, lost
}

// sendByHand sends row id as a worker does (recording where the send goes)
// and marks it sent: the row a lookup proves itself on, sent before any
// dispatcher looks rows up, or one that vouches for the stream.
func (e *env) sendByHand(t *testing.T, sink *natssink.Sink, id string) {
	t.Helper()
	to, err := sink.Position(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Transition(t.Context(), id, ledger.Claim, ledger.Params{Worker: "w", Lease: time.Minute, SentTo: to}); err != nil {
		t.Fatal(err)
	}
	ext, err := sink.Send(t.Context(), e.status(t, id))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Transition(t.Context(), id, ledger.Sent, ledger.Params{Worker: "w", ExternalID: ext}); err != nil {
		t.Fatal(err)
	}
}

// waitLookedUp waits until a lookup answered for each row: it left review,
// or it waits for its next lookup.
func (e *env) waitLookedUp(t *testing.T, rows ...string) {
	t.Helper()
	for _, id := range rows {
		consumertest.Eventually(t, 10*time.Second, "a lookup of row "+id, func() bool {
			it := e.status(t, id)
			return it.Status != ledger.StatusReview || it.NextAttemptAt.After(e.clk.now())
		})
	}
}

// copies counts each Nats-Msg-Id over the streams.
func (e *env) copies(t *testing.T, streams ...string) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, s := range streams {
		for _, id := range e.storedIn(t, s) {
			n[id]++
		}
	}
	return n
}

// EFF holds the send of one row in review and not that of another; EFF is
// deleted and created again (same name, subject and window) and a new row is
// sent into it. The new EFF proves nothing about the old one: neither row may
// be judged "never seen" and published again; both wait in review.
func TestLookupOnARecreatedStreamCannotSayNever(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &server.Options{}, time.Second, jetstream.StreamConfig{})
	sink := e.sink(t)
	landed, lost := e.landedAndLost(t, sink)

	s, err := e.js.Stream(t.Context(), "EFF")
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	if err := e.js.DeleteStream(t.Context(), "EFF"); err != nil {
		t.Fatal(err)
	}
	consumertest.CreateStream(t, e.js, cfg)
	proof := e.enqueue(t, "proof")[0]
	e.sendByHand(t, sink, proof)

	d := e.run(t, outbox.Config{Sink: sink})
	e.waitLookedUp(t, landed, lost)
	for _, id := range []string{landed, lost} {
		if it := e.status(t, id); it.Status != ledger.StatusReview {
			t.Errorf("row %s is %s after a lookup on the re-created EFF, want review", id, it.Status)
		}
	}
	if got := e.stored(t); len(got) != 1 || got[0] != proof {
		t.Errorf("the re-created EFF holds %v, want only the new row %s: an old row was sent again", got, proof)
	}
	if n := d.Counts(); n.Unseen != 0 || n.Found != 0 {
		t.Errorf("counts %+v, want nothing found or unseen", n)
	}
}

// The operator moves --effects-subject to a subject another stream (MOVED)
// captures. Rows whose sends went to EFF are judged by EFF, not by MOVED:
// the one EFF holds is found there, the one it never got is sent again,
// once; no id is stored twice across the two streams.
func TestLookupAfterTheSubjectMovedToAnotherStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &server.Options{}, time.Second, jetstream.StreamConfig{})
	sink := e.sink(t)
	landed, lost := e.landedAndLost(t, sink)

	consumertest.CreateStream(t, e.js, jetstream.StreamConfig{Name: "MOVED", Subjects: []string{"moved.>"}, Duplicates: time.Second})
	moved, err := natssink.New(t.Context(), e.js, e.nc, natssink.Config{Subject: "moved.site1", Timeout: time.Second, Now: e.clk.now, Ledger: e.st})
	if err != nil {
		t.Fatal(err)
	}
	proof := e.enqueue(t, "proof")[0]
	e.sendByHand(t, moved, proof)
	// A row sent into EFF after lost's lease ended (EFF's publishers go on,
	// elsewhere) vouches that EFF still holds what lost may have stored.
	e.clk.add(time.Minute)
	vouch := e.enqueue(t, "vouch")[0]
	e.sendByHand(t, sink, vouch)

	d := e.run(t, outbox.Config{Sink: moved})
	e.waitLookedUp(t, landed, lost)
	if it := e.waitStatus(t, landed, ledger.StatusSent); it.ExternalID != "EFF:1" {
		t.Errorf("the row EFF holds settled as %q, want EFF:1", it.ExternalID)
	}
	e.waitStatus(t, lost, ledger.StatusSent)
	copies := e.copies(t, "EFF", "MOVED")
	for _, id := range []string{landed, lost, proof, vouch} {
		if copies[id] != 1 {
			t.Errorf("row %s is stored %d times over EFF and MOVED, want once (EFF %v, MOVED %v)", id, copies[id], e.storedIn(t, "EFF"), e.storedIn(t, "MOVED"))
		}
	}
	if n := d.Counts(); n.Found != 1 || n.Unseen != 1 {
		t.Errorf("counts %+v, want 1 found and 1 unseen", n)
	}
}

// The ledger's clock ran 3 minutes ahead while it sent ten rows whose
// outcomes were lost, and was corrected before the lookup. The read is
// bounded by stream sequence, not by clocks: every row is found, none sent
// again.
func TestLookupAfterTheClockWasCorrected(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &server.Options{}, time.Second, jetstream.StreamConfig{})
	sink := e.sink(t)
	e.clk.ns.Store(time.Now().Add(3 * time.Minute).UnixNano())
	var ids []string
	for i := range 10 {
		ids = append(ids, fmt.Sprint("m", i))
	}
	rows := e.enqueue(t, ids...)
	e.toReview(t, sink, true, rows...)
	seq := map[string]string{}
	for i, id := range e.stored(t) {
		seq[id] = fmt.Sprintf("EFF:%d", i+1)
	}

	e.clk.ns.Store(time.Now().UnixNano())
	proof := e.enqueue(t, "proof")[0]
	e.sendByHand(t, sink, proof)
	d := e.run(t, outbox.Config{Sink: sink})
	consumertest.Eventually(t, 10*time.Second, "every row found, or one sent again", func() bool {
		n := d.Counts()
		return n.Found == 10 || n.Unseen > 0 || n.LookupOff > 0
	})
	if n := d.Counts(); n.Found != 10 || n.Unseen != 0 || n.LookupOff != 0 {
		t.Fatalf("counts %+v, want 10 found, none unseen (sent again), lookups on", n)
	}
	for _, id := range rows {
		if it := e.status(t, id); it.Status != ledger.StatusSent || it.ExternalID != seq[id] {
			t.Errorf("row %s is %s as %q, want sent as %q", id, it.Status, it.ExternalID, seq[id])
		}
	}
	for id, n := range e.copies(t, "EFF") {
		if n != 1 {
			t.Errorf("row %s is stored %d times", id, n)
		}
	}
}

// seenAtSend keeps what the ledger holds for each row when its send starts.
type seenAtSend struct {
	*natssink.Sink
	st   *ledger.Store
	rows chan ledger.OutboxItem
}

func (s seenAtSend) Send(ctx context.Context, it ledger.OutboxItem) (string, error) {
	stored, err := s.st.Get(ctx, it.ID)
	if err != nil {
		return "", err
	}
	s.rows <- stored
	return s.Sink.Send(ctx, it)
}

// Where a send goes is in the ledger before the send leaves, so a crash in
// mid-send still leaves a row a lookup can judge: the stream's instance and
// its last sequence before the send, below the sequence the send stored.
func TestClaimRecordsTheStreamBeforeTheSend(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &server.Options{}, 2*time.Minute, jetstream.StreamConfig{})
	sink := e.sink(t)
	if _, err := e.js.Publish(t.Context(), "effects.other", []byte("x")); err != nil {
		t.Fatal(err)
	}
	want, err := sink.Position(t.Context())
	if err != nil || want.Position != 1 || want.Instance == "" {
		t.Fatalf("position %+v, %v; want the instance after sequence 1", want, err)
	}
	rows := e.enqueue(t, "m1")
	seen := make(chan ledger.OutboxItem, 1)
	e.run(t, outbox.Config{Sink: seenAtSend{sink, e.st, seen}})
	if got := (<-seen).SentTo; got != want {
		t.Errorf("the row at its send records %+v, want %+v", got, want)
	}
	if it := e.waitStatus(t, rows[0], ledger.StatusSent); it.ExternalID != "EFF:2" || it.SentTo != want {
		t.Errorf("sent row %+v, want EFF:2 recorded as %+v", it, want)
	}
}
