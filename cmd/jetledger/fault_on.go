//go:build jetledger_faults

package main

import (
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// weakenedSynchronous is the SQLite synchronous setting a power-loss test
// forces with JETLEDGER_FAULT_SQLITE_SYNCHRONOUS, to show that the test
// catches the loss: only in test builds (-tags jetledger_faults).
func weakenedSynchronous() string { return os.Getenv("JETLEDGER_FAULT_SQLITE_SYNCHRONOUS") }

// faultClock is the ledger's clock when JETLEDGER_FAULT_CLOCK_FILE names a
// file holding an offset ("-2h", "90s"): the host's clock jumping while the
// process runs, as the nemesis makes it. The file is read every 50ms, so a
// jump lands mid-batch; a missing or unreadable file is no jump. Only in
// test builds; nil (the ledger's time.Now) otherwise.
func faultClock() func() time.Time {
	path := os.Getenv("JETLEDGER_FAULT_CLOCK_FILE")
	if path == "" {
		return nil
	}
	var offset atomic.Int64
	read := func() {
		b, err := os.ReadFile(path)
		if err != nil {
			offset.Store(0)
			return
		}
		if d, err := time.ParseDuration(strings.TrimSpace(string(b))); err == nil {
			offset.Store(int64(d))
		}
	}
	read()
	go func() {
		for range time.Tick(50 * time.Millisecond) {
			read()
		}
	}()
	return func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
}
