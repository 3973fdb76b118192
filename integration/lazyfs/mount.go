package lazyfs

import (
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Options configure a mount. The zero value is a disk as fast as the
// backing one, with the namespace rules of ext4, XFS and btrfs.
type Options struct {
	// SyncDelay is the least time that every fsync or fdatasync of a file
	// and every fsync of a directory takes: a slow disk. The sync happens at
	// the end of the delay, so a power cut during it loses what it would
	// have made durable. Default 0. Must not be negative.
	SyncDelay time.Duration

	// StrictNamespace, if set, makes namespace changes durable only through
	// an fsync of a directory whose entries they changed, the POSIX minimum:
	// a file created and fsynced in a directory never fsynced is lost at a
	// power cut. Default false: as on ext4, XFS and btrfs, an fsync of a
	// file or directory also makes durable the change that gave it its
	// current name.
	StrictNamespace bool
}

// Stats count what the filesystem did, for test reports. The Dropped
// fields are zero until PowerCut.
type Stats struct {
	// Fsyncs is the number of fsync and fdatasync calls on files served.
	Fsyncs int
	// DirFsyncs is the number of fsync calls on directories served.
	DirFsyncs int
	// Commits is the number of namespace changes made durable.
	Commits int
	// DroppedBytes is the number of bytes written but not synced that the
	// power cut threw away: per 4 KiB page, the span the writes covered.
	DroppedBytes int64
	// DroppedFiles is the number of files whose unsynced data or size the
	// power cut threw away.
	DroppedFiles int
	// DroppedChanges is the number of namespace changes (create, mkdir,
	// link, rename, unlink, rmdir, chmod of a directory) the power cut
	// threw away.
	DroppedChanges int
}

// FS is one mount of a backing directory. It ends with PowerCut or
// Unmount; mount the backing directory again to see what survived.
type FS struct {
	mountpoint string
	vol        *volume
	server     *fuse.Server

	mu     sync.Mutex
	closed bool
}

// unmountWait bounds the wait for the FUSE server to stop after unmount.
const unmountWait = 30 * time.Second

// Mount serves backing at mountpoint. Both must be existing directories,
// neither inside the other, and the backing filesystem must support
// O_TMPFILE (ext4, XFS, btrfs and tmpfs do). Mount reads the whole tree of
// backing and keeps a descriptor open on every regular file in it, so it
// suits test-sized trees. It returns an error wrapping ErrUnavailable when
// FUSE cannot be used here, and one wrapping ErrInvalid for bad arguments.
func Mount(backing, mountpoint string, opts Options) (*FS, error) {
	backing, mountpoint, err := validate(backing, mountpoint, opts)
	if err != nil {
		return nil, err
	}
	dev, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	_ = dev.Close()
	// New files wait for their directory entry in unnamed O_TMPFILE inodes.
	fd, err := unix.Open(backing, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%w: backing filesystem of %s has no O_TMPFILE: %w", ErrInvalid, backing, err)
	}
	_ = unix.Close(fd)

	vol := newVolume(backing, opts)
	if err := vol.load(); err != nil {
		vol.powerCut()
		return nil, fmt.Errorf("lazyfs: mount %s: %w", backing, err)
	}
	second := time.Second
	root := &node{vol: vol, in: vol.top}
	server, err := fs.Mount(mountpoint, root, &fs.Options{
		MountOptions: fuse.MountOptions{
			// Mount with the syscall, as root may: no fusermount here.
			DirectMountStrict: true,
			FsName:            backing,
			Name:              "lazyfs",
			DisableXAttrs:     true,
			Logger:            log.New(io.Discard, "", 0),
		},
		EntryTimeout:   &second,
		AttrTimeout:    &second,
		RootStableAttr: &fs.StableAttr{Ino: vol.top.ino},
	})
	if err != nil {
		vol.powerCut()
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.ENODEV) {
			return nil, fmt.Errorf("%w: mount %s: %w", ErrUnavailable, mountpoint, err)
		}
		return nil, fmt.Errorf("lazyfs: mount %s: %w", mountpoint, err)
	}
	return &FS{mountpoint: mountpoint, vol: vol, server: server}, nil
}

