package main

import (
	"fmt"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/node"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

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
	hub, hjs, u := consumertest.RunHub(t)
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
