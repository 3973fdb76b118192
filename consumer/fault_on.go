//go:build jetledger_faults && unix

package consumer

import (
	"os"
	"os/signal"
	"sync"
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

var stopped sync.Once

// faultStop SIGSTOPs the process, once, when JETLEDGER_FAULT is "stop-"
// and this point's name and the file JETLEDGER_FAULT_ARM names exists:
// a paused process, stopped exactly with a batch in hand, which goes on
// where it stopped once it gets SIGCONT.
func faultStop(name string) {
	if os.Getenv("JETLEDGER_FAULT") != "stop-"+name {
		return
	}
	if _, err := os.Stat(os.Getenv("JETLEDGER_FAULT_ARM")); err != nil {
		return
	}
	stopped.Do(func() {
		// A stop signal takes the threads a moment after kill returns: this
		// goroutine waits for the SIGCONT, so it goes on after the pause.
		cont := make(chan os.Signal, 1)
		signal.Notify(cont, syscall.SIGCONT)
		defer signal.Stop(cont)
		syscall.Kill(os.Getpid(), syscall.SIGSTOP) //nolint:errcheck // the test's SIGCONT resumes it here
		<-cont
	})
}
