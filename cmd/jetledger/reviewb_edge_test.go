package main

// review-b: attack tests on the edge prune floor (issue 19 point 3) where it
// meets older features. Each test fails on a fault it names.

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// edgeWorld is a hub, an edge leaf node and a ledger whose clock the test
// moves.
type edgeWorld struct {
	hjs, ejs jetstream.JetStream
	st       *ledger.Store
	now      atomic.Int64 // unix nanoseconds
}

func newEdgeWorld(t *testing.T) *edgeWorld {
	t.Helper()
	leafPort := freeTCPPort(t)
	hub := consumertest.RunServerWithOptions(t, &server.Options{JetStreamDomain: "hub", ServerName: "hub",
		LeafNode: server.LeafNodeOpts{Host: "127.0.0.1", Port: leafPort}})
	_, hjs := consumertest.Connect(t, hub)
	u, _ := url.Parse(fmt.Sprintf("nats-leaf://127.0.0.1:%d", leafPort))
	e, err := startEmbedded(embeddedConfig{Listen: "127.0.0.1:0", StoreDir: filepath.Join(t.TempDir(), "s"),
		Leaf: &server.RemoteLeafOpts{URLs: []*url.URL{u}}, Domain: "site1"}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	nc, err := nats.Connect(e.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ejs, _ := jetstream.New(nc)
	w := &edgeWorld{hjs: hjs, ejs: ejs}
	w.now.Store(time.Now().Add(-30 * 24 * time.Hour).UnixNano()) // rows are applied long ago
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

// waitEdge waits until the edge stream's last sequence is last.
func (w *edgeWorld) waitEdge(t *testing.T, name string, last uint64) {
	t.Helper()
	consumertest.Eventually(t, 15*time.Second, fmt.Sprintf("edge stream %s reaches seq %d", name, last), func() bool {
		s, err := w.ejs.Stream(t.Context(), name)
		if err != nil {
			return false
		}
		info, err := s.Info(t.Context())
		return err == nil && info.State.LastSeq >= last
	})
}

// applyAll applies every message of the edge stream into the ledger, as run
// would, and returns the ids by edge sequence.
func (w *edgeWorld) applyAll(t *testing.T, name string) map[uint64]string {
	t.Helper()
	ctx := t.Context()
	s, err := w.ejs.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[uint64]string{}
	var ds []ledger.Delivery
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		id := m.Header.Get(jetstream.MsgIDHeader)
		ids[seq] = id
		ds = append(ds, ledger.Delivery{MessageID: id, Stream: name, Sequence: seq, Subject: m.Subject, Data: m.Data, Delivered: 1})
	}
	if _, err := w.st.ApplyBatch(ctx, ds, func(context.Context, *ledger.Tx, ledger.Delivery) error { return nil }, ledger.Budget{}); err != nil {
		t.Fatal(err)
	}
	return ids
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

// prune runs run's own pruner once, its clock now.
func (w *edgeWorld) prune(t *testing.T, name string) ledger.PruneResult {
	t.Helper()
	w.now.Store(time.Now().UnixNano())
	p := &pruner{st: w.st, js: w.ejs, streamFlags: streamFlags{Stream: name, Durable: "d"}, log: quiet}
	res, err := p.once(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// reapplied re-creates the edge stream as run does at start (its store was
// lost, or an operator deleted it), waits for the copy to hold want
// messages, and returns the ids in it whose rows the ledger pruned though
// they were applied before: each would be applied a second time.
func (w *edgeWorld) reapplied(t *testing.T, name string, h hubFlags, applied map[string]bool, want uint64) []string {
	return w.reappliedAfter(t, name, h, applied, want, nil)
}

// reappliedAfter is reapplied with remake, when given, making the stream
// again before run starts (an operator's nats stream add).
func (w *edgeWorld) reappliedAfter(t *testing.T, name string, h hubFlags, applied map[string]bool, want uint64, remake func()) []string {
	t.Helper()
	ctx := t.Context()
	if err := w.ejs.DeleteStream(ctx, name); err != nil {
		t.Fatal(err)
	}
	if remake != nil {
		remake()
	}
	spec := streamSpec{Name: name, Duplicates: time.Minute}
	if _, err := ensureSourcedStream(ctx, w.ejs, w.st, spec, h, quiet); err != nil {
		t.Fatal(err)
	}
	w.waitEdge(t, name, want)
	s, err := w.ejs.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var again []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		id := m.Header.Get(jetstream.MsgIDHeader)
		var n int
		if err := w.st.DB().QueryRowContext(ctx, `SELECT count(*) FROM processed_messages WHERE message_id = ?`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 && applied[id] {
			again = append(again, id)
		}
	}
	return again
}

// FAULT: an edge stream that sources two hub streams (made by an operator;
// run uses it "as it is") is pruned below its first sequence with no floor
// recorded (pruneBound: several sources, "pruned below its first sequence
// as before"). Made again by run (one source, from --hub-stream), it copies
// the hub's stream from its start: the pruned rows' messages come back and
// are applied a second time.
func TestReviewBSeveralSourcesPrunedWithoutFloorApplyAgain(t *testing.T) {
	t.Parallel()
	w := newEdgeWorld(t)
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
	applied := map[string]bool{}
	for _, id := range w.applyAll(t, "EDGE") {
		applied[id] = true
	}
	w.keepLast(t, "EDGE", 2)
	if res := w.prune(t, "EDGE"); res.Processed == 0 {
		t.Fatalf("prune removed no row; the attack needs some pruned")
	}
	again := w.reapplied(t, "EDGE", hubFlags{HubStream: "ORDERS", HubDomain: "hub"}, applied, 4)
	if len(again) > 0 {
		t.Fatalf("the edge stream made again copies %d messages already applied whose rows prune removed: %v (applied twice)", len(again), again)
	}
}

// FAULT: a ledger that an earlier release (c1893bf) pruned at an edge has no
// source floor (migration 0008 adds an empty table): its rows of messages
// gone from the edge stream are gone too. The first start of this release
// with the edge stream missing (the operator deleted it to change
// --hub-filter, the very case of issue 19 point 3, or the store was lost)
// finds rows but no floor, and sourceStart starts the copy at the hub's
// start: every message c1893bf pruned is applied again. The floor is only
// recorded by a prune that runs while the stream exists, an hour after
// start by default (--prune-interval).
func TestReviewBUpgradedLedgerPrunedByOldReleaseAppliesAgain(t *testing.T) {
	t.Parallel()
	w := newEdgeWorld(t)
	ctx := t.Context()
	consumertest.CreateStream(t, w.hjs, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	for i := range 6 {
		w.publish(t, "orders.site1.pay", fmt.Sprint("o", i))
	}
	h := hubFlags{HubStream: "ORDERS", HubFilter: "orders.site1.>", HubDomain: "hub"}
	if _, err := ensureSourcedStream(ctx, w.ejs, w.st, streamSpec{Name: "EDGE", Duplicates: time.Minute}, h, quiet); err != nil {
		t.Fatal(err)
	}
	w.waitEdge(t, "EDGE", 6)
	applied := map[string]bool{}
	for _, id := range w.applyAll(t, "EDGE") {
		applied[id] = true
	}
	w.keepLast(t, "EDGE", 2)
	// c1893bf's prune: rows below the edge stream's first sequence go, and
	// no floor is recorded (it had no table for one).
	if _, err := w.st.DB().ExecContext(ctx, `DELETE FROM processed_messages WHERE stream = 'EDGE' AND last_seq < 5`); err != nil {
		t.Fatal(err)
	}
	again := w.reapplied(t, "EDGE", h, applied, 6)
	if len(again) > 0 {
		t.Fatalf("a ledger pruned by c1893bf: the edge stream made again copies %d messages already applied whose rows were pruned: %v (applied twice)", len(again), again)
	}
}

// FAULT: the operator deletes the edge stream and makes it again with nats
// stream add (sourcing the hub's, as the README's edge section shows for
// the hub's EFFECTS), rather than leaving it to run: ensureSourcedStream
// finds it and uses it as it is (only warnNewInstance says it is another
// instance), with no start position, though the ledger has a floor for
// it: the hub's messages below the floor come back and those whose rows
// were pruned are applied a second time.
func TestReviewBOperatorRemadeEdgeStreamIgnoresTheFloor(t *testing.T) {
	t.Parallel()
	w := newEdgeWorld(t)
	ctx := t.Context()
	consumertest.CreateStream(t, w.hjs, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	for i := range 6 {
		w.publish(t, "orders.site1.pay", fmt.Sprint("o", i))
	}
	h := hubFlags{HubStream: "ORDERS", HubDomain: "hub"}
	if _, err := ensureSourcedStream(ctx, w.ejs, w.st, streamSpec{Name: "EDGE", Duplicates: time.Minute}, h, quiet); err != nil {
		t.Fatal(err)
	}
	w.waitEdge(t, "EDGE", 6)
	applied := map[string]bool{}
	for _, id := range w.applyAll(t, "EDGE") {
		applied[id] = true
	}
	w.keepLast(t, "EDGE", 2)
	if res := w.prune(t, "EDGE"); res.Processed != 4 {
		t.Fatalf("prune removed %d rows, want 4", res.Processed)
	}
	if f, err := w.st.SourceFloor(ctx, "EDGE", "ORDERS@hub"); err != nil || f.Below != 5 {
		t.Fatalf("floor %+v, %v; want below 5", f, err)
	}
	again := w.reappliedAfter(t, "EDGE", h, applied, 6, func() {
		if _, err := w.ejs.CreateStream(ctx, jetstream.StreamConfig{Name: "EDGE", Duplicates: time.Minute,
			Sources: []*jetstream.StreamSource{{Name: "ORDERS", Domain: "hub"}}}); err != nil {
			t.Fatal(err)
		}
	})
	if len(again) > 0 {
		t.Fatalf("the edge stream made again by the operator copies %d messages already applied whose rows prune removed: %v (applied twice)", len(again), again)
	}
}
