package main

import (
	"bytes"
	"context"
	"github.com/jetledger/jetledger/internal/demo"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/jetledger/jetledger/ledger"
)

// The demo's consumer #1 is this binary run again: as the test binary, it
// runs the hidden command instead of the tests.
func init() {
	if len(os.Args) > 1 && os.Args[1] == "demo-consumer" {
		os.Exit(mainExit(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
}

// demoNumbers are the numbers the demo's narration tells.
var demoNumbers = map[string]*regexp.Regexp{
	"killed":  regexp.MustCompile(`Consumer #1 committed (\d+) events and was SIGKILLed after committing batch (\d+)`),
	"acked":   regexp.MustCompile(`the server had acks for (\d+) of them, so (\d+) committed events were never acked`),
	"resumed": regexp.MustCompile(`It applied (\d+) new events and recognised (\d+) redelivered ones as duplicates`),
	"kept":    regexp.MustCompile(`(?m)^kept (.+)$`),
}

// told returns the numbers of the narration's sentence key.
func told(tb testing.TB, out, key string) []uint64 {
	tb.Helper()
	m := demoNumbers[key].FindStringSubmatch(out)
	if m == nil {
		tb.Fatalf("the narration has no %q sentence:\n%s", key, out)
	}
	var n []uint64
	for _, s := range m[1:] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			tb.Fatal(err)
		}
		n = append(n, v)
	}
	return n
}

// What the narration says consumer #1 committed and had acked when the
// kill came agrees with what consumer #2 then found, and with the ledger:
// batches are pipelined, so the kill in batch 3 may find batch 4 committed
// too (issue 21: "committed 75 … 25 unacked", then "400 new, 50
// duplicates"). Run it several times: -count=5.
func TestDemoNarrationAgreesWithTheLedger(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := mainExit(context.Background(), []string{"demo", "--keep"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	out := stdout.String()
	dir := demoNumbers["kept"].FindStringSubmatch(out)
	if dir == nil {
		t.Fatalf("no kept directory:\n%s", out)
	}
	t.Cleanup(func() { os.RemoveAll(dir[1]) })
	st, err := ledger.Open(filepath.Join(dir[1], "demo.db"), ledger.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	stats, err := st.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	events := uint64(stats.Processed)
	k, a, r := told(t, out, "killed"), told(t, out, "acked"), told(t, out, "resumed")
	committed, batch, acked, unacked, applied, dups := k[0], k[1], a[0], a[1], r[0], r[1]
	switch {
	case events != 500:
		t.Errorf("the ledger has %d events, want the demo's 500", events)
	case committed < batch*uint64(demo.Plan.BatchSize) || committed > events:
		t.Errorf("committed %d: want at least batch %d's worth and at most %d", committed, batch, events)
	case acked > committed-uint64(demo.Plan.BatchSize):
		t.Errorf("acked %d of %d committed: the batch killed in was acked", acked, committed)
	case unacked != committed-acked:
		t.Errorf("never acked %d, want committed %d - acked %d", unacked, committed, acked)
	case applied != events-committed:
		t.Errorf("consumer #2 applied %d, want the ledger's %d - the %d consumer #1 committed", applied, events, committed)
	case dups != unacked:
		t.Errorf("consumer #2 met %d duplicates, want the %d committed but never acked", dups, unacked)
	}
	if t.Failed() {
		t.Logf("narration:\n%s", out)
	}
}
