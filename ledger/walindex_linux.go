package ledger

import (
	"os"
	"strconv"
	"syscall"
)

// walIndexFD finds the descriptor SQLite has open on a database's -shm file
// among this process's (/proc/self/fd) and reads it in place; it never opens
// or closes one (walFrames says why).
type walIndexFD struct {
	path string // the -shm file's absolute path
	fd   int    // the descriptor last found; -1: none
}

// newWALIndexFD is for the database at db, a Store's path: Open made it
// absolute with symbolic links resolved, as /proc/self/fd names files.
func newWALIndexFD(db string) *walIndexFD { return &walIndexFD{path: db + "-shm", fd: -1} }

// read returns the first 100 bytes of the WAL index.
func (w *walIndexFD) read() ([100]byte, bool) {
	var hdr [100]byte
	if w.fd < 0 || !w.is(w.fd) {
		w.fd = w.find()
	}
	if w.fd < 0 {
		return hdr, false
	}
	n, err := syscall.Pread(w.fd, hdr[:], 0)
	return hdr, err == nil && n == len(hdr)
}

func (w *walIndexFD) is(fd int) bool {
	link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	return err == nil && link == w.path
}

func (w *walIndexFD) find() int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && w.is(fd) {
			return fd
		}
	}
	return -1
}
