//go:build jetledger_faults && unix

package consumer

import (
	"os"
	"syscall"
)

// faultPoint SIGKILLs the process when JETLEDGER_FAULT names this point, so
// crash tests can stop it exactly where a real crash would hurt most.
func faultPoint(name string) {
	if os.Getenv("JETLEDGER_FAULT") == name {
		syscall.Kill(os.Getpid(), syscall.SIGKILL) //nolint:errcheck // the process ends here
		select {}
	}
}
