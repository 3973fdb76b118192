package consumertest

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

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
