package stream_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/stream"
	"github.com/nats-io/nats.go/jetstream"
)

// An edge's copy of the hub's stream names, on each message, the hub's
// sequence and the hub stream's instance (nats-server's identity of it,
// which Identity computes): PruneBound reads them from the first
// message the copy keeps, and a copy made again starts at that sequence of
// the same instance only. The hub stream made again is another instance,
// whose messages are all new; one that is not there yet will be another;
// and with the hub out of reach the start is waited for, not guessed.
func TestSourcedCopyNamesTheHubInstance(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	hub, hjs, u := consumertest.RunHub(t)
	ejs, _ := startLeaf(t, u, "site1")
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })

	hubStream := prunedCopy(t, hjs, ejs, st)
	// A row of the copy before, at its sequence 3 (hub sequence 4).
	if _, err := st.ApplyBatch(ctx, []ledger.Delivery{{MessageID: "m3", Stream: "EDGE", Sequence: 3, Subject: "orders.site1.pay", Data: []byte("x")}},
		func(context.Context, *ledger.Tx, ledger.Delivery) error { return nil }, ledger.Budget{}); err != nil {
		t.Fatal(err)
	}
	src := &jetstream.StreamSource{Name: "ORDERS", FilterSubject: "orders.site1.*", Domain: "hub"} // another filter: the same source
	start := func(ctx context.Context) (uint64, error) {
		return stream.SourceStart(ctx, ejs, "EDGE", src, 0, st, quiet)
	}
	if seq, err := start(ctx); err != nil || seq != 3 {
		t.Fatalf("start of a copy made again = %d, %v; want 3", seq, err)
	}
	// The new copy takes hub sequences 3 and 4 as its 1 and 2: the row's
	// copy comes at 2 at most, below its 3 of before, so it stays at 3.
	lastSeq := func() int {
		var n int
		if err := st.DB().QueryRowContext(ctx, `SELECT last_seq FROM processed_messages WHERE message_id = 'm3'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := lastSeq(); n != 3 {
		t.Fatalf("the row's last sequence = %d, want 3", n)
	}
	for i := range 3 {
		if _, err := hjs.Publish(ctx, "orders.site1.pay", []byte("x"), jetstream.WithMsgID(fmt.Sprint("late", i))); err != nil {
			t.Fatal(err)
		}
	}
	// Hub sequences 3 to 7 now: a copy made again could hold the row's at 5.
	if seq, err := start(ctx); err != nil || seq != 3 || lastSeq() != 5 {
		t.Fatalf("start = %d, %v, the row held to %d; want 3, held to 5", seq, err, lastSeq())
	}
	if err := hjs.DeleteStream(ctx, "ORDERS"); err != nil {
		t.Fatal(err)
	}
	if seq, err := start(ctx); err != nil || seq != 0 {
		t.Fatalf("start with the hub's stream gone = %d, %v; want 0 (made later, it is another)", seq, err)
	}
	consumertest.CreateStream(t, hjs, hubStream)
	if seq, err := start(ctx); err != nil || seq != 0 {
		t.Fatalf("start with the hub's stream made again = %d, %v; want 0 (its messages are new)", seq, err)
	}
	// Recorded for the new instance, the floor holds for it.
	if _, err := st.Prune(ctx, ledger.PruneOptions{Stream: "EDGE", FirstSeq: 1,
		Floors: []ledger.SourceFloor{{Source: "ORDERS@hub", Instance: stream.Identity(hubStreamInfo(t, hjs).Created), Below: 1}}}); err != nil {
		t.Fatal(err)
	}
	if seq, err := start(ctx); err != nil || seq != 1 {
		t.Fatalf("start after a floor of the new instance = %d, %v; want 1", seq, err)
	}
	hub.Shutdown()
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if seq, err := start(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("start with the hub out of reach = %d, %v; want to wait (context.DeadlineExceeded)", seq, err)
	}
	// A new site's copy, without a floor or rows, starts at the source's
	// start and asks nobody.
	if seq, err := stream.SourceStart(ctx, ejs, "NEW", src, 0, st, quiet); err != nil || seq != 0 {
		t.Fatalf("start without a floor = %d, %v; want 0", seq, err)
	}
}

func hubStreamInfo(t *testing.T, js jetstream.JetStream) *jetstream.StreamInfo {
	t.Helper()
	s, err := js.Stream(t.Context(), "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo()
}

// prunedCopy creates the hub's ORDERS with one message of site 2 and three
// of site 1, an edge copy EDGE of site 1's keeping the last 2, checks the
// floor PruneBound reads from it and prunes by it; it returns ORDERS's
// configuration.
func prunedCopy(t *testing.T, hjs, ejs jetstream.JetStream, st *ledger.Store) jetstream.StreamConfig {
	t.Helper()
	ctx := t.Context()
	hubStream := jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}
	consumertest.CreateStream(t, hjs, hubStream)
	for i := range 4 {
		subj := "orders.site1.pay"
		if i == 0 {
			subj = "orders.site2.pay" // not copied: hub sequence 1 is another site's
		}
		if _, err := hjs.Publish(ctx, subj, []byte("x"), jetstream.WithMsgID(fmt.Sprint("m", i))); err != nil {
			t.Fatal(err)
		}
	}
	h := stream.Sourced{Hub: "ORDERS", Filter: "orders.site1.>", Domain: "hub", Ledger: st,
		Stream: stream.Config{Name: "EDGE", Duplicates: time.Minute, Limits: stream.Limits{MaxMsgs: 2}, Logger: quiet}}
	if _, err := stream.EnsureSourced(ctx, ejs, h); err != nil {
		t.Fatal(err)
	}
	var info *jetstream.StreamInfo
	consumertest.Eventually(t, 10*time.Second, "the edge's copy has the 3 of site 1, keeping the last 2", func() bool {
		s, err := ejs.Stream(ctx, "EDGE")
		if err == nil {
			info, err = s.Info(ctx)
		}
		return err == nil && info.State.LastSeq == 3
	})
	s, err := ejs.Stream(ctx, "EDGE")
	if err != nil {
		t.Fatal(err)
	}
	first, floors, err := stream.PruneBound(ctx, s, info)
	if err != nil {
		t.Fatal(err)
	}
	hinfo, err := hjs.Stream(ctx, "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	// The copy keeps its sequences 2 and 3: hub sequences 3 and 4.
	want := ledger.SourceFloor{Source: "ORDERS@hub", Instance: stream.Identity(hinfo.CachedInfo().Created), Below: 3}
	if first != 2 || len(floors) != 1 || floors[0] != want {
		t.Fatalf("PruneBound = %d, %+v; want 2, %+v", first, floors, want)
	}
	if _, err := st.Prune(ctx, ledger.PruneOptions{Stream: "EDGE", FirstSeq: first, Floors: floors}); err != nil {
		t.Fatal(err)
	}
	return hubStream
}
