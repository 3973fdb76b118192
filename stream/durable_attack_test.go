package stream_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/stream"
	"github.com/nats-io/nats.go/jetstream"
)

// hubConsumers lists the consumers of the hub's ORDERS.
func hubConsumers(t *testing.T, w *edgeWorld) []string {
	t.Helper()
	s, err := w.hjs.Stream(t.Context(), "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	l := s.ConsumerNames(t.Context())
	for n := range l.Name() {
		names = append(names, n)
	}
	return names
}

func edgeLast(t *testing.T, w *edgeWorld, name string) uint64 {
	t.Helper()
	s, err := w.ejs.Stream(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// Two copies at one site of one hub stream, EDGE and EDGE_B (two runs
// with other filters): ensuring EDGE deletes EDGE_B's consumer on the hub,
// since "jetledger_site1_EDGE_" is a prefix of "jetledger_site1_EDGE_B_<ulid>".
func TestDurableCopyKeepsAnotherCopysConsumer(t *testing.T) {
	t.Parallel()
	w := newEdgeWorld(t, "site1")
	ctx := t.Context()
	w.hubOrders(t, 2)
	if _, err := w.ensure(ctx, stream.Config{Name: "EDGE_B", Duplicates: time.Minute}, stream.Sourced{Hub: "ORDERS", Filter: "orders.site1.>", Domain: "hub"}); err != nil {
		t.Fatal(err)
	}
	w.waitEdge(t, "EDGE_B", 2)
	if _, err := w.ensure(ctx, stream.Config{Name: "EDGE", Duplicates: time.Minute}, stream.Sourced{Hub: "ORDERS", Filter: "orders.site1.>", Domain: "hub"}); err != nil {
		t.Fatal(err)
	}
	w.waitEdge(t, "EDGE", 2)
	names := hubConsumers(t, w)
	var b bool
	for _, n := range names {
		if strings.HasPrefix(n, "jetledger_site1_EDGE_B_") {
			b = true
		}
	}
	if !b {
		t.Errorf("EDGE_B's consumer on the hub was deleted by EDGE's EnsureHubConsumer; hub consumers: %v", names)
	}
	w.publish(t, "orders.site1.pay", "late")
	consumertest.Eventually(t, time.Minute, "EDGE_B taking the late one", func() bool { return edgeLast(t, w, "EDGE_B") >= 3 })
	if n := edgeLast(t, w, "EDGE_B"); n != 3 {
		t.Errorf("EDGE_B holds %d messages, want 3: its sourcing stopped", n)
	}
}

// The same with sites: site "a" copy "b_c" and site "a_b" copy "c" share
// the prefix jetledger_a_b_c_.
func TestDurableSitesWithUnderscoresKeepTheirConsumers(t *testing.T) {
	t.Parallel()
	_, hjs, u := consumertest.RunHub(t)
	ejsA, _ := startLeaf(t, u, "a")
	ejsAB, _ := startLeaf(t, u, "a_b")
	consumertest.CreateStream(t, hjs, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	w1 := &edgeWorld{site: "a", hjs: hjs, ejs: ejsA}
	w2 := &edgeWorld{site: "a_b", hjs: hjs, ejs: ejsAB}
	for _, w := range []*edgeWorld{w1, w2} {
		nw := newEdgeWorld(t, w.site) // for a ledger only
		w.st = nw.st
	}
	ctx := t.Context()
	if _, err := w1.ensure(ctx, stream.Config{Name: "b_c", Duplicates: time.Minute}, stream.Sourced{Hub: "ORDERS", Domain: "hub"}); err != nil {
		t.Fatal(err)
	}
	if _, err := w2.ensure(ctx, stream.Config{Name: "c", Duplicates: time.Minute}, stream.Sourced{Hub: "ORDERS", Domain: "hub"}); err != nil {
		t.Fatal(err)
	}
	if names := hubConsumers(t, w1); len(names) != 2 {
		t.Errorf("hub consumers %v: want one per site's copy", names)
	}
}

// The hub's consumer deleted (by an operator, or with nats consumer rm):
// at the next start EnsureHubConsumer makes it again at the copy's start
// in the metadata, while the copy already holds everything: does the copy
// take the hub's messages a second time?
func TestDurableHubConsumerDeletedAndMadeAgain(t *testing.T) {
	t.Parallel()
	w := newEdgeWorld(t, "site1")
	ctx := t.Context()
	w.hubOrders(t, 6)
	h := stream.Sourced{Hub: "ORDERS", Domain: "hub"}
	info, err := w.ensure(ctx, stream.Config{Name: "EDGE", Duplicates: time.Second}, h)
	if err != nil {
		t.Fatal(err)
	}
	w.waitEdge(t, "EDGE", 6)
	s, _ := w.hjs.Stream(ctx, "ORDERS")
	for _, n := range hubConsumers(t, w) {
		if err := s.DeleteConsumer(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * time.Second) // past the copy's duplicate window
	if err := stream.EnsureHubConsumer(ctx, w.ejs, info); err != nil {
		t.Fatal(err)
	}
	w.publish(t, "orders.site1.pay", "o6")
	consumertest.Eventually(t, time.Minute, "EDGE taking o6", func() bool { return edgeLast(t, w, "EDGE") >= 7 })
	if n := edgeLast(t, w, "EDGE"); n != 7 {
		t.Errorf("EDGE holds %d messages after the consumer was made again, want 7", n)
	}
}

// The hub's ORDERS deleted and made again (a new instance) while run runs:
// the durable consumer goes with it, and KeepHubConsumer, which run keeps
// running, makes it again at the new instance's start; an ephemeral source
// resumes on its own. (Before it kept looking, the durable copy held 2 of
// 7 for good.)
func TestDurableHubStreamRecreatedWhileRunning(t *testing.T) {
	bothSourcings(t, func(t *testing.T, site string) {
		t.Parallel()
		w := newEdgeWorld(t, site)
		ctx := t.Context()
		w.hubOrders(t, 2)
		h := stream.Sourced{Hub: "ORDERS", Domain: "hub"}
		info, err := w.ensure(ctx, stream.Config{Name: "EDGE", Duplicates: time.Second}, h)
		if err != nil {
			t.Fatal(err)
		}
		kctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); stream.KeepHubConsumer(kctx, w.ejs, info, quiet) }()
		defer func() { stop(); <-done }()
		w.waitEdge(t, "EDGE", 2)
		if err := w.hjs.DeleteStream(ctx, "ORDERS"); err != nil {
			t.Fatal(err)
		}
		w.hubOrders(t, 0)
		for i := range 5 {
			w.publish(t, "orders.site1.pay", "n"+string(rune('0'+i)))
		}
		consumertest.Eventually(t, 2*time.Minute, "EDGE holding the 5 of the hub's stream made again", func() bool { return edgeLast(t, w, "EDGE") >= 7 })
		if n := edgeLast(t, w, "EDGE"); n != 7 {
			t.Errorf("EDGE holds %d messages, want 7", n)
		}
	})
}

// As above, then run restarts (EnsureHubConsumer makes the consumer
// again): the new instance's messages must all reach the copy.
func TestDurableHubStreamRecreatedThenRestart(t *testing.T) {
	bothSourcings(t, func(t *testing.T, site string) {
		t.Parallel()
		w := newEdgeWorld(t, site)
		ctx := t.Context()
		w.hubOrders(t, 6)
		h := stream.Sourced{Hub: "ORDERS", Domain: "hub"}
		if _, err := w.ensure(ctx, stream.Config{Name: "EDGE", Duplicates: time.Second}, h); err != nil {
			t.Fatal(err)
		}
		w.waitEdge(t, "EDGE", 6)
		if err := w.hjs.DeleteStream(ctx, "ORDERS"); err != nil {
			t.Fatal(err)
		}
		w.hubOrders(t, 0)
		for i := range 3 {
			w.publish(t, "orders.site1.pay", "n"+string(rune('0'+i)))
		}
		// run restarts: EnsureSourced finds the stream, then KeepHubConsumer.
		if _, err := w.ensure(ctx, stream.Config{Name: "EDGE", Duplicates: time.Second}, h); err != nil {
			t.Fatal(err)
		}
		consumertest.Eventually(t, 2*time.Minute, "EDGE taking the new instance's 3", func() bool { return edgeLast(t, w, "EDGE") >= 9 })
		if n := edgeLast(t, w, "EDGE"); n != 9 {
			t.Errorf("EDGE holds %d messages after the restart, want 9 (6 old, 3 of the new instance)", n)
		}
	})
}

// The edge's effects stream lost (the store gone) and made again by the
// next run: the hub's EFFECTS, whose durable source's consumer is new,
// must take the new stream's effects from its start.
func TestDurableEffectsStreamMadeAgainReachesTheHub(t *testing.T) {
	t.Parallel()
	_, hjs, u := consumertest.RunHub(t)
	ejs, _ := startLeaf(t, u, "site1")
	ctx := t.Context()
	e := stream.Effects{Stream: "OUT", Subject: "effects.site1", Timeout: time.Second, Site: "site1", Logger: quiet}
	if err := stream.EnsureEffects(ctx, ejs, e); err != nil {
		t.Fatal(err)
	}
	consumertest.CreateStream(t, hjs, jetstream.StreamConfig{Name: "EFFECTS", Sources: []*jetstream.StreamSource{stream.HubEffectsSource("site1", "OUT")}})
	pub := func(id string) {
		if _, err := ejs.Publish(ctx, "effects.site1", []byte("x"), jetstream.WithMsgID(id)); err != nil {
			t.Fatal(err)
		}
	}
	hubHas := func(n uint64) func() bool {
		return func() bool {
			s, err := hjs.Stream(ctx, "EFFECTS")
			if err != nil {
				return false
			}
			info, err := s.Info(ctx)
			return err == nil && info.State.Msgs >= n
		}
	}
	for i := range 5 {
		pub("a" + string(rune('0'+i)))
	}
	consumertest.Eventually(t, 20*time.Second, "5 effects at the hub", hubHas(5))
	if err := ejs.DeleteStream(ctx, "OUT"); err != nil {
		t.Fatal(err)
	}
	e.LastSent = func(context.Context) (uint64, error) { return 5, nil } // as the ledger recorded the sends (ledger.Store.LastExternalSeq)
	// Right after the deletion the server may still be removing the old
	// store ("error creating store for stream", 10049): made again once it
	// has.
	var err error
	consumertest.Eventually(t, 20*time.Second, "the effects stream made again", func() bool {
		err = stream.EnsureEffects(ctx, ejs, e)
		return err == nil || !strings.Contains(err.Error(), "error creating store")
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		pub("b" + string(rune('0'+i)))
	}
	consumertest.Eventually(t, 90*time.Second, "the new stream's 3 effects at the hub", hubHas(8))
	hs, _ := hjs.Stream(ctx, "EFFECTS")
	if info, _ := hs.Info(ctx); info.State.Msgs != 8 {
		t.Errorf("the hub's EFFECTS holds %d effects, want 8", info.State.Msgs)
	}
}
