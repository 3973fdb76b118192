package lazyfs_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/integration/lazyfs"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(childRoleEnv); role != "" {
		os.Exit(runChild(role))
	}
	goleak.VerifyTestMain(m)
}

// disk is one backing directory and the mountpoint it is served at.
type disk struct {
	backing, mnt string
	opts         lazyfs.Options
}

func newDisk(tb testing.TB, opts lazyfs.Options) *disk {
	tb.Helper()
	return &disk{backing: tb.TempDir(), mnt: tb.TempDir(), opts: opts}
}

func (d *disk) mount(tb testing.TB) *lazyfs.FS {
	tb.Helper()
	return lazyfs.MountForTest(tb, d.backing, d.mnt, d.opts)
}

func (d *disk) path(name string) string { return filepath.Join(d.mnt, name) }

// writeFile creates or replaces name on the mount, fsyncing it if sync.
func writeFile(tb testing.TB, path string, data []byte, sync bool) {
	tb.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		tb.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			tb.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
}

// syncDir fsyncs a directory on the mount.
func syncDir(tb testing.TB, path string) {
	tb.Helper()
	d, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		tb.Fatal(err)
	}
}

// content returns a file's content, or nil if it does not exist.
func content(tb testing.TB, path string) []byte {
	tb.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		tb.Fatal(err)
	}
	if data == nil {
		data = []byte{}
	}
	return data
}

func powerCut(tb testing.TB, fsys *lazyfs.FS) lazyfs.Stats {
	tb.Helper()
	if err := fsys.PowerCut(); err != nil {
		tb.Fatal(err)
	}
	return fsys.Stats()
}

func TestFileData(t *testing.T) {
	t.Parallel()
	d := newDisk(t, lazyfs.Options{})
	fsys := d.mount(t)

	writeFile(t, d.path("synced"), []byte("durable"), true)
	writeFile(t, d.path("unsynced"), []byte("volatile"), false)
	writeFile(t, d.path("overwritten"), bytes.Repeat([]byte("a"), 10000), true)
	syncDir(t, d.mnt)

	// Read-your-writes before the cut, in the middle of a synced file.
	f, err := os.OpenFile(d.path("overwritten"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("bbbb"), 5000); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(6000); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	want := append(bytes.Repeat([]byte("a"), 5000), "bbbb"...)
	want = append(want, bytes.Repeat([]byte("a"), 996)...)
	if got := content(t, d.path("overwritten")); !bytes.Equal(got, want) {
		t.Fatalf("overwritten before the cut: %d bytes, want %d with the new bytes", len(got), len(want))
	}

	// Replacing a synced file with O_TRUNC is as volatile as any write.
	writeFile(t, d.path("synced"), []byte("gone"), false)
	if got := content(t, d.path("synced")); string(got) != "gone" {
		t.Fatalf("synced after O_TRUNC rewrite = %q, want %q", got, "gone")
	}

	st := powerCut(t, fsys)
	if st.DroppedFiles != 3 || st.DroppedBytes != int64(len("volatile")+len("bbbb")+len("gone")) {
		t.Errorf("stats = %+v, want 3 files and %d bytes dropped", st, len("volatile")+len("bbbb")+len("gone"))
	}

	// The backing directory holds what a disk would, mounted or not.
	if got := content(t, filepath.Join(d.backing, "synced")); string(got) != "durable" {
		t.Errorf("synced = %q, want %q", got, "durable")
	}
	// The directory fsync made the name durable, but the data never was.
	if got := content(t, filepath.Join(d.backing, "unsynced")); got == nil || len(got) != 0 {
		t.Errorf("unsynced = %q, want an empty file", got)
	}
	if got := content(t, filepath.Join(d.backing, "overwritten")); !bytes.Equal(got, bytes.Repeat([]byte("a"), 10000)) {
		t.Errorf("overwritten after the cut: %d bytes, want the 10000 synced ones", len(got))
	}

	d.mount(t)
	if got := content(t, d.path("synced")); string(got) != "durable" {
		t.Errorf("synced on the new mount = %q, want %q", got, "durable")
	}
}

func TestNamespace(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		strict  bool
		syncDir bool
		want    bool // the file exists after the cut
	}{
		{name: "no fsync at all", want: false},
		{name: "file fsync commits its create", syncDir: false, want: true},
		{name: "strict: file fsync alone loses it", strict: true, want: false},
		{name: "strict: directory fsync keeps it", strict: true, syncDir: true, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := newDisk(t, lazyfs.Options{StrictNamespace: tt.strict})
			fsys := d.mount(t)
			if err := os.Mkdir(d.path("dir"), 0o755); err != nil {
				t.Fatal(err)
			}
			// No fsync in the first case: the file's create is pending.
			writeFile(t, d.path("dir/file"), []byte("x"), tt.name != "no fsync at all")
			if tt.syncDir {
				syncDir(t, d.path("dir"))
			}
			if content(t, d.path("dir/file")) == nil {
				t.Fatal("file not visible through the mount before the cut")
			}
			powerCut(t, fsys)
			got := content(t, filepath.Join(d.backing, "dir/file"))
			if (got != nil) != tt.want {
				t.Fatalf("file after the cut: %q, want exists=%v", got, tt.want)
			}
			if tt.want && string(got) != "x" {
				t.Fatalf("file after the cut = %q, want %q", got, "x")
			}
		})
	}
}

