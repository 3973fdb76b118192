package lazyfs_test

import (
	"testing"
	"time"

	"github.com/jetledger/jetledger/integration/lazyfs"
)

const childTimeout = 2 * time.Minute

// countRows runs a child that opens the database on the mount and reports
// its rows and counter.
func countRows(tb testing.TB, dir string) report {
	tb.Helper()
	got := startChild(tb, roleSQLiteCount, childArgs{Dir: dir}).wait(tb, childTimeout)
	for _, r := range got {
		if r.Event == "count" {
			return r
		}
	}
	tb.Fatal("count child reported no count")
	return report{}
}

// TestSQLiteSynchronousFull kills SQLite in WAL mode with synchronous=FULL
// in the middle of committing rows, cuts the power, and finds every
// acknowledged commit on the new mount.
func TestSQLiteSynchronousFull(t *testing.T) {
	t.Parallel()
	for _, strict := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "strict namespace"}[strict], func(t *testing.T) {
			t.Parallel()
			d := newDisk(t, lazyfs.Options{StrictNamespace: strict})
			fsys := d.mount(t)
			w := startChild(t, roleSQLiteWrite, childArgs{Dir: d.mnt, Synchronous: "FULL", Rows: 1000})
			seen := w.until(t, childTimeout, func(r report) bool { return r.Event == "acked" && r.N >= 150 })
			acked := max(seen.N, lastAcked(w.kill()))
			st := powerCut(t, fsys)
			t.Logf("acked %d rows; power cut dropped %d bytes in %d files and %d namespace changes",
				acked, st.DroppedBytes, st.DroppedFiles, st.DroppedChanges)

			d.mount(t)
			got := countRows(t, d.mnt)
			if got.N < acked || got.N != got.Last {
				t.Fatalf("after the cut: %d rows, ids up to %d; want every one of the %d acknowledged", got.N, got.Last, acked)
			}
		})
	}
}

// TestSQLiteSynchronousOff shows the filesystem really forgets: rows that
// SQLite acknowledged with synchronous=OFF, never fsynced, are lost at the
// power cut, while the ones committed earlier with synchronous=FULL stay.
func TestSQLiteSynchronousOff(t *testing.T) {
	t.Parallel()
	d := newDisk(t, lazyfs.Options{})
	fsys := d.mount(t)

	const durable, volatile = 20, 300
	full := startChild(t, roleSQLiteWrite, childArgs{Dir: d.mnt, Synchronous: "FULL", Rows: durable})
	full.until(t, childTimeout, func(r report) bool { return r.Event == "done" })
	full.kill()
	off := startChild(t, roleSQLiteWrite, childArgs{Dir: d.mnt, Synchronous: "OFF", Rows: volatile})
	off.until(t, childTimeout, func(r report) bool { return r.Event == "done" })
	off.kill()
	st := powerCut(t, fsys)

	d.mount(t)
	got := countRows(t, d.mnt)
	t.Logf("acked %d rows (%d with synchronous=FULL); %d survived the cut, which dropped %d bytes in %d files",
		durable+volatile, durable, got.N, st.DroppedBytes, st.DroppedFiles)
	if got.N < durable {
		t.Fatalf("after the cut: %d rows, want at least the %d committed with synchronous=FULL", got.N, durable)
	}
	if got.N >= durable+volatile {
		t.Fatalf("after the cut: all %d rows survived synchronous=OFF; the filesystem forgot nothing", got.N)
	}
}

// TestSQLiteLocking runs two processes incrementing one counter in
// transactions on the mount: the kernel's fcntl locks and the shared -shm
// mapping must serialise them, so no increment is lost, and all of them
// survive a power cut.
func TestSQLiteLocking(t *testing.T) {
	t.Parallel()
	d := newDisk(t, lazyfs.Options{})
	fsys := d.mount(t)

	// Create the database and switch it to WAL first: two connections
	// racing to do that get SQLITE_BUSY on any disk.
	setup := startChild(t, roleSQLiteWrite, childArgs{Dir: d.mnt})
	setup.until(t, childTimeout, func(r report) bool { return r.Event == "done" })
	setup.kill()

	const perProcess = 200
	a := startChild(t, roleSQLiteIncr, childArgs{Dir: d.mnt, Rows: perProcess})
	b := startChild(t, roleSQLiteIncr, childArgs{Dir: d.mnt, Rows: perProcess})
	a.wait(t, childTimeout)
	b.wait(t, childTimeout)
	if got := countRows(t, d.mnt); got.Value != 2*perProcess {
		t.Fatalf("counter = %d, want %d: increments were lost", got.Value, 2*perProcess)
	}
	powerCut(t, fsys)

	d.mount(t)
	if got := countRows(t, d.mnt); got.Value != 2*perProcess {
		t.Fatalf("counter after the cut = %d, want %d", got.Value, 2*perProcess)
	}
}
