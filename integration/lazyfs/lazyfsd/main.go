// Command lazyfsd serves a lazyfs mount from its own process, for tests whose
// own process uses the mount through mmap (SQLite's WAL index): a page fault
// on a FUSE mapping in the process serving it can deadlock that process.
//
//	lazyfsd -backing DIR -mount DIR [-sync-delay 150ms] [-strict]
//
// It prints "ready" once the mount serves. SIGTERM or SIGINT unmounts
// cleanly (everything pending is made durable); SIGUSR1 cuts the power
// (everything not yet durable is lost). It exits 3 when FUSE is unavailable.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/jetledger/jetledger/integration/lazyfs"
)

// exitUnavailable tells the caller to skip: FUSE cannot be used here.
const exitUnavailable = 3

func main() {
	var opts lazyfs.Options
	backing := flag.String("backing", "", "backing directory (required)")
	mnt := flag.String("mount", "", "mount point (required)")
	flag.DurationVar(&opts.SyncDelay, "sync-delay", 0, "least time every fsync takes")
	flag.BoolVar(&opts.StrictNamespace, "strict", false, "namespace changes durable only by a directory fsync")
	flag.Parse()
	if *backing == "" || *mnt == "" {
		fmt.Fprintln(os.Stderr, "lazyfsd: -backing and -mount are required")
		os.Exit(2)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1)
	fsys, err := lazyfs.Mount(*backing, *mnt, opts)
	if errors.Is(err, lazyfs.ErrUnavailable) {
		fmt.Fprintln(os.Stderr, "lazyfsd:", err)
		os.Exit(exitUnavailable)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "lazyfsd:", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	if s := <-sig; s == syscall.SIGUSR1 {
		err = fsys.PowerCut()
	} else {
		err = fsys.Unmount()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "lazyfsd:", err)
		os.Exit(1)
	}
}
