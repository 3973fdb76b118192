//go:build jetledger_faults

package main

import "os"

// weakenedSynchronous is the SQLite synchronous setting a power-loss test
// forces with JETLEDGER_FAULT_SQLITE_SYNCHRONOUS, to show that the test
// catches the loss: only in test builds (-tags jetledger_faults).
func weakenedSynchronous() string { return os.Getenv("JETLEDGER_FAULT_SQLITE_SYNCHRONOUS") }
