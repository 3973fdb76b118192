//go:build !linux

package ledger

import "os"

// fdatasync flushes f; elsewhere than Linux, with fsync.
func fdatasync(f *os.File) error { return f.Sync() }
