package consumertest

import (
	"fmt"
	"os"
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
