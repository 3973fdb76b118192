// Package lazyfs is a FUSE filesystem for durability tests, in the spirit of
// Jepsen's LazyFS: a passthrough over a backing directory that keeps in
// memory everything not yet made durable, so that a power cut can throw it
// away and leave the backing directory holding what a real disk would.
//
// # Durability model
//
// File data works like a page cache. Writes, truncates and fallocate go to
// an in-memory overlay of 4 KiB pages over the backing file, and reads see
// the overlay over the backing content. fsync or fdatasync of a file writes
// its pages, size, mode, owner and times to the backing file and fsyncs it
// there. Nothing else writes file data: not close, not a timer, not memory
// pressure. Shared mmap works (SQLite's WAL index uses it): the kernel page
// cache writes dirty mapped pages to the overlay, and an fsync writes them
// back first.
//
// Namespace changes (create, mkdir, hard link, rename, unlink, rmdir, chmod
// of a directory) are visible through the mount at once and appended to an
// ordered journal, as a journaling filesystem does. A commit replays a
// prefix of the journal on the backing directory and fsyncs the backing
// directories it touched; a power cut drops the rest. An fsync of a
// directory commits up to the latest change to its entries. A new file
// lives in an unnamed O_TMPFILE in the backing filesystem until the commit
// of its create links it, so file data can be synced before its name is.
//
// Commits are prefixes, never reorderings: a directory fsync also makes
// durable every change made before the ones it asked for, in any
// directory, as ext4's journal does. A rename is one change, durable whole
// or not at all, so after a power cut a renamed file is found under the old
// name or the new one, never under neither. By default an fsync of a file
// or directory also commits up to the change that gave it its current name,
// as ext4, XFS and btrfs do, which is what lets a program that fsyncs a new
// file, but not its directory, keep it. With Options.StrictNamespace only a
// directory fsync commits: a file created and fsynced in a directory never
// fsynced is lost at a power cut, as POSIX allows.
//
// A power cut keeps a change that reached the backing directory: data an
// fsync wrote, a committed prefix. It drops everything else. The data of a
// file whose create is dropped is dropped with it, synced or not. A file
// whose create was committed but whose data was never synced survives
// empty, as on ext4 with delayed allocation.
//
// Unmount is a clean shutdown: it commits the whole journal and syncs every
// file, so nothing pending is lost.
//
// # Limits
//
// Locks: the mount does not ask the kernel to forward fcntl, OFD or flock
// locks, so the kernel keeps them itself. They serialise processes on this
// host, which is all SQLite needs; they do not reach other hosts.
//
// Only regular files and directories are served; symlinks, devices and
// sockets in the backing directory are not shown, and cannot be created.
// Extended attributes are disabled. A file's mode, owner and times reach
// the backing file at its fsync; a directory's mode is journaled like a
// namespace change, its owner and times are kept in memory only. One mutex
// serialises the model, so an fsync blocks the whole mount while it runs.
//
// Mount walks the backing tree and holds a descriptor on every file, so it
// suits test-sized trees. It needs /dev/fuse and permission to mount (root,
// with the mount syscall; fusermount is not used); where either is missing
// it returns ErrUnavailable and MountForTest skips the test.
//
// # Usage
//
// Run the program under test on the mount, in a child process; kill it;
// cut the power; mount again and check what survived:
//
//	func TestDurable(t *testing.T) {
//		backing, mnt := t.TempDir(), t.TempDir()
//		fsys := lazyfs.MountForTest(t, backing, mnt, lazyfs.Options{})
//		cmd := exec.Command(program, "-data", mnt)
//		// ... start it, let it acknowledge some writes, then:
//		_ = cmd.Process.Kill()
//		_ = cmd.Wait()
//		if err := fsys.PowerCut(); err != nil {
//			t.Fatal(err)
//		}
//		lazyfs.MountForTest(t, backing, mnt, lazyfs.Options{})
//		// every acknowledged write must be in mnt now
//	}
//
// Run programs that use the mount in child processes rather than in the
// test process: a page fault on a FUSE-backed mapping blocks a thread the
// Go runtime cannot take back, and with the FUSE server in the same
// process that can deadlock.
package lazyfs
