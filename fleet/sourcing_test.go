package fleet_test

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/fleet"
	"github.com/jetledger/jetledger/node"
	"github.com/nats-io/nats.go"
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
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	edge, err := node.Start(ctx, node.Config{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), Logger: quiet,
		Leaf: &node.LeafConfig{URLs: []string{u.String()}, Domain: "site1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(edge.Close)
	nc, err := nats.Connect(edge.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	consumertest.Eventually(t, 10*time.Second, "the edge's link up", func() bool {
		lz, _ := hub.Leafz(nil)
		return edge.Link().Up && lz != nil && lz.NumLeafs == 1
	})
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