func validate(backing, mountpoint string, opts Options) (string, string, error) {
	if opts.SyncDelay < 0 {
		return "", "", fmt.Errorf("%w: SyncDelay %v is negative", ErrInvalid, opts.SyncDelay)
	}
	var abs [2]string
	for i, dir := range []string{backing, mountpoint} {
		a, err := filepath.Abs(dir)
		if err != nil {
			return "", "", fmt.Errorf("%w: %s: %w", ErrInvalid, dir, err)
		}
		st, err := os.Stat(a)
		if err != nil {
			return "", "", fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		if !st.IsDir() {
			return "", "", fmt.Errorf("%w: %s is not a directory", ErrInvalid, a)
		}
		abs[i] = a
	}
	if inside(abs[0], abs[1]) || inside(abs[1], abs[0]) {
		return "", "", fmt.Errorf("%w: backing %s and mountpoint %s overlap", ErrInvalid, abs[0], abs[1])
	}
	return abs[0], abs[1], nil
}

// inside reports whether path is dir or below it.
func inside(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+string(filepath.Separator))
}

// Mountpoint returns the absolute path the filesystem is mounted at.
func (fsys *FS) Mountpoint() string { return fsys.mountpoint }

// PowerCut models a power failure: it throws away every write and namespace
// change not yet made durable, leaving the backing directory as a real disk
// would be after the reboot, and unmounts. The caller must first kill
// (SIGKILL, then wait) every process using the mount: a process still
// holding files open makes the unmount a forced one, which aborts the FUSE
// connection, and its calls fail from then on.
func (fsys *FS) PowerCut() error {
	if err := fsys.close(); err != nil {
		return err
	}
	fsys.vol.powerCut()
	return fsys.forceUnmount()
}

// Unmount models a clean shutdown: it unmounts, then makes every pending
// write and namespace change durable, as an operating system does at
// shutdown. It fails, leaving the mount in place, while processes still
// use the mount.
func (fsys *FS) Unmount() error {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	if fsys.closed {
		return ErrClosed
	}
	if err := fsys.server.Unmount(); err != nil {
		return fmt.Errorf("lazyfs: unmount %s: %w", fsys.mountpoint, err)
	}
	fsys.closed = true
	if err := fsys.vol.shutdown(); err != nil {
		return fmt.Errorf("lazyfs: flush at unmount: %w", err)
	}
	return nil
}

// Stats returns the counts so far.
func (fsys *FS) Stats() Stats { return fsys.vol.snapshot() }

func (fsys *FS) close() error {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	if fsys.closed {
		return ErrClosed
	}
	fsys.closed = true
	return nil
}

// forceUnmount unmounts however busy the mount is, and waits for the FUSE
// server to stop.
func (fsys *FS) forceUnmount() error {
	err := syscall.Unmount(fsys.mountpoint, 0)
	if errors.Is(err, syscall.EBUSY) {
		// MNT_FORCE aborts the FUSE connection, failing every pending and
		// later call; MNT_DETACH then takes the mount out of the tree.
		_ = syscall.Unmount(fsys.mountpoint, syscall.MNT_FORCE)
		err = syscall.Unmount(fsys.mountpoint, syscall.MNT_DETACH)
		if errors.Is(err, syscall.EINVAL) {
			err = nil // MNT_FORCE already unmounted it
		}
	}
	if err != nil {
		return fmt.Errorf("lazyfs: unmount %s: %w", fsys.mountpoint, err)
	}
	stopped := make(chan struct{})
	go func() {
		fsys.server.Wait()
		close(stopped)
	}()
	select {
	case <-stopped:
		return nil
	case <-time.After(unmountWait):
		return fmt.Errorf("lazyfs: FUSE server for %s still running %v after unmount", fsys.mountpoint, unmountWait)
	}
}

// MountForTest mounts backing at mountpoint for the length of a test. It
// skips the test, naming the reason, when FUSE is unavailable, fails it on
// any other error, and unmounts at cleanup unless PowerCut or Unmount came
// first.
func MountForTest(tb testing.TB, backing, mountpoint string, opts Options) *FS {
	tb.Helper()
	fsys, err := Mount(backing, mountpoint, opts)
	if errors.Is(err, ErrUnavailable) {
		tb.Skipf("skipping, FUSE cannot be used here: %v", err)
	}
	if err != nil {
		tb.Fatalf("lazyfs: %v", err)
	}
	tb.Cleanup(func() {
		if err := fsys.Unmount(); err != nil && !errors.Is(err, ErrClosed) {
			tb.Errorf("lazyfs: cleanup: %v", err)
		}
	})
	return fsys
}
