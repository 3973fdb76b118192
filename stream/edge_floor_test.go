package stream_test

// The edge prune floor (issue 19 point 3) where it meets older features:
// a stream with several sources, a ledger an earlier release pruned, and a
// copy an operator makes by hand.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/jsretry"
	"github.com/jetledger/jetledger/consumer/prune"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/stream"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// edgeWorld is a hub, an edge leaf node and a ledger whose clock the test
// moves.
type edgeWorld struct {
	site     string // Sourced.Site: "" sources ephemerally
	hjs, ejs jetstream.JetStream
	st       *ledger.Store
	now      atomic.Int64 // unix nanoseconds
}

// bothSourcings runs test with an ephemeral source and with a durable one
// (Sourced.Site), as run at an edge makes now.
func bothSourcings(t *testing.T, test func(*testing.T, string)) {
	t.Run("ephemeral", func(t *testing.T) { test(t, "") })
	t.Run("durable", func(t *testing.T) { test(t, "site1") })
}

func newEdgeWorld(t *testing.T, site string) *edgeWorld {
	t.Helper()
	_, hjs, u := consumertest.RunHub(t)
	ejs, _ := startLeaf(t, u, "site1")
	w := &edgeWorld{site: site, hjs: hjs, ejs: ejs}
	w.now.Store(time.Now().Add(-30 * 24 * time.Hour).UnixNano()) // rows are applied long ago
	var err error
	w.st, err = ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{Now: func() time.Time { return time.Unix(0, w.now.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.st.Close() })
	return w
}

func (w *edgeWorld) publish(t *testing.T, subject, id string) {
	t.Helper()
	if _, err := w.hjs.Publish(t.Context(), subject, []byte("x"), jetstream.WithMsgID(id)); err != nil {
		t.Fatal(err)
	}
}

// hubOrders creates the hub's stream ORDERS (orders.>) and publishes n
// messages to site 1 in it, o0 to o<n-1>.
func (w *edgeWorld) hubOrders(t *testing.T, n int) {
	t.Helper()
	consumertest.CreateStream(t, w.hjs, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	for i := range n {
		w.publish(t, "orders.site1.pay", fmt.Sprint("o", i))
	}
}

// waitEdge waits until the edge stream's last sequence is last.
func (w *edgeWorld) waitEdge(t *testing.T, name string, last uint64) {
	t.Helper()
	consumertest.Eventually(t, time.Minute, fmt.Sprintf("edge stream %s reaches seq %d", name, last), func() bool {
		s, err := w.ejs.Stream(t.Context(), name)
		if err != nil {
			return false
		}
		info, err := s.Info(t.Context())
		return err == nil && info.State.LastSeq >= last
	})
}

// messages waits for the edge stream to reach seq last and returns every
// message it holds.
func (w *edgeWorld) messages(t *testing.T, name string, last uint64) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx := t.Context()
	w.waitEdge(t, name, last)
	s, err := w.ejs.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ms []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	return ms
}

// applyAll waits for the edge stream to reach seq last, applies every
// message of it into the ledger, as run would, and returns their ids.
func (w *edgeWorld) applyAll(t *testing.T, name string, last uint64) (applied map[string]bool) {
	t.Helper()
	applied = map[string]bool{}
	var ds []ledger.Delivery
	for _, m := range w.messages(t, name, last) {
		id := m.Header.Get(jetstream.MsgIDHeader)
		applied[id] = true
		ds = append(ds, ledger.Delivery{MessageID: id, Stream: name, Sequence: m.Sequence, Subject: m.Subject, Data: m.Data, Delivered: 1})
	}
	if _, err := w.st.ApplyBatch(t.Context(), ds, func(context.Context, *ledger.Tx, ledger.Delivery) error { return nil }, ledger.Budget{}); err != nil {
		t.Fatal(err)
	}
	return applied
}

// keepLast makes the edge stream keep only its last n messages, as its
// limits do with time.
func (w *edgeWorld) keepLast(t *testing.T, name string, n int64) {
	t.Helper()
	s, err := w.ejs.Stream(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.MaxMsgs = n
	if _, err := w.ejs.UpdateStream(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
}

// prune runs run's own pruner (prune.Pruner) once, its clock now.
func (w *edgeWorld) prune(t *testing.T, name string) ledger.PruneResult {
	t.Helper()
	w.now.Store(time.Now().UnixNano())
	p := &prune.Pruner{Ledger: w.st, JetStream: w.ejs, Stream: name, Durable: "d", Logger: quiet}
	res, err := p.Once(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// ensure ensures the edge stream spec sourcing h as run does at start, with
// the world's ledger.
func (w *edgeWorld) ensure(ctx context.Context, spec stream.Config, h stream.Sourced) (*jetstream.StreamInfo, error) {
	h.Stream, h.Stream.Logger, h.Ledger, h.Site = spec, quiet, w.st, w.site
	info, err := stream.EnsureSourced(ctx, w.ejs, h)
	if err != nil {
		return info, err
	}
	// As run does beside consuming (KeepHubConsumer): the hub is up in
	// these tests, the leaf link perhaps not yet.
	for try := 0; ; try++ {
		err = stream.EnsureHubConsumer(ctx, w.ejs, info)
		if err == nil || !errors.Is(err, nats.ErrNoResponders) || try == 100 {
			return info, err
		}
		time.Sleep(100 * time.Millisecond) // the link's first connection
	}
}

// reapplied deletes the edge stream and creates it again as run does at
// start (its store was lost, or an operator deleted it), and returns
// appliedAgain.
func (w *edgeWorld) reapplied(t *testing.T, name string, h stream.Sourced, applied map[string]bool, want uint64) []string {
	t.Helper()
	if err := w.ejs.DeleteStream(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	if _, err := w.ensure(t.Context(), stream.Config{Name: name, Duplicates: time.Minute}, h); err != nil {
		t.Fatal(err)
	}
	return w.appliedAgain(t, name, applied, want)
}

// appliedAgain waits for the edge stream to hold want messages, and returns
// the ids in it whose rows the ledger pruned though they were applied
// before: each would be applied a second time.
func (w *edgeWorld) appliedAgain(t *testing.T, name string, applied map[string]bool, want uint64) []string {
	t.Helper()
	var again []string
	for _, m := range w.messages(t, name, want) {
		id := m.Header.Get(jetstream.MsgIDHeader)
		var n int
		if err := w.st.DB().QueryRowContext(t.Context(), `SELECT count(*) FROM processed_messages WHERE message_id = ?`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 && applied[id] {
			again = append(again, id)
		}
	}
	return again
}

// floorOfSource is the ledger's floor of the edge stream for source, 0 when
// none.
func (w *edgeWorld) floorOfSource(t *testing.T, name, source string) uint64 {
	t.Helper()
	f, err := w.st.SourceFloor(t.Context(), name, source)
	if errors.Is(err, ledger.ErrNotFound) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return f.Below
}

// An edge stream that sources two hub streams (made by an operator; run
// uses it as it is) gets a floor per source from prune: each source's
// sequence of its first message the edge keeps, since sourcing keeps each
// source's order and none across them. Where one source's floor cannot be
// read (none of its messages is left in the copy), nothing is pruned. Made
// again by run (one source, --hub-stream), the copy starts at that source's
// floor, and nothing pruned is applied a second time. Before the fix such a
// stream was pruned below its first sequence with no floor, and the copy
// made again took the hub's stream from its start.
func TestSeveralSourcesPrunedKeepAFloorEach(t *testing.T) {
	bothSourcings(t, testSeveralSourcesPrunedKeepAFloorEach)
}

func testSeveralSourcesPrunedKeepAFloorEach(t *testing.T, site string) {
	t.Parallel()
	w := newEdgeWorld(t, site)
	ctx := t.Context()
	consumertest.CreateStream(t, w.hjs, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	consumertest.CreateStream(t, w.hjs, jetstream.StreamConfig{Name: "REFUNDS", Subjects: []string{"refunds.>"}})
	for i := range 4 {
		w.publish(t, "orders.site1.pay", fmt.Sprint("o", i))
		w.publish(t, "refunds.site1", fmt.Sprint("r", i))
	}
	if _, err := w.ejs.CreateStream(ctx, jetstream.StreamConfig{Name: "EDGE", Duplicates: time.Minute, Sources: []*jetstream.StreamSource{
		{Name: "ORDERS", Domain: "hub"}, {Name: "REFUNDS", Domain: "hub"}}}); err != nil {
		t.Fatal(err)
	}
	w.waitEdge(t, "EDGE", 8)
	// One of each last, in a known order: EDGE 9 is ORDERS 5, EDGE 10 REFUNDS 5.
	w.publish(t, "orders.site1.pay", "o4")
	w.waitEdge(t, "EDGE", 9)
	w.publish(t, "refunds.site1", "r4")
	applied := w.applyAll(t, "EDGE", 10)
	w.keepLast(t, "EDGE", 2)
	if res := w.prune(t, "EDGE"); res.Processed != 8 {
		t.Fatalf("prune removed %d rows, want the 8 below EDGE 9", res.Processed)
	}
	if o, r := w.floorOfSource(t, "EDGE", "ORDERS@hub"), w.floorOfSource(t, "EDGE", "REFUNDS@hub"); o != 5 || r != 5 {
		t.Fatalf("floors ORDERS %d, REFUNDS %d; want 5 each", o, r)
	}
	// Only REFUNDS messages left: ORDERS's floor cannot be read, so o4's
	// row, applied long ago and now below the first sequence, stays.
	w.now.Store(time.Now().Add(-30 * 24 * time.Hour).UnixNano())
	w.publish(t, "refunds.site1", "r5")
	w.publish(t, "refunds.site1", "r6")
	w.waitEdge(t, "EDGE", 12)
	w.keepLast(t, "EDGE", 1)
	if res := w.prune(t, "EDGE"); res.Processed != 0 {
		t.Fatalf("with no ORDERS message left, prune removed %d rows; want none", res.Processed)
	}
	again := w.reapplied(t, "EDGE", stream.Sourced{Hub: "ORDERS", Domain: "hub"}, applied, 1)
	if len(again) > 0 {
		t.Fatalf("the edge stream made again copies %d messages already applied whose rows prune removed: %v (applied twice)", len(again), again)
	}
}

// A ledger that an earlier release (c1893bf) pruned at an edge has no
// source floor (migration 0008 adds an empty table). Its first start with
// the edge stream there records the floor from the stream, as prune would;
// with the stream missing (deleted to change --hub-filter, or the store
// lost), run refuses to create it (stream.ErrNoFloor) rather than copy the
// hub from its start, until --hub-start-seq says where. Before the fix the
// copy started at the hub's start and every message c1893bf pruned was
// applied again.
func TestUpgradedLedgerWithoutFloorIsNotCopiedAgain(t *testing.T) {
	bothSourcings(t, testUpgradedLedgerWithoutFloorIsNotCopiedAgain)
}

func testUpgradedLedgerWithoutFloorIsNotCopiedAgain(t *testing.T, site string) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		streamThere bool // the first start after the upgrade finds the stream
	}{{"first start with the stream", true}, {"stream lost before the first start", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newEdgeWorld(t, site)
			ctx := t.Context()
			w.hubOrders(t, 6)
			h := stream.Sourced{Hub: "ORDERS", Filter: "orders.site1.>", Domain: "hub"}
			spec := stream.Config{Name: "EDGE", Duplicates: time.Minute}
			if _, err := w.ensure(ctx, spec, h); err != nil {
				t.Fatal(err)
			}
			applied := w.applyAll(t, "EDGE", 6)
			w.keepLast(t, "EDGE", 2)
			// c1893bf's prune: rows below the edge stream's first sequence
			// go, and it records no floor (it had no table for one).
			for _, q := range []string{`DELETE FROM processed_messages WHERE stream = 'EDGE' AND last_seq < 5`, `DELETE FROM jetledger_source_floors`} {
				if _, err := w.st.DB().ExecContext(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			if tc.streamThere {
				if _, err := w.ensure(ctx, spec, h); err != nil {
					t.Fatal(err)
				}
				if f := w.floorOfSource(t, "EDGE", "ORDERS@hub"); f != 5 {
					t.Fatalf("floor recorded at start = %d, want 5 (the first message kept)", f)
				}
				if again := w.reapplied(t, "EDGE", h, applied, 2); len(again) > 0 {
					t.Fatalf("the edge stream made again copies %d messages already applied whose rows were pruned: %v (applied twice)", len(again), again)
				}
				return
			}
			if err := w.ejs.DeleteStream(ctx, "EDGE"); err != nil {
				t.Fatal(err)
			}
			if _, err := w.ensure(ctx, spec, h); !errors.Is(err, stream.ErrNoFloor) {
				t.Fatalf("creating the stream again: %v; want stream.ErrNoFloor", err)
			}
			if _, err := w.ejs.Stream(ctx, "EDGE"); !errors.Is(err, jetstream.ErrStreamNotFound) {
				t.Fatalf("the stream after the refusal: %v; want none made", err)
			}
			h.Start = 5
			if _, err := w.ensure(ctx, spec, h); err != nil {
				t.Fatal(err)
			}
			if again := w.appliedAgain(t, "EDGE", applied, 2); len(again) > 0 {
				t.Fatalf("with --hub-start-seq 5 the stream copies %d messages already applied: %v", len(again), again)
			}
			if f := w.floorOfSource(t, "EDGE", "ORDERS@hub"); f != 5 {
				t.Fatalf("floor recorded at creation = %d, want 5", f)
			}
		})
	}
}

// A ledger of this release whose edge stream is lost before any prune has
// a floor from the stream's creation: made again, the copy starts at the
// hub's start as the first did (every row is there to dedupe it), and run
// does not take the ledger for one an earlier release pruned.
func TestEdgeStreamLostBeforeAnyPruneHasItsCreationFloor(t *testing.T) {
	bothSourcings(t, testEdgeStreamLostBeforeAnyPruneHasItsCreationFloor)
}

func testEdgeStreamLostBeforeAnyPruneHasItsCreationFloor(t *testing.T, site string) {
	t.Parallel()
	w := newEdgeWorld(t, site)
	w.hubOrders(t, 3)
	h := stream.Sourced{Hub: "ORDERS", Domain: "hub"}
	if _, err := w.ensure(t.Context(), stream.Config{Name: "EDGE", Duplicates: time.Minute}, h); err != nil {
		t.Fatal(err)
	}
	applied := w.applyAll(t, "EDGE", 3)
	if f := w.floorOfSource(t, "EDGE", "ORDERS@hub"); f != 1 {
		t.Fatalf("floor at creation = %d, want 1 (the hub's start)", f)
	}
	if again := w.reapplied(t, "EDGE", h, applied, 3); len(again) > 0 {
		t.Fatalf("%d messages applied again: %v", len(again), again)
	}
}

// The operator deletes the edge stream and makes it again by hand (nats
// stream add sourcing the hub's), rather than leaving it to run, while the
// ledger has a floor for it. run refuses a copy that starts below the floor
// (stream.ErrBelowFloor), whether it has copied messages from there already
// or copies nothing yet and starts there by its configuration; one made
// with the floor as its start is used, and the ledger's rows are held past
// its new sequences as for a copy run makes. Before the fix run used it as
// it was, and the pruned messages were applied a second time.
func TestEdgeStreamMadeByHandBelowTheFloorIsRefused(t *testing.T) {
	bothSourcings(t, testEdgeStreamMadeByHandBelowTheFloorIsRefused)
}

func testEdgeStreamMadeByHandBelowTheFloorIsRefused(t *testing.T, site string) {
	t.Parallel()
	w := newEdgeWorld(t, site)
	ctx := t.Context()
	w.hubOrders(t, 6)
	h := stream.Sourced{Hub: "ORDERS", Domain: "hub"}
	spec := stream.Config{Name: "EDGE", Duplicates: time.Minute}
	info, err := w.ensure(ctx, spec, h)
	if err != nil {
		t.Fatal(err)
	}
	// As run does once it consumes it.
	if err := w.st.RememberConsumer(ctx, "EDGE", "d", consumer.StreamInstance("EDGE", info.Created)); err != nil {
		t.Fatal(err)
	}
	applied := w.applyAll(t, "EDGE", 6)
	w.keepLast(t, "EDGE", 2)
	if res := w.prune(t, "EDGE"); res.Processed != 4 {
		t.Fatalf("prune removed %d rows, want 4", res.Processed)
	}
	if f := w.floorOfSource(t, "EDGE", "ORDERS@hub"); f != 5 {
		t.Fatalf("floor %d, want 5", f)
	}
	for i := range 10 {
		w.publish(t, "orders.site1.pay", fmt.Sprint("late", i))
	}
	byHand := func(src jetstream.StreamSource) {
		t.Helper()
		if err := w.ejs.DeleteStream(ctx, "EDGE"); err != nil {
			t.Fatal(err)
		}
		// Made again at once: the old store may still be going (10049).
		if _, err := jsretry.CreateStream(ctx, w.ejs, jetstream.StreamConfig{Name: "EDGE", Duplicates: time.Minute, Sources: []*jetstream.StreamSource{&src}}); err != nil {
			t.Fatal(err)
		}
	}
	// From the hub's start, its copies already there.
	byHand(jetstream.StreamSource{Name: "ORDERS", Domain: "hub"})
	w.waitEdge(t, "EDGE", 16)
	if _, err := w.ensure(ctx, spec, h); !errors.Is(err, stream.ErrBelowFloor) {
		t.Fatalf("a copy made by hand from the hub's start: %v; want stream.ErrBelowFloor", err)
	}
	// From the hub's start, nothing copied yet (its filter takes no message
	// so far): its configuration and the hub's instance say.
	byHand(jetstream.StreamSource{Name: "ORDERS", Domain: "hub", FilterSubject: "orders.site1.later"})
	if _, err := w.ensure(ctx, spec, h); !errors.Is(err, stream.ErrBelowFloor) {
		t.Fatalf("a copy made by hand to start at the hub's start: %v; want stream.ErrBelowFloor", err)
	}
	// At the floor: used, and the rows held past the 12 hub messages it
	// takes (hub 5 to 16), which it numbers from 1.
	byHand(jetstream.StreamSource{Name: "ORDERS", Domain: "hub", OptStartSeq: 5})
	if _, err := w.ensure(ctx, spec, h); err != nil {
		t.Fatal(err)
	}
	var held int
	if err := w.st.DB().QueryRowContext(ctx, `SELECT min(last_seq) FROM processed_messages WHERE stream = 'EDGE'`).Scan(&held); err != nil {
		t.Fatal(err)
	}
	if held < 12 {
		t.Fatalf("the rows are held to %d, want at least 12", held)
	}
	if again := w.appliedAgain(t, "EDGE", applied, 12); len(again) > 0 {
		t.Fatalf("the edge stream made by hand at the floor copies %d messages already applied whose rows prune removed: %v", len(again), again)
	}
}

// A durable copy whose hub stream is deleted and made again: the consumer
// goes with it, and the copy would take nothing more. EnsureHubConsumer
// (run calls it every 10 s) makes one of a new name at the new instance's
// start and points the copy's source at it (the same source would drop
// the new instance's first messages as seen: the copy held 3 of 5), and
// then, with that consumer deleted by hand, another after the last message
// copied: the copy holds each message once.
func TestDurableCopyFollowsAHubStreamMadeAgain(t *testing.T) {
	t.Parallel()
	w := newEdgeWorld(t, "site1")
	ctx := t.Context()
	w.hubOrders(t, 3)
	h := stream.Sourced{Hub: "ORDERS", Filter: "orders.site1.>", Domain: "hub"}
	info, err := w.ensure(ctx, stream.Config{Name: "EDGE", Duplicates: time.Minute}, h)
	if err != nil {
		t.Fatal(err)
	}
	w.waitEdge(t, "EDGE", 3)
	if err := w.hjs.DeleteStream(ctx, "ORDERS"); err != nil {
		t.Fatal(err)
	}
	consumertest.CreateStream(t, w.hjs, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	for i := range 2 {
		w.publish(t, "orders.site1.pay", fmt.Sprint("n", i))
	}
	if err := stream.EnsureHubConsumer(ctx, w.ejs, info); err != nil {
		t.Fatal(err)
	}
	w.waitEdge(t, "EDGE", 5)
	hub, err := stream.SourceJetStream(w.ejs, info.Config.Sources[0])
	if err != nil {
		t.Fatal(err)
	}
	now, err := w.ejs.Stream(ctx, "EDGE") // its source renamed to the new consumer
	if err != nil {
		t.Fatal(err)
	}
	if now.CachedInfo().Config.Sources[0].Consumer.Name == info.Config.Sources[0].Consumer.Name {
		t.Error("the copy's source still names the consumer that went with the hub's stream")
	}
	if err := hub.DeleteConsumer(ctx, "ORDERS", now.CachedInfo().Config.Sources[0].Consumer.Name); err != nil {
		t.Fatal(err)
	}
	w.publish(t, "orders.site1.pay", "n2")
	if err := stream.EnsureHubConsumer(ctx, w.ejs, info); err != nil {
		t.Fatal(err)
	}
	ids := map[string]int{}
	for _, m := range w.messages(t, "EDGE", 6) {
		ids[m.Header.Get(jetstream.MsgIDHeader)]++
	}
	for _, id := range []string{"o0", "o1", "o2", "n0", "n1", "n2"} {
		if ids[id] != 1 {
			t.Errorf("the copy holds %s %d times, want once (all: %v)", id, ids[id], ids)
		}
	}
	if len(ids) != 6 {
		t.Errorf("the copy holds %v, want the 6 published", ids)
	}
}
