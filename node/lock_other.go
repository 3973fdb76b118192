//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package node

import "os"

// LockSupported is false: without flock the store is not locked, and
// Start warns that a second owner is not refused.
const LockSupported = false

func flockExclusive(*os.File) (bool, error) { return true, nil }

func funlock(*os.File) error { return nil }
