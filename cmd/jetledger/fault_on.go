//go:build jetledger_faults

package main

import (
	"os"
	"strings"
	"sync"
	"time"
)

// weakenedSynchronous is the SQLite synchronous setting a power-loss test
// forces with JETLEDGER_FAULT_SQLITE_SYNCHRONOUS, to show that the test
// catches the loss: only in test builds (-tags jetledger_faults).
func weakenedSynchronous() string { return os.Getenv("JETLEDGER_FAULT_SQLITE_SYNCHRONOUS") }

// faultClock is the ledger's clock when JETLEDGER_FAULT_CLOCK_FILE names a
// file holding an offset ("-2h", "90s"): the host's clock jumping while the
// process runs, as the nemesis makes it. The file is read again once 50ms
// have passed since the last read, so a jump lands mid-batch; a missing or
// unreadable file is no jump. Only in test builds; nil (the ledger's
// time.Now) otherwise.
func faultClock() func() time.Time {
	path := os.Getenv("JETLEDGER_FAULT_CLOCK_FILE")
	if path == "" {
		return nil
	}
	var (
		mu     sync.Mutex
		offset time.Duration
		read   time.Time
	)
	return func() time.Time {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if now.Sub(read) >= 50*time.Millisecond {
			read, offset = now, 0
			if b, err := os.ReadFile(path); err == nil {
				if d, err := time.ParseDuration(strings.TrimSpace(string(b))); err == nil {
					offset = d
				}
			}
		}
		return now.Add(offset)
	}
}
