package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/fleet"
)

// jetledger fleet names each site by its key in the table and in --json,
// and a record claiming another site is a mismatch: site2's record that
// says it is site1 is listed as site2, first, with the site it claims
// beside it, and fleet exits 1.
func TestFleetNamesSitesByKey(t *testing.T) {
	t.Parallel()
	hub, js, _ := consumertest.RunHub(t)
	if code, _, stderr := runMain("hub", "--nats", hub.ClientURL(), "--domain", "site1"); code != 0 {
		t.Fatalf("hub: exit %d\n%s", code, stderr)
	}
	kv, err := js.KeyValue(t.Context(), fleet.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	rec := func(site string, dead int64) []byte {
		b, _ := json.Marshal(fleet.Record{Site: site, Version: "v1", DeadLetters: dead, LedgerFree: -1, StoreFree: -1})
		return b
	}
	for key, value := range map[string][]byte{"site1": rec("site1", 0), "site2": rec("site1", 2)} {
		if _, err := kv.Put(t.Context(), key, value); err != nil {
			t.Fatal(err)
		}
	}

	code, stdout, stderr := runMain("fleet", "--nats", hub.ClientURL(), "--json")
	if code != 1 {
		t.Errorf("fleet --json: exit %d; want 1 (a site needs a person)\n%s", code, stderr)
	}
	var rows []map[string]any // the JSON as a reader of it sees it
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	type row struct{ site, claims, state any }
	var got []row
	for _, r := range rows {
		got = append(got, row{r["site"], r["record_site"], r["state"]})
	}
	want := []row{{"site2", "site1", fleet.StateMismatch}, {"site1", "site1", fleet.StateOK}}
	if !slices.Equal(got, want) {
		t.Fatalf("fleet --json:\n got %v\nwant %v\n%s", got, want, stdout)
	}

	code, stdout, _ = runMain("fleet", "--nats", hub.ClientURL())
	var names, states []string
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n")[1:] {
		f := strings.Fields(line)
		names, states = append(names, f[0]), append(states, f[1])
	}
	if code != 1 || !slices.Equal(names, []string{"site2", "site1"}) || !slices.Equal(states, []string{fleet.StateMismatch, fleet.StateOK}) {
		t.Fatalf("fleet: exit %d, sites %q %q; want 1, site2 mismatch then site1 ok\n%s", code, names, states, stdout)
	}
}
