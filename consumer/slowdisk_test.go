package consumer_test

import (
	"testing"
	"time"

	"github.com/jetledger/jetledger/integration/lazyfs"
)

// slowDiskDir returns a directory on a filesystem whose fsyncs take at least
// delay, served from another process (this one maps SQLite's WAL index).
// Where FUSE cannot be used the test is skipped, saying why.
func slowDiskDir(tb testing.TB, delay time.Duration) string {
	tb.Helper()
	mnt := tb.TempDir()
	lazyfs.ServeForTest(tb, tb.TempDir(), mnt, lazyfs.Options{SyncDelay: delay})
	return mnt
}
