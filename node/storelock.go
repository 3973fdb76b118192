package node

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// LockFile, inside the store, carries the flock of the process that owns
// the store. Its content, the owner's pid and URL, only names the owner: the
// kernel releases the lock when the owner dies, so a file left by a killed
// process refuses nobody.
const LockFile = "jetledger.lock"

// storeLock is the held lock of a node's store.
type storeLock struct {
	f *os.File
}

// lockStore takes the exclusive lock of the store dir without waiting, and
// writes this process's pid into the lock file.
func lockStore(dir string) (*storeLock, error) {
	path := filepath.Join(dir, LockFile)
	l, pid, url, err := lockAt(path)
	if err != nil {
		return nil, fmt.Errorf("node: lock store %s: %w", path, err)
	}
	if l == nil {
		return nil, &StoreInUseError{Dir: dir, PID: pid, URL: url}
	}
	return l, nil
}

// LockPath takes the exclusive lock of the file at path (made if missing)
// without waiting, and writes this process's pid into it; release gives
// it back. Held by another process, it is a *PathInUseError. The kernel
// drops the lock when its holder dies, however it dies.
func LockPath(path string) (release func(), err error) {
	l, pid, _, err := lockAt(path)
	if err != nil {
		return nil, fmt.Errorf("node: lock %s: %w", path, err)
	}
	if l == nil {
		return nil, &PathInUseError{Path: path, PID: pid}
	}
	return l.Close, nil
}

// lockAt takes the lock of the file at path; nil, and the holder's pid
// and URL as far as it wrote them, when another holds it.
func lockAt(path string) (l *storeLock, pid int, url string, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, 0, "", err
	}
	held, err := flockExclusive(f)
	if err != nil {
		f.Close()
		return nil, 0, "", err
	}
	if !held {
		defer f.Close()
		sc := bufio.NewScanner(io.LimitReader(f, 4096))
		if sc.Scan() {
			pid, _ = strconv.Atoi(strings.TrimSpace(sc.Text())) // unreadable: the holder is unnamed, still refused
		}
		if sc.Scan() {
			url = strings.TrimSpace(sc.Text())
		}
		return nil, pid, url, nil
	}
	l = &storeLock{f: f}
	if err := l.write(""); err != nil {
		l.Close()
		return nil, 0, "", err
	}
	return l, 0, "", nil
}

// serving adds the server's URL to the lock file, so a refused second
// owner can say where to connect instead. The lock holds without it.
func (l *storeLock) serving(url string) {
	_ = l.write(url) // informational only
}

func (l *storeLock) write(url string) error {
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	_, err := l.f.WriteAt([]byte(fmt.Sprintf("%d\n%s\n", os.Getpid(), url)), 0)
	return err
}

// Close empties the lock file and releases the lock.
func (l *storeLock) Close() {
	_ = l.f.Truncate(0) // a clean stop leaves no owner named
	_ = funlock(l.f)    // closing releases it too; this says so
	l.f.Close()
}
