package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/fleet"
	"github.com/jetledger/jetledger/node"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// putRaw puts value under key in the hub's bucket, as any writer of the
// bucket can.
func putRaw(tb testing.TB, kv jetstream.KeyValue, key, value string) {
	tb.Helper()
	if _, err := kv.Put(tb.Context(), key, []byte(value)); err != nil {
		tb.Fatal(err)
	}
}

// healthy is a record that needs no person, claiming to be site.
func healthy(site string) string {
	return fmt.Sprintf(`{"site":%q,"version":"v1","ledger_disk_free":-1,"store_disk_free":-1,"link":{"leaf":true,"up":true}}`, site)
}

// Each row is the key it is stored under, never the site its record
// names: site2's record claiming to be site1 (and a second record
// claiming site1), a record naming no site and a key no site's domain can
// be are each listed under their key as a mismatch, first; the genuine
// site1 stays ok, and each key is listed once.
func TestListNamesEachSiteByItsKey(t *testing.T) {
	t.Parallel()
	_, js, _ := consumertest.RunHub(t)
	ctx := t.Context()
	if _, err := fleet.AddSite(ctx, js, fleet.Site{Domain: "site1"}); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, fleet.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	putRaw(t, kv, "site1", healthy("site1"))
	putRaw(t, kv, "site2", `{"site":"site1","version":"v1","dead_letters":3,"ledger_disk_free":-1,"store_disk_free":-1}`)
	putRaw(t, kv, "site3", healthy("site1"))
	putRaw(t, kv, "site4", `{"version":"v1","ledger_disk_free":-1,"store_disk_free":-1}`)
	putRaw(t, kv, "site5.x", healthy("site5.x"))
	putRaw(t, kv, "junk", "not json")

	sites, err := fleet.List(ctx, js, fleet.ListConfig{})
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ site, state, claims string }
	var got []row
	for _, s := range sites {
		got = append(got, row{s.Site, s.State, s.RecordSite})
		if s.Attention != (s.State != fleet.StateOK) {
			t.Errorf("%s: %s with Attention %v", s.Site, s.State, s.Attention)
		}
	}
	want := []row{
		{"site2", fleet.StateMismatch, "site1"}, // two reasons: the claim and the dead letters
		{"site3", fleet.StateMismatch, "site1"},
		{"site4", fleet.StateMismatch, ""},
		{"site5.x", fleet.StateMismatch, "site5.x"},
		{"junk", fleet.StateAttention, ""},
		{"site1", fleet.StateOK, "site1"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("List:\n got %v\nwant %v", got, want)
	}
	if sites[0].DeadLetters != 3 {
		t.Errorf("site2's dead letters: %d; want its record's 3 shown under its key", sites[0].DeadLetters)
	}
	if err := fleet.NeedPerson(sites); err == nil {
		t.Error("NeedPerson: nil with four mismatched records")
	}
}

// A Reporter keys its record by its Site and names the same site in it,
// so List shows it ok under that key; a Site that is no JetStream domain
// is refused before anything is written.
func TestReporterKeyIsItsSite(t *testing.T) {
	t.Parallel()
	hub, js, u := consumertest.RunHub(t)
	ctx := t.Context()
	if _, err := fleet.AddSite(ctx, js, fleet.Site{Domain: "site1"}); err != nil {
		t.Fatal(err)
	}
	edge, nc := startEdge(t, hub, u, "site1")
	gather := func(context.Context) fleet.Record { return fleet.Record{Version: "v1", LedgerFree: -1, StoreFree: -1} }
	rep := &fleet.Reporter{Site: "site1", HubDomain: node.DefaultHubDomain, Conn: nc, Link: edge.Link, Gather: gather, Logger: quiet}
	if err := rep.Send(ctx); err != nil {
		t.Fatal(err)
	}
	for _, site := range []string{"site1.x", "", "a b"} {
		bad := &fleet.Reporter{Site: site, HubDomain: node.DefaultHubDomain, Conn: nc, Link: edge.Link, Gather: gather, Logger: quiet}
		if err := bad.Send(ctx); !errors.Is(err, fleet.ErrInvalidSite) {
			t.Errorf("Send with Site %q: %v; want ErrInvalidSite", site, err)
		}
	}
	sites, err := fleet.List(ctx, js, fleet.ListConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sites) != 1 || sites[0].Site != "site1" || sites[0].RecordSite != "site1" || sites[0].State != fleet.StateOK {
		t.Fatalf("List: %+v; want site1 alone, ok", sites)
	}
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// startEdge starts an embedded server as site, a leaf of hub (at u), and
// waits for its link; it returns the edge and a connection to it.
func startEdge(t *testing.T, hub *server.Server, u *url.URL, site string) (*node.Node, *nats.Conn) {
	t.Helper()
	edge, err := node.Start(t.Context(), node.Config{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), Logger: quiet,
		Leaf: &node.LeafConfig{URLs: []string{u.String()}, Domain: site}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(edge.Close)
	nc, err := nats.Connect(edge.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	consumertest.Eventually(t, 10*time.Second, "the edge's link up", func() bool {
		lz, _ := hub.Leafz(nil)
		return edge.Link().Up && lz != nil && lz.NumLeafs == 1
	})
	return edge, nc
}
