package natssink_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/consumer/outbox/natssink"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// The ledger's clock runs a few seconds ahead of the server's (an edge box
// without NTP, say). A message the stream holds is stored at a server time
// before the row's CreatedAt: the lookup must still find it.
func TestLookupFindsDespiteClockSkew(t *testing.T) {
	e := newEnv(t, &server.Options{}, 2*time.Minute, jetstream.StreamConfig{})
	sink := e.sink(t)
	e.clk.ns.Store(time.Now().Add(3 * time.Minute).UnixNano()) // ledger 3 minutes ahead, past the slack
	rows := e.enqueue(t, "m1")
	if _, err := sink.Send(t.Context(), e.status(t, rows[0])); err != nil {
		t.Fatal(err)
	}
	if n := len(e.stored(t)); n != 1 {
		t.Fatalf("stream holds %d", n)
	}
	ext, found, err := sink.Lookup(t.Context(), e.status(t, rows[0]))
	if err != nil || !found {
		t.Fatalf("the stream holds the row's message but Lookup says found=%v ext=%q err=%v ('never seen' when err is nil)", found, ext, err)
	}
}

// End to end: with a skewed ledger clock, a review row whose publish landed
// must settle as found, not "unseen" and published a second time past the
// duplicate window.
func TestSkewedClockMakesNoSecondCopy(t *testing.T) {
	e := newEnv(t, &server.Options{}, time.Second, jetstream.StreamConfig{})
	sink := e.sink(t)
	// A row made during an outage and sent later: the lookup proves itself on it.
	e.clk.ns.Store(time.Now().Add(-10 * time.Second).UnixNano())
	proof := e.enqueue(t, "proof")
	if _, err := sink.Send(t.Context(), e.status(t, proof[0])); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Transition(t.Context(), proof[0], ledger.Claim, ledger.Params{Worker: "w", Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Transition(t.Context(), proof[0], ledger.Sent, ledger.Params{Worker: "w", ExternalID: "EFF:1"}); err != nil {
		t.Fatal(err)
	}
	// Now the ledger's clock is 3 minutes ahead of the server's.
	e.clk.ns.Store(time.Now().Add(3 * time.Minute).UnixNano())
	rows := e.enqueue(t, "landed")
	if _, err := e.st.Transition(t.Context(), rows[0], ledger.Claim, ledger.Params{Worker: "dead", Lease: time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Send(t.Context(), e.status(t, rows[0])); err != nil { // the dead worker's publish landed
		t.Fatal(err)
	}
	e.clk.add(2 * time.Second)
	time.Sleep(2500 * time.Millisecond) // the server's 1s duplicate window (purged on a 1s timer) passes: real time, not a sync
	e.run(t, outbox.Config{Sink: sink, Lease: 6 * time.Second})
	e.waitStatus(t, rows[0], ledger.StatusSent)
	n := 0
	for _, id := range e.stored(t) {
		if id == rows[0] {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the stream holds %d copies of row %s (%v)", n, rows[0], e.stored(t))
	}
}

// A purge of the stream (or of the subject) removes the row's message; the
// lookup must not then say "never seen".
func TestLookupAfterPurgeCannotSayNever(t *testing.T) {
	for _, subjectOnly := range []bool{false, true} {
		t.Run(fmt.Sprint("subject=", subjectOnly), func(t *testing.T) {
			e := newEnv(t, &server.Options{}, 2*time.Minute, jetstream.StreamConfig{})
			sink := e.sink(t)
			rows := e.enqueue(t, "m1")
			it := e.status(t, rows[0])
			var err error
			if it.SentTo, err = sink.Position(t.Context()); err != nil {
				t.Fatal(err)
			}
			if _, err := sink.Send(t.Context(), it); err != nil {
				t.Fatal(err)
			}
			s, _ := e.js.Stream(t.Context(), "EFF")
			var opts []jetstream.StreamPurgeOpt
			if subjectOnly {
				opts = append(opts, jetstream.WithPurgeSubject("effects.site1"))
			}
			if err := s.Purge(t.Context(), opts...); err != nil {
				t.Fatal(err)
			}
			info, _ := s.Info(t.Context())
			t.Logf("after purge: %+v", info.State)
			_, found, err := sink.Lookup(t.Context(), it)
			if !errors.Is(err, natssink.ErrCannotProve) || found {
				t.Fatalf("lookup of a purged message: found=%v err=%v, want ErrCannotProve", found, err)
			}
		})
	}
}

// The stream holds many messages after the row's, on its subject and on
// others: the lookup still finds a message near the end.
func TestLookupManyMessages(t *testing.T) {
	e := newEnv(t, &server.Options{}, 2*time.Minute, jetstream.StreamConfig{})
	sink := e.sink(t)
	rows := e.enqueue(t, "target")
	for i := range 3000 {
		subj := "effects.other"
		if i%5 == 0 {
			subj = "effects.site1"
		}
		if _, err := e.js.Publish(t.Context(), subj, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sink.Send(t.Context(), e.status(t, rows[0])); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := e.js.Publish(t.Context(), "effects.other", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	ext, found, err := sink.Lookup(t.Context(), e.status(t, rows[0]))
	t.Logf("lookup over ~3000 messages took %s", time.Since(start))
	if err != nil || !found || ext != "EFF:3001" {
		t.Fatalf("%q %v %v, want EFF:3001 found", ext, found, err)
	}
}

// Run published a row to effects.site1; the operator then restarts run with
// --effects-subject effects.site2 (same stream, same sink name "nats"). The
// lookup must still find the row on the old subject.
func TestLookupAfterSubjectChange(t *testing.T) {
	e := newEnv(t, &server.Options{}, 2*time.Minute, jetstream.StreamConfig{})
	rows := e.enqueue(t, "m1")
	if _, err := e.sink(t).Send(t.Context(), e.status(t, rows[0])); err != nil {
		t.Fatal(err)
	}
	s2, err := natssink.New(t.Context(), e.js, e.nc, natssink.Config{Subject: "effects.site2", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, found, err := s2.Lookup(t.Context(), e.status(t, rows[0]))
	if err == nil && !found {
		t.Fatalf("the stream holds the id (on effects.site1) but a sink on effects.site2 says 'never seen'")
	}
}

// The operator shortens the stream's duplicate window while run runs: the
// sink reads it again, so the dispatcher does not count on the long one.
func TestWindowShortenedAtRuntime(t *testing.T) {
	defer natssink.SetWindowRefresh(0)()
	e := newEnv(t, &server.Options{}, 2*time.Minute, jetstream.StreamConfig{})
	sink := e.sink(t)
	s, _ := e.js.Stream(t.Context(), "EFF")
	cfg := s.CachedInfo().Config
	cfg.Duplicates = time.Second
	if _, err := e.js.UpdateStream(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	if sink.KeyWindow() != time.Second {
		t.Fatalf("the stream's window is now 1s, the sink still reports %s", sink.KeyWindow())
	}
}

// MaxMsgsPerSubject 1: a later row on the subject replaces the earlier one.
func TestLookupMaxMsgsPerSubjectCannotSayNever(t *testing.T) {
	e := newEnv(t, &server.Options{}, 2*time.Minute, jetstream.StreamConfig{MaxMsgsPerSubject: 1})
	sink := e.sink(t)
	rows := e.enqueue(t, "a", "b")
	a := e.status(t, rows[0])
	var err error
	if a.SentTo, err = sink.Position(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, id := range rows {
		if _, err := sink.Send(t.Context(), e.status(t, id)); err != nil {
			t.Fatal(err)
		}
	}
	s, _ := e.js.Stream(t.Context(), "EFF")
	info, _ := s.Info(t.Context())
	t.Logf("state %+v", info.State)
	if _, found, err := sink.Lookup(t.Context(), a); !errors.Is(err, natssink.ErrCannotProve) || found {
		t.Fatalf("a message replaced under MaxMsgsPerSubject: found=%v err=%v, want ErrCannotProve", found, err)
	}
}
