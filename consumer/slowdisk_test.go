package consumer_test

import (
	"testing"
	"time"
)

// slowDiskDir returns a directory whose fsyncs take at least delay, when a
// test filesystem can be mounted here; otherwise a plain temporary directory.
func slowDiskDir(tb testing.TB, delay time.Duration) string {
	tb.Helper()
	tb.Logf("no slow-disk filesystem yet: using a plain directory (fsync delay %s not applied)", delay)
	return tb.TempDir()
}
