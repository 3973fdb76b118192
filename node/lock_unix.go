//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package node

import (
	"errors"
	"os"
	"syscall"
)

// LockSupported says whether Start really excludes a second owner.
const LockSupported = true

// flockExclusive takes an exclusive flock on f without waiting; held is
// false when another open file holds it. The kernel drops the lock when the
// holder's process dies, however it dies.
func flockExclusive(f *os.File) (held bool, err error) {
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}

func funlock(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
