package jsretry

import (
	"time"

	"github.com/jetledger/jetledger/ackwait"
)

// SetTimings makes the tests' waits short.
func SetTimings(b ackwait.Backoff, try, report time.Duration) (restore func()) {
	wb, wt, wr := backoff, tryTimeout, reportEvery
	backoff, tryTimeout, reportEvery = b, try, report
	return func() { backoff, tryTimeout, reportEvery = wb, wt, wr }
}
