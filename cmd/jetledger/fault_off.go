//go:build !jetledger_faults

package main

// weakenedSynchronous is empty in a release build: the ledger syncs as it
// must (see fault_on.go).
func weakenedSynchronous() string { return "" }
