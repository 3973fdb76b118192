//go:build unix

package bench

import "syscall"

// syncDisks writes back every dirty page of the system (sync(2)).
func syncDisks() { syscall.Sync() }
