//go:build !linux

package consumertest

import "testing"

// SmallDisk skips the test: a tmpfs to fill is mounted on Linux only.
func SmallDisk(tb testing.TB, size int64) string {
	tb.Helper()
	tb.Skip("a small disk to fill is a tmpfs, mounted on Linux only")
	return ""
}
