package lazyfs_test

import (
	"testing"

	"github.com/jetledger/jetledger/integration/lazyfs"
)

// countMessages runs a child that starts nats-server on the store on the
// mount and reports the stream's messages, having read each one back.
func countMessages(tb testing.TB, dir string) report {
	tb.Helper()
	got := startChild(tb, roleNATSCount, childArgs{Dir: dir}).wait(tb, childTimeout)
	for _, r := range got {
		if r.Event == "count" {
			return r
		}
	}
	tb.Fatal("count child reported no count")
	return report{}
}

// publishAndCut runs nats-server with its JetStream store on the mount,
// publishes until at least minAcked messages are acknowledged, kills it
// mid-stream, cuts the power, and returns the acknowledged count and what a
// restarted server finds.
func publishAndCut(t testing.TB, opts lazyfs.Options, syncAlways bool, minAcked int) (acked int, got report, st lazyfs.Stats) {
	t.Helper()
	d := newDisk(t, opts)
	fsys := d.mount(t)
	p := startChild(t, roleNATSPublish, childArgs{Dir: d.mnt, Msgs: 10 * minAcked, SyncAlways: syncAlways})
	seen := p.until(t, childTimeout, func(r report) bool { return r.Event == "acked" && r.N >= minAcked })
	acked = max(seen.N, lastAcked(p.kill()))
	st = powerCut(t, fsys)

	d.mount(t)
	return acked, countMessages(t, d.mnt), st
}

// TestNATSSyncAlways: with SyncAlways every acknowledged message survives a
// crash and power cut. It does under the strict namespace too, though
// nats-server never fsyncs the msgs directory when it creates a message
// block: its later fsync of the stream directory (for meta.inf) commits the
// journal prefix that holds the block's create.
func TestNATSSyncAlways(t *testing.T) {
	t.Parallel()
	for _, strict := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "strict namespace"}[strict], func(t *testing.T) {
			t.Parallel()
			acked, got, st := publishAndCut(t, lazyfs.Options{StrictNamespace: strict}, true, 200)
			t.Logf("acked %d; %d survived (last sequence %d); %d fsyncs, %d directory fsyncs; the cut dropped %d bytes in %d files and %d namespace changes",
				acked, got.N, got.Last, st.Fsyncs, st.DirFsyncs, st.DroppedBytes, st.DroppedFiles, st.DroppedChanges)
			if got.N < acked || got.N != got.Last {
				t.Fatalf("after the cut: %d messages, last sequence %d; want all %d acknowledged", got.N, got.Last, acked)
			}
		})
	}
}

// TestNATSDefaultSyncInterval: with the default sync interval (2 minutes)
// nats-server acknowledges messages it has not fsynced, and a power cut
// loses them. This is the check that a durability test on the mount can
// fail.
func TestNATSDefaultSyncInterval(t *testing.T) {
	t.Parallel()
	acked, got, st := publishAndCut(t, lazyfs.Options{}, false, 200)
	t.Logf("acked %d; %d survived, %d lost; %d fsyncs, %d directory fsyncs; the cut dropped %d bytes in %d files and %d namespace changes",
		acked, got.N, acked-got.N, st.Fsyncs, st.DirFsyncs, st.DroppedBytes, st.DroppedFiles, st.DroppedChanges)
	if got.N >= acked {
		t.Fatalf("after the cut: %d of %d acknowledged messages survived; want losses without fsync", got.N, acked)
	}
}
