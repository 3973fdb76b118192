package natssink_test

import (
	"context"
	"github.com/jetledger/jetledger/consumer/jsretry"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/consumer/outbox/natssink"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// A worker sent a row into EFF (stored) and died before writing it back;
// EFF is then deleted and created again (same name, subject and 2m window).
// The row's lease expires and, the sink being idempotent inside its window,
// it would be sent again with the same id: but the new EFF does not
// remember that id, so that would be a second copy. It goes to review, and
// the new EFF holds nothing. (Found by the nemesis, natssink topology,
// steps effrecreate:2.)
func TestMaybeSentRowIsNotResentIntoARecreatedStream(t *testing.T) {
	t.Parallel()
	e, sink, row, _ := sentThenRecreated(t)
	e.run(t, outbox.Config{Sink: sink, Lease: 6 * time.Second})
	notResent(t, e, row)
}

// staleSink answers its first Position with one read earlier, as a
// delayed answer (held in a slow connection past a stream's re-creation)
// would: the round believes EFF is still the instance it was.
type staleSink struct {
	*natssink.Sink
	stale ledger.Destination
	used  atomic.Bool
}

func (s *staleSink) Position(ctx context.Context) (ledger.Destination, error) {
	if !s.used.Swap(true) {
		return s.stale, nil
	}
	return s.Sink.Position(ctx)
}

// As above, but the round that re-sends the row read EFF's instance before
// EFF was made again (its answer arrived late): the claim records the old
// instance, and the same-id re-send would land in the new one, which does
// not remember the id. The re-send reads the instance again, just before
// it leaves, and goes to review instead. (Found by the nemesis, natssink
// topology: hang,effrecreate:2,clock:2,pub:37, where the proxy held the
// instance's answer while EFF was made again.)
func TestMaybeSentRowIsNotResentOnAStalePosition(t *testing.T) {
	t.Parallel()
	e, sink, row, stale := sentThenRecreated(t)
	e.run(t, outbox.Config{Sink: &staleSink{Sink: sink, stale: stale}, Lease: 6 * time.Second})
	notResent(t, e, row)
}

// sentByADeadWorker claims a row for a worker that dies after its send was
// stored in EFF, before it could write the row back.
func sentByADeadWorker(t *testing.T) (e *env, sink *natssink.Sink, row string) {
	t.Helper()
	e = newEnv(t, &server.Options{}, 2*time.Minute, jetstream.StreamConfig{})
	sink = e.sink(t)
	row = e.enqueue(t, "m1")[0]
	to, err := sink.Position(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Transition(t.Context(), row, ledger.Claim, ledger.Params{Worker: "dead", Lease: time.Second, SentTo: to}); err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Send(t.Context(), e.status(t, row)); err != nil {
		t.Fatal(err)
	}
	return e, sink, row
}

// sentThenRecreated is sentByADeadWorker, then EFF deleted and made again,
// and the clock past the dead claim's lease. stale is EFF's position read
// before it was made again.
func sentThenRecreated(t *testing.T) (e *env, sink *natssink.Sink, row string, stale ledger.Destination) {
	t.Helper()
	e, sink, row = sentByADeadWorker(t)
	stale, err := sink.Position(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.js.Stream(t.Context(), "EFF")
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	if err := e.js.DeleteStream(t.Context(), "EFF"); err != nil {
		t.Fatal(err)
	}
	if _, err := jsretry.CreateStream(t.Context(), e.js, cfg); err != nil { // the server may still be removing the old one
		t.Fatal(err)
	}
	e.clk.add(2 * time.Second) // past the dead claim's lease
	return e, sink, row, stale
}

// notResent waits for row in review, saying why, with nothing in the new EFF.
func notResent(t *testing.T, e *env, row string) {
	t.Helper()
	it := e.waitStatus(t, row, ledger.StatusReview)
	if n := len(e.stored(t)); n != 0 {
		t.Fatalf("the new EFF holds %d messages, want 0: the row was sent again into another instance than its first copy's", n)
	}
	if !strings.Contains(it.Error, "another instance") {
		t.Errorf("review reason %q does not say why", it.Error)
	}
}

// A worker's send was stored in EFF and it died before writing the row
// back; EFF is then purged, taking the copy. The row's lease expires and,
// the sink being idempotent inside its window, it would be sent again with
// the same id, trusting EFF's duplicate window: but the window's memory of
// a purged id does not outlive a server restart (it is rebuilt from the
// messages kept), so the re-send could store a second copy where the
// first was already read. It goes to review. (Found by the nemesis,
// natssink topology, shrunk to effpurge:1,broker.)
func TestMaybeSentRowIsNotResentAfterItsCopyWasPurged(t *testing.T) {
	t.Parallel()
	e, sink, row := sentByADeadWorker(t)
	s, err := e.js.Stream(t.Context(), "EFF")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.clk.add(2 * time.Second) // past the dead claim's lease
	e.run(t, outbox.Config{Sink: sink, Lease: 6 * time.Second})
	it := e.waitStatus(t, row, ledger.StatusReview)
	if n := len(e.stored(t)); n != 0 {
		t.Fatalf("EFF holds %d messages after the purge, want 0: the row was sent again", n)
	}
	if !strings.Contains(it.Error, "removed") {
		t.Errorf("review reason %q does not say why", it.Error)
	}
}
