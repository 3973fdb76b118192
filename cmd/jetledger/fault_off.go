//go:build !jetledger_faults

package main

import "time"

// weakenedSynchronous is empty in a release build: the ledger syncs as it
// must (see fault_on.go).
func weakenedSynchronous() string { return "" }

// faultClock is nil in a release build: the ledger reads the host's clock.
func faultClock() func() time.Time { return nil }
