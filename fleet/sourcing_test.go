package fleet_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/fleet"
	"github.com/jetledger/jetledger/node"
	"github.com/nats-io/nats.go/jetstream"
)

// An edge's copy whose hub stream is deleted (issue 43: the edge logged
// one warning, fleet said ok, /healthz said the hub was fine): the
// sourcing says the server's error, and its need for a person, for as long
// as it fails; the hub's stream made again, both go.
func TestACopyWhoseHubStreamIsGoneNeedsAPerson(t *testing.T) {
	t.Parallel()
	hub, hjs, u := consumertest.RunHub(t)
	ctx := t.Context()
	consumertest.CreateStream(t, hjs, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	_, nc := startEdge(t, hub, u, "site1")
	js, _ := jetstream.New(nc)
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "COPY", Sources: []*jetstream.StreamSource{{Name: "ORDERS", Domain: node.DefaultHubDomain}}})
	read := func() fleet.Link {
		l, err := fleet.ReadSourcing(ctx, js, "COPY", "")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	if _, err := hjs.Publish(ctx, "orders.1", []byte("x")); err != nil {
		t.Fatal(err)
	}
	consumertest.Eventually(t, 30*time.Second, "the copy sourcing", func() bool {
		s, err := js.Stream(ctx, "COPY")
		return err == nil && s.CachedInfo().State.Msgs == 1 && read().SourceError == ""
	})
	if err := hjs.DeleteStream(ctx, "ORDERS"); err != nil {
		t.Fatal(err)
	}
	consumertest.Eventually(t, time.Minute, "the failing source said", func() bool {
		l := read()
		return l.SourceError != "" && len(l.Needs()) == 1 && strings.Contains(l.Line(), "SOURCING FAILS")
	})
	t.Logf("said: %s", read().Line())
	consumertest.CreateStream(t, hjs, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	consumertest.Eventually(t, 2*time.Minute, "the source fixed", func() bool { return read().SourceError == "" })
}
