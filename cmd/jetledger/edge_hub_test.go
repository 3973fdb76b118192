package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/node"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// startHub starts a test's hub: a server in JetStream domain "hub" that
// takes leaf connections. It returns the server, a JetStream client of it
// and the URL an edge joins it by.
func startHub(t *testing.T) (*server.Server, jetstream.JetStream, *url.URL) {
	t.Helper()
	leafPort := freeTCPPort(t)
	hub := consumertest.RunServerWithOptions(t, &server.Options{JetStreamDomain: "hub", ServerName: "hub",
		LeafNode: server.LeafNodeOpts{Host: "127.0.0.1", Port: leafPort}})
	_, js := consumertest.Connect(t, hub)
	u, _ := url.Parse(fmt.Sprintf("nats-leaf://127.0.0.1:%d", leafPort))
	return hub, js, u
}

// startLeaf starts run's embedded server as an edge: a leaf of the hub at
// hubURL, in its own JetStream domain. It returns a JetStream client of it
// and its URL, without waiting for the leaf connection (waitLeafs).
func startLeaf(t *testing.T, hubURL *url.URL, domain string) (jetstream.JetStream, string) {
	t.Helper()
	e, err := startEmbedded(t.Context(), node.Config{Listen: "127.0.0.1:0", StoreDir: filepath.Join(t.TempDir(), "s"),
		Leaf: &node.LeafConfig{URLs: []string{hubURL.String()}, Domain: domain}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	nc, err := nats.Connect(e.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	return js, e.ClientURL()
}

// waitLeafs waits until the hub has n leaf connections at once.
func waitLeafs(t *testing.T, hub *server.Server, n int) {
	t.Helper()
	consumertest.Eventually(t, 10*time.Second, fmt.Sprintf("the hub to have %d edges connected at once", n), func() bool {
		lz, _ := hub.Leafz(nil)
		return lz != nil && lz.NumLeafs == n
	})
}

// Two sites on one hub: the hub keeps both leaf connections (it drops a
// leaf whose server name it already has, so each edge's server is named by
// its domain) and reads each site's streams by its domain.
func TestTwoEdgesShareAHub(t *testing.T) {
	hub, hjs, u := startHub(t)
	var edges []jetstream.JetStream
	for i, subj := range []string{"effects.siteA", "effects.siteB"} {
		js, _ := startLeaf(t, u, []string{"siteA", "siteB"}[i])
		consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "OUT", Subjects: []string{subj}})
		edges = append(edges, js)
	}
	waitLeafs(t, hub, 2)
	// The hub collects site A's effects by its domain.
	consumertest.CreateStream(t, hjs, jetstream.StreamConfig{Name: "EFFECTS_A", Sources: []*jetstream.StreamSource{{Name: "OUT", Domain: "siteA"}}})
	for i := range 5 {
		if _, err := edges[0].Publish(t.Context(), "effects.siteA", []byte("a"), jetstream.WithMsgID(fmt.Sprint("A", i))); err != nil {
			t.Fatal(err)
		}
		if _, err := edges[1].Publish(t.Context(), "effects.siteB", []byte("b"), jetstream.WithMsgID(fmt.Sprint("B", i))); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(8 * time.Second)
	var subjects map[string]uint64
	for time.Now().Before(deadline) {
		s, err := hjs.Stream(t.Context(), "EFFECTS_A")
		if err == nil {
			info, _ := s.Info(t.Context(), jetstream.WithSubjectFilter(">"))
			subjects = info.State.Subjects
			if subjects["effects.siteA"] == 5 && len(subjects) == 1 {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if subjects["effects.siteA"] != 5 || len(subjects) != 1 {
		t.Fatalf("the hub's source of site A holds %v; want effects.siteA: 5 only", subjects)
	}
}

// An edge's copy of the hub's stream names, on each message, the hub's
// sequence and the hub stream's instance (nats-server's identity of it,
// which streamIdentity computes): pruneBound reads them from the first
// message the copy keeps, and a copy made again starts at that sequence of
// the same instance only. The hub stream made again is another instance,
// whose messages are all new; one that is not there yet will be another;
// and with the hub out of reach the start is waited for, not guessed.
func TestSourcedCopyNamesTheHubInstance(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	hub, hjs, u := startHub(t)
	ejs, _ := startLeaf(t, u, "site1")
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })

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
	h := hubFlags{HubStream: "ORDERS", HubFilter: "orders.site1.>", HubDomain: "hub"}
	spec := streamSpec{Name: "EDGE", Duplicates: time.Minute, Limits: streamLimitFlags{MaxMsgs: 2}}
	if _, err := ensureSourcedStream(ctx, ejs, st, spec, h, quiet); err != nil {
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
	first, floors, err := pruneBound(ctx, s, info)
	if err != nil {
		t.Fatal(err)
	}
	hinfo, err := hjs.Stream(ctx, "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	// The copy keeps its sequences 2 and 3: hub sequences 3 and 4.
	want := ledger.SourceFloor{Source: "ORDERS@hub", Instance: streamIdentity(hinfo.CachedInfo().Created), Below: 3}
	if first != 2 || len(floors) != 1 || floors[0] != want {
		t.Fatalf("pruneBound = %d, %+v; want 2, %+v", first, floors, want)
	}
	if _, err := st.Prune(ctx, ledger.PruneOptions{Stream: "EDGE", FirstSeq: first, Floors: floors}); err != nil {
		t.Fatal(err)
	}
	// A row of the copy before, at its sequence 3 (hub sequence 4).
	if _, err := st.ApplyBatch(ctx, []ledger.Delivery{{MessageID: "m3", Stream: "EDGE", Sequence: 3, Subject: "orders.site1.pay", Data: []byte("x")}},
		func(context.Context, *ledger.Tx, ledger.Delivery) error { return nil }, ledger.Budget{}); err != nil {
		t.Fatal(err)
	}
	src := &jetstream.StreamSource{Name: "ORDERS", FilterSubject: "orders.site1.*", Domain: "hub"} // another filter: the same source
	start := func(ctx context.Context) (uint64, error) { return sourceStart(ctx, ejs, "EDGE", src, 0, st, quiet) }
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
		Floors: []ledger.SourceFloor{{Source: "ORDERS@hub", Instance: streamIdentity(hubStreamInfo(t, hjs).Created), Below: 1}}}); err != nil {
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
	if seq, err := sourceStart(ctx, ejs, "NEW", src, 0, st, quiet); err != nil || seq != 0 {
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