func TestUnlinkNeedsDirectoryFsync(t *testing.T) {
	t.Parallel()
	d := newDisk(t, lazyfs.Options{})
	fsys := d.mount(t)
	writeFile(t, d.path("kept"), []byte("k"), true)
	writeFile(t, d.path("gone"), []byte("g"), true)
	syncDir(t, d.mnt)
	if err := os.Remove(d.path("kept")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(d.path("gone")); err != nil {
		t.Fatal(err)
	}
	// No directory fsync: neither unlink is durable.
	st := powerCut(t, fsys)
	if st.DroppedChanges != 2 {
		t.Errorf("dropped %d changes, want the 2 unlinks", st.DroppedChanges)
	}
	for _, name := range []string{"kept", "gone"} {
		if content(t, filepath.Join(d.backing, name)) == nil {
			t.Errorf("%s: unlink without directory fsync survived the cut", name)
		}
	}

	fsys = d.mount(t)
	if err := os.Remove(d.path("gone")); err != nil {
		t.Fatal(err)
	}
	syncDir(t, d.mnt)
	powerCut(t, fsys)
	if content(t, filepath.Join(d.backing, "gone")) != nil {
		t.Error("unlink followed by directory fsync did not survive the cut")
	}
}

func TestRenameIsAtomic(t *testing.T) {
	t.Parallel()
	d := newDisk(t, lazyfs.Options{})
	fsys := d.mount(t)
	writeFile(t, d.path("a"), []byte("old"), true)
	syncDir(t, d.mnt)

	// The write-temp-then-rename pattern, without the final directory fsync.
	writeFile(t, d.path("a.tmp"), []byte("new"), true)
	if err := os.Rename(d.path("a.tmp"), d.path("a")); err != nil {
		t.Fatal(err)
	}
	if got := content(t, d.path("a")); string(got) != "new" {
		t.Fatalf("a before the cut = %q, want %q", got, "new")
	}
	powerCut(t, fsys)
	if got := content(t, filepath.Join(d.backing, "a")); string(got) != "old" {
		t.Errorf("a after a cut before the directory fsync = %q, want %q", got, "old")
	}
	if got := content(t, filepath.Join(d.backing, "a.tmp")); string(got) != "new" {
		t.Errorf("a.tmp after the cut = %q, want %q", got, "new")
	}

	// With the directory fsync, the rename is durable.
	fsys = d.mount(t)
	if err := os.Rename(d.path("a.tmp"), d.path("a")); err != nil {
		t.Fatal(err)
	}
	syncDir(t, d.mnt)
	powerCut(t, fsys)
	if got := content(t, filepath.Join(d.backing, "a")); string(got) != "new" {
		t.Errorf("a after the directory fsync and cut = %q, want %q", got, "new")
	}
	if got := content(t, filepath.Join(d.backing, "a.tmp")); got != nil {
		t.Errorf("a.tmp survived a durable rename: %q", got)
	}
}

// TestRenameNeverLosesBoth moves one durable file back and forth between two
// names in two directories, fsyncing now and then, and cuts the power at
// every step: the file is always under exactly one of its names.
func TestRenameNeverLosesBoth(t *testing.T) {
	t.Parallel()
	d := newDisk(t, lazyfs.Options{})
	fsys := d.mount(t)
	for _, dir := range []string{"x", "y"} {
		if err := os.Mkdir(d.path(dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, d.path("x/f"), []byte("payload"), true)
	syncDir(t, d.path("x"))
	if err := fsys.Unmount(); err != nil {
		t.Fatal(err)
	}

	names := [2]string{"x/f", "y/g"}
	for cut := 1; cut <= 8; cut++ {
		fsys := d.mount(t)
		cur := 0
		if content(t, d.path(names[1])) != nil {
			cur = 1
		}
		for step := range cut {
			next := 1 - cur
			if err := os.Rename(d.path(names[cur]), d.path(names[next])); err != nil {
				t.Fatal(err)
			}
			cur = next
			if step%3 == 1 {
				syncDir(t, filepath.Dir(d.path(names[cur])))
			}
		}
		powerCut(t, fsys)
		var found []string
		for _, name := range names {
			if got := content(t, filepath.Join(d.backing, name)); got != nil {
				if string(got) != "payload" {
					t.Fatalf("cut %d: %s = %q, want %q", cut, name, got, "payload")
				}
				found = append(found, name)
			}
		}
		if len(found) != 1 {
			t.Fatalf("cut %d: file found under %v, want exactly one name", cut, found)
		}
	}
}

func TestRenameExchangeAndLink(t *testing.T) {
	t.Parallel()
	d := newDisk(t, lazyfs.Options{})
	fsys := d.mount(t)
	writeFile(t, d.path("a"), []byte("A"), true)
	writeFile(t, d.path("b"), []byte("B"), true)
	syncDir(t, d.mnt)

	exchange := func() {
		t.Helper()
		if err := unix.Renameat2(unix.AT_FDCWD, d.path("a"), unix.AT_FDCWD, d.path("b"), unix.RENAME_EXCHANGE); err != nil {
			t.Fatal(err)
		}
	}
	exchange()
	if err := os.Link(d.path("a"), d.path("c")); err != nil {
		t.Fatal(err)
	}
	if got := content(t, d.path("c")); string(got) != "B" {
		t.Fatalf("c before the cut = %q, want %q", got, "B")
	}
	powerCut(t, fsys)
	for name, want := range map[string]string{"a": "A", "b": "B", "c": ""} {
		if got := content(t, filepath.Join(d.backing, name)); string(got) != want {
			t.Errorf("without directory fsync, %s = %q, want %q", name, got, want)
		}
	}

	fsys = d.mount(t)
	exchange()
	if err := os.Link(d.path("a"), d.path("c")); err != nil {
		t.Fatal(err)
	}
	syncDir(t, d.mnt)
	powerCut(t, fsys)
	for name, want := range map[string]string{"a": "B", "b": "A", "c": "B"} {
		if got := content(t, filepath.Join(d.backing, name)); string(got) != want {
			t.Errorf("after directory fsync, %s = %q, want %q", name, got, want)
		}
	}
}

func TestSyncDelay(t *testing.T) {
	t.Parallel()
	const delay = 150 * time.Millisecond
	d := newDisk(t, lazyfs.Options{SyncDelay: delay})
	fsys := d.mount(t)

	f, err := os.Create(d.path("slow"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < delay {
		t.Errorf("file fsync took %v, want at least %v", took, delay)
	}
	start = time.Now()
	syncDir(t, d.mnt)
	if took := time.Since(start); took < delay {
		t.Errorf("directory fsync took %v, want at least %v", took, delay)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if st := fsys.Stats(); st.Fsyncs != 1 || st.DirFsyncs != 1 {
		t.Errorf("stats = %+v, want 1 fsync and 1 directory fsync", st)
	}
}

func TestMountRejectsBadOptions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		backing, mnt string
		opts         lazyfs.Options
		wantErr      error
	}{
		{name: "negative delay", backing: t.TempDir(), mnt: t.TempDir(), opts: lazyfs.Options{SyncDelay: -time.Second}, wantErr: lazyfs.ErrInvalid},
		{name: "mountpoint is the backing directory", backing: dir, mnt: dir, wantErr: lazyfs.ErrInvalid},
		{name: "backing is a file", backing: file, mnt: t.TempDir(), wantErr: lazyfs.ErrInvalid},
		{name: "missing mountpoint", backing: t.TempDir(), mnt: filepath.Join(dir, "missing"), wantErr: lazyfs.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := lazyfs.Mount(tt.backing, tt.mnt, tt.opts)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Mount: %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// TestPowerCutWhileBusy: a clean unmount refuses a mount in use, a power cut
// forces it, and the process still holding a file sees its calls fail.
func TestPowerCutWhileBusy(t *testing.T) {
	t.Parallel()
	d := newDisk(t, lazyfs.Options{})
	fsys := d.mount(t)
	f, err := os.Create(d.path("open"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("unsynced")); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Unmount(); !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("Unmount of a busy mount: %v, want EBUSY", err)
	}
	if got := content(t, d.path("open")); string(got) != "unsynced" {
		t.Fatalf("after the refused unmount, open = %q, want %q", got, "unsynced")
	}
	powerCut(t, fsys)
	if _, err := f.Write([]byte("more")); err == nil {
		t.Error("write after the power cut succeeded")
	}
	if got := content(t, filepath.Join(d.backing, "open")); got != nil {
		t.Errorf("backing holds %q, want no file", got)
	}
}

func TestClosedTwice(t *testing.T) {
	t.Parallel()
	d := newDisk(t, lazyfs.Options{})
	fsys := d.mount(t)
	powerCut(t, fsys)
	if err := fsys.Unmount(); !errors.Is(err, lazyfs.ErrClosed) {
		t.Errorf("Unmount after PowerCut: %v, want ErrClosed", err)
	}
	if err := fsys.PowerCut(); !errors.Is(err, lazyfs.ErrClosed) {
		t.Errorf("PowerCut after PowerCut: %v, want ErrClosed", err)
	}
}
