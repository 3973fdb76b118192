//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package main

import "os"

// storeLockSupported is false: without flock the store is not locked, and
// startEmbedded warns that a second owner is not refused.
const storeLockSupported = false

func flockExclusive(*os.File) (bool, error) { return true, nil }

func funlock(*os.File) error { return nil }
