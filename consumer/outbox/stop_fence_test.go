package outbox_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
	"github.com/jetledger/jetledger/ledger"
)

// A helper's attack on the stop's fix (dispatcher.claim, deliver): the
// claim no longer published under the run's context, but the owner's other
// writes still did. A publish cut by the stop fenced the store (the entry
// may be in the log), and then every send still in flight had its
// write-back refused: the rows stayed 'sending' in the log, and the copy
// that took over put them in review ("lease expired mid-send"), though each
// send's outcome was known. Now a write begun is not cut by the stop
// (ledger's write): these tests failed before.

// stallLog is a changelog that takes every entry, except that once armed
// its next Append is in flight until ack (the server's acknowledgement)
// or its context ends, and then fails if its context has ended: a publish
// cut by the stop, which may have landed, as the entry counts as stored.
type stallLog struct {
	mu      sync.Mutex
	last    uint64
	armed   bool
	stalled chan struct{}
	ack     chan struct{}
}

func (l *stallLog) MaxEntry() int { return 1 << 20 }

func (l *stallLog) arm() chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armed, l.stalled, l.ack = true, make(chan struct{}), make(chan struct{})
	return l.stalled
}

// acknowledge lets the publish in flight be answered.
func (l *stallLog) acknowledge() { close(l.ack) }

func (l *stallLog) Append(ctx context.Context, after uint64, parts [][]byte) error {
	l.mu.Lock()
	if after != l.last {
		l.mu.Unlock()
		return errors.New("wrong last sequence")
	}
	l.last += uint64(len(parts))
	armed := l.armed
	l.armed = false
	l.mu.Unlock()
	if !armed {
		return nil
	}
	close(l.stalled)
	select {
	case <-ctx.Done():
	case <-l.ack:
	}
	return ctx.Err()
}

type stallEnv struct {
	*outboxEnv
	log *stallLog
}

func newStallEnv(t *testing.T) *stallEnv {
	t.Helper()
	log := &stallLog{}
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{Changelog: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.TakeOver(context.Background(), "log1", "a", 0, 0); err != nil {
		t.Fatal(err)
	}
	e := &outboxEnv{st: st, dest: webhooktest.NewDestination(t, false), logs: &records{}}
	if e.sink, err = webhook.New(webhook.Config{URL: e.dest.URL(), Timeout: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	return &stallEnv{e, log}
}

// inFlight starts a dispatcher on ctx with one row's send held at the
// destination, and returns the row and what Run returned.
func (e *stallEnv) inFlight(t *testing.T, ctx context.Context, msg string) (string, chan error) {
	t.Helper()
	id := e.enqueue(t, msg)
	e.dest.Hold()
	d := e.dispatcher(t, outbox.Config{Lease: time.Minute})
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	select {
	case <-e.dest.Arrived():
	case <-time.After(time.Minute):
		t.Fatal("the send did not arrive")
	}
	e.waitStatus(t, id, ledger.StatusSending)
	return id, done
}

// judge releases the held send after the stop and wants its row sent.
func (e *stallEnv) judge(t *testing.T, id string, done chan error, what string) {
	t.Helper()
	e.dest.Release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("dispatcher: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the dispatcher did not stop")
	}
	it, err := e.st.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, item := range e.dest.Items() {
		if item.Key == id {
			n++
		}
	}
	if it.Status != ledger.StatusSent || n != 1 {
		var said []string
		e.logs.mu.Lock()
		for _, r := range e.logs.all {
			said = append(said, r.Level.String()+" "+r.Message)
		}
		e.logs.mu.Unlock()
		t.Fatalf("a stop landing while %s published: the send in flight went out (%d item at the destination) but its row is %q, "+
			"so the log's last word on it is the claim and the copy that takes over puts it in review; the dispatcher said: %s",
			what, n, it.Status, strings.Join(said, " | "))
	}
}

// The service's pruner prunes with the run's context (service/run.go:
// p.Run(runCtx)); a stop that lands while a prune step's entry is being
// published fenced the store under the send in flight.
func TestAStopMidPruneKeepsTheWriteBackOfASendInFlight(t *testing.T) {
	t.Parallel()
	e := newStallEnv(t)
	e.enqueue(t, "old") // a processed row the prune removes: an entry
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	id, done := e.inFlight(t, ctx, "m1")
	stalled := e.log.arm()
	pruned := make(chan error, 1)
	go func() {
		_, err := e.st.Prune(ctx, ledger.PruneOptions{Stream: "S", FirstSeq: 100, Retention: time.Nanosecond})
		pruned <- err
	}()
	<-stalled
	stop() // SIGTERM
	e.log.acknowledge()
	t.Logf("the prune: %v", <-pruned)
	e.judge(t, id, done, "a prune step")
}

// The dispatcher's own round expires leases with the run's context: a row
// whose lease ran out (another worker's, gone) moves to review in an entry;
// a stop that lands while it is published fenced the store under the send
// in flight.
func TestAStopMidLeaseExpiryKeepsTheWriteBackOfASendInFlight(t *testing.T) {
	t.Parallel()
	e := newStallEnv(t)
	// m2 is claimed by a worker that dies (another process's, SIGKILLed):
	// its lease runs out while m1's send is in flight.
	other := e.enqueue(t, "m2")
	if _, err := e.st.Transition(context.Background(), other, ledger.Claim, ledger.Params{Worker: "gone#1", Lease: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	id, done := e.inFlight(t, ctx, "m1")
	stalled := e.log.arm()
	select {
	case <-stalled: // the round's expiry of m2 is being published
	case <-time.After(time.Minute):
		t.Fatal("the lease expiry was not published")
	}
	stop() // SIGTERM
	e.log.acknowledge()
	e.judge(t, id, done, "the round's lease expiry")
}
