package ledger

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// diskFree is the space left on the filesystem holding path for this
// process: ext4 keeps a reserve that only root may write, so for root (a
// container, say) that reserve is room and a disk is not full until it is
// gone too; known is false where it cannot be read.
func diskFree(path string) (free int64, known bool) {
	var st unix.Statfs_t
	if unix.Statfs(path, &st) != nil {
		return 0, false
	}
	blocks := st.Bavail
	if os.Geteuid() == 0 {
		blocks = st.Bfree
	}
	return int64(blocks) * int64(st.Bsize), true
}

// writable says whether path can be written, without writing: access(2)
// sees a read-only mount, an immutable file and lost permissions alike. A
// path that does not exist is not refused (the WAL comes and goes).
func writable(path string) error {
	err := unix.Access(path, unix.W_OK)
	if err == nil || errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return &os.PathError{Op: "access for writing", Path: path, Err: err}
}
