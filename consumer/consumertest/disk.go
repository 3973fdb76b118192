package consumertest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// SmallDisk mounts a tmpfs of size bytes on a new temporary directory and
// returns it, unmounted when the test ends: a disk a test can fill. It
// needs root (or CAP_SYS_ADMIN); without it the test is skipped.
func SmallDisk(tb testing.TB, size int64) string {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("mounting a small tmpfs to fill needs root")
	}
	dir := tb.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		tb.Skipf("cannot mount a tmpfs on %s: %v", dir, err)
	}
	tb.Cleanup(func() {
		// MNT_DETACH: a file a failed test left open must not keep the
		// mount, and the directory under it, in place.
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			tb.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// FillDisk writes a file into dir until its filesystem has no space left,
// and returns a function that removes it again.
func FillDisk(tb testing.TB, dir string) (free func()) {
	tb.Helper()
	name := filepath.Join(dir, "fill")
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for len(buf) > 0 {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				f.Close()
				tb.Fatalf("fill %s: %v", dir, err)
			}
			buf = buf[:len(buf)/2] // down to the last byte that fits
		}
	}
	if err := f.Close(); err != nil && !errors.Is(err, syscall.ENOSPC) {
		tb.Fatal(err)
	}
	return func() {
		tb.Helper()
		if err := os.Remove(name); err != nil {
			tb.Fatal(err)
		}
	}
}
