package fleet_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/fleet"
	"github.com/jetledger/jetledger/health"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/node"
	"github.com/nats-io/nats.go/jetstream"
)

// AddSite is idempotent, and refuses to switch a site whose effects are
// sourced ephemerally; List says each site's state, worst first.
func TestAddSiteThenList(t *testing.T) {
	_, js, _ := consumertest.RunHub(t)
	ctx := t.Context()
	did, err := fleet.AddSite(ctx, js, fleet.Site{Domain: "site1", Effects: "OUT"})
	if err != nil || len(did) != 2 {
		t.Fatalf("first AddSite: %v %q; want the bucket and the stream made", err, did)
	}
	if did, err := fleet.AddSite(ctx, js, fleet.Site{Domain: "site1", Effects: "OUT"}); err != nil || len(did) != 0 {
		t.Fatalf("AddSite again: %v %q; want nothing done", err, did)
	}
	if did, err := fleet.AddSite(ctx, js, fleet.Site{Domain: "site2", Effects: "OUT"}); err != nil || len(did) != 1 || !strings.Contains(did[0], "added") {
		t.Fatalf("a second site: %v %q; want its source added", err, did)
	}
	s, err := js.Stream(ctx, fleet.HubEffectsDefault)
	if err != nil || len(s.CachedInfo().Config.Sources) != 2 || s.CachedInfo().Config.Sources[1].Consumer == nil {
		t.Fatalf("EFFECTS: %v, want two durable sources", err)
	}
	cfg := s.CachedInfo().Config
	cfg.Sources = append(cfg.Sources, &jetstream.StreamSource{Name: "OUT", Domain: "site3"})
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := fleet.AddSite(ctx, js, fleet.Site{Domain: "site3", Effects: "OUT"}); !errors.Is(err, fleet.ErrEphemeralSource) {
		t.Fatalf("a site sourced ephemerally: %v; want ErrEphemeralSource", err)
	}
	if _, err := fleet.AddSite(ctx, js, fleet.Site{Domain: "a.b"}); !errors.Is(err, fleet.ErrInvalidSite) {
		t.Fatalf("domain a.b: %v; want ErrInvalidSite", err)
	}

	kv, err := js.KeyValue(ctx, fleet.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	put := func(r fleet.Record) {
		b, _ := json.Marshal(r)
		if _, err := kv.Put(ctx, r.Site, b); err != nil {
			t.Fatal(err)
		}
	}
	up := fleet.Link{LinkStatus: node.LinkStatus{Leaf: true, Up: true}}
	put(fleet.Record{Site: "ok", Version: "jetledger v1 commit x", Link: up, LedgerFree: 1 << 40, StoreFree: -1})
	put(fleet.Record{Site: "review", Review: 2, Link: up, LedgerFree: 1 << 40, StoreFree: -1})
	put(fleet.Record{Site: "disk", Link: up, LedgerFree: 1 << 20})
	put(fleet.Record{Site: "old", Version: "jetledger v0 commit y", Link: up, LedgerFree: -1, StoreFree: -1})
	// Edges that send their attention: judged by it, the longest waiting
	// first; one whose conflicts are all acknowledged needs nobody.
	now := time.Now()
	put(fleet.Record{Site: "short", Link: up, LedgerFree: -1, StoreFree: -1, DeadLetters: 5,
		Attention: []health.Need{{Kind: ledger.AttentionDeadLetter, Count: 5, Oldest: now.Add(-time.Minute)}}})
	put(fleet.Record{Site: "long", Link: up, LedgerFree: -1, StoreFree: -1, Review: 1,
		Attention: []health.Need{{Kind: ledger.AttentionReview, Count: 1, Oldest: now.Add(-3 * time.Hour)}}})
	put(fleet.Record{Site: "acked", Version: "jetledger v1 commit x", Link: up, LedgerFree: -1, StoreFree: -1, Conflicts: 2, Attention: []health.Need{}})
	if _, err := kv.Put(ctx, "junk", []byte("not json")); err != nil {
		t.Fatal(err)
	}
	sites, err := fleet.List(ctx, js, fleet.ListConfig{Version: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range sites {
		got = append(got, s.Site+":"+s.State)
	}
	want := "long:attention short:attention disk:attention junk:attention review:attention old:behind acked:ok ok:ok"
	if strings.Join(got, " ") != want {
		t.Fatalf("List: %s; want %s", strings.Join(got, " "), want)
	}
	if err := fleet.NeedPerson(sites); err == nil || !strings.Contains(err.Error(), "5 of 8") {
		t.Fatalf("NeedPerson: %v", err)
	}
	if _, err := fleet.List(ctx, js, fleet.ListConfig{Stale: -time.Second}); !errors.Is(err, fleet.ErrInvalidConfig) {
		t.Fatalf("a negative Stale: %v; want ErrInvalidConfig", err)
	}
	stale, err := fleet.List(ctx, js, fleet.ListConfig{Stale: time.Nanosecond})
	if err != nil || stale[0].State != fleet.StateOffline {
		t.Fatalf("with everything stale: %v %+v", err, stale)
	}
	var b strings.Builder
	if err := fleet.WriteTable(&b, sites); err != nil || !strings.Contains(b.String(), "2 outbox rows in review") ||
		!strings.Contains(b.String(), "1 outbox rows in review, the oldest for 3h") {
		t.Fatalf("WriteTable: %v\n%s", err, b.String())
	}
}
