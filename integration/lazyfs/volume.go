package lazyfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// errPowerCut ends a wait for the slow disk when the power goes.
var errPowerCut = errors.New("lazyfs: power cut")

// changeOp is one kind of namespace change in the journal.
type changeOp int

const (
	opLink   changeOp = iota + 1 // give a file a name: create or hard link
	opMkdir                      // create a directory
	opUnlink                     // remove a file's name
	opRmdir                      // remove an empty directory
	opRename                     // rename(2), with its flags
	opChmod                      // set a directory's permissions
)

// change is one namespace change, in the order the mount made it. Paths are
// relative to the backing root as the mount saw them at the time: replayed
// in order on the backing directory, which holds every earlier change, they
// name the same entries.
type change struct {
	seq   uint64
	op    changeOp
	path  string
	to    string // opRename: the new path
	file  *inode // opLink: the file whose backing inode gets the name
	mode  uint32 // opMkdir, opChmod: permission bits
	flags uint32 // opRename: unix.RENAME_NOREPLACE or unix.RENAME_EXCHANGE
}

// inode is a file or directory as the mount sees it. The volume's mutex
// guards every field.
type inode struct {
	ino                 uint64
	mode                uint32 // file type and permission bits, as in st_mode
	uid, gid            uint32
	atime, mtime, ctime time.Time

	// Directories: the entries as the mount sees them, and where the
	// directory itself is (a directory has one name; parent is nil for the
	// root and for removed directories).
	children map[string]*inode
	parent   *inode
	name     string
	removed  bool

	// Regular files.
	data        *fileData // nil once released
	nlink       int       // names the mount sees
	opens       int       // open handles
	journalRefs int       // pending opLink changes, which need data.backing
	attrDirty   bool      // mode, owner or times changed since the last sync

	// lastOwn is the seq of the latest change to the inode's own name or
	// mode: its create, mkdir, link or rename, or a directory's chmod.
	lastOwn     uint64
	lastEntries uint64 // directories: seq of the latest change to the entries
}

func (n *inode) isDir() bool { return n.mode&syscall.S_IFMT == syscall.S_IFDIR }

// path returns the directory's path relative to the backing root, as the
// mount sees it now.
func (n *inode) path() string {
	if n.parent == nil {
		return ""
	}
	return filepath.Join(n.parent.path(), n.name)
}

func (n *inode) fillAttr(out *fuse.Attr) {
	*out = fuse.Attr{Ino: n.ino, Mode: n.mode, Blksize: pageSize}
	out.Uid, out.Gid = n.uid, n.gid
	out.SetTimes(&n.atime, &n.mtime, &n.ctime)
	if n.isDir() {
		out.Nlink = 2
		for _, c := range n.children {
			if c.isDir() {
				out.Nlink++
			}
		}
		out.Size = pageSize
		return
	}
	out.Nlink = uint32(n.nlink)
	if n.data != nil {
		out.Size = uint64(n.data.size)
		out.Blocks = (out.Size + 511) / 512
	}
}

// dirEntry is one entry of a directory listing.
type dirEntry struct {
	name string
	mode uint32
	ino  uint64
}

// volume is the whole filesystem model: the namespace the mount sees, the
// journal of namespace changes not yet made durable, and every file's
// overlay. One mutex serialises all of it, including the backing I/O of a
// sync: this is a test tool, and simple beats fast.
type volume struct {
	root   string // backing directory, absolute
	strict bool   // Options.StrictNamespace
	delay  time.Duration
	cut    chan struct{} // closed at the power cut

	mu      sync.Mutex
	dead    bool // power cut or unmounted: every operation fails
	top     *inode
	files   map[*inode]struct{} // regular files holding a backing descriptor
	nextIno uint64
	seq     uint64   // last journal sequence number handed out
	journal []change // pending changes, oldest first
	stats   Stats
}

func newVolume(root string, opts Options) *volume {
	return &volume{
		root:    root,
		strict:  opts.StrictNamespace,
		delay:   opts.SyncDelay,
		cut:     make(chan struct{}),
		files:   map[*inode]struct{}{},
		nextIno: 1,
	}
}

// load builds the namespace from the backing directory: every directory and
// regular file, with an open descriptor on each file. Hard links share an
// inode; other kinds of entries (symlinks, devices, sockets) are left out.
func (v *volume) load() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	var st syscall.Stat_t
	if err := syscall.Stat(v.root, &st); err != nil {
		return fmt.Errorf("stat backing %s: %w", v.root, err)
	}
	v.top = v.newInodeFromStat(&st)
	v.top.children = map[string]*inode{}
	links := map[[2]uint64]*inode{}
	return v.loadDir(v.top, v.root, links)
}

func (v *volume) loadDir(dir *inode, abs string, links map[[2]uint64]*inode) error {
	entries, err := os.ReadDir(abs)
	if err != nil {
		return fmt.Errorf("read backing %s: %w", abs, err)
	}
	for _, e := range entries {
		p := filepath.Join(abs, e.Name())
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return fmt.Errorf("stat backing %s: %w", p, err)
		}
		switch st.Mode & syscall.S_IFMT {
		case syscall.S_IFDIR:
			child := v.newInodeFromStat(&st)
			child.children = map[string]*inode{}
			child.parent, child.name = dir, e.Name()
			dir.children[e.Name()] = child
			if err := v.loadDir(child, p, links); err != nil {
				return err
			}
		case syscall.S_IFREG:
			key := [2]uint64{uint64(st.Dev), st.Ino}
			if f, ok := links[key]; ok {
				f.nlink++
				dir.children[e.Name()] = f
				continue
			}
			fd, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				return fmt.Errorf("open backing %s: %w", p, err)
			}
			f := v.newInodeFromStat(&st)
			f.data = newFileData(fd, st.Size)
			f.nlink = 1
			v.files[f] = struct{}{}
			links[key] = f
			dir.children[e.Name()] = f
		}
	}
	return nil
}

func (v *volume) newInodeFromStat(st *syscall.Stat_t) *inode {
	n := &inode{ino: v.nextIno, mode: st.Mode, uid: st.Uid, gid: st.Gid}
	v.nextIno++
	n.atime = time.Unix(st.Atim.Unix())
	n.mtime = time.Unix(st.Mtim.Unix())
	n.ctime = time.Unix(st.Ctim.Unix())
	return n
}

func (v *volume) newInode(mode, uid, gid uint32) *inode {
	now := time.Now()
	n := &inode{ino: v.nextIno, mode: mode, uid: uid, gid: gid, atime: now, mtime: now, ctime: now}
	v.nextIno++
	return n
}

// record appends a change to the journal and returns its sequence number.
func (v *volume) record(c change) uint64 {
	v.seq++
	c.seq = v.seq
	if c.file != nil {
		c.file.journalRefs++
	}
	v.journal = append(v.journal, c)
	return c.seq
}

// touch marks directories' entries as changed by seq.
func touch(seq uint64, dirs ...*inode) {
	now := time.Now()
	for _, d := range dirs {
		d.lastEntries = seq
		d.mtime, d.ctime = now, now
	}
}

// release closes a file's backing descriptor once nothing can reach it: no
// name, no open handle, no pending change that links it.
func (v *volume) release(f *inode) {
	if f.data == nil || f.nlink > 0 || f.opens > 0 || f.journalRefs > 0 {
		return
	}
	_ = f.data.backing.Close()
	f.data = nil
	delete(v.files, f)
}

// usableDir checks that dir can take new entries.
func (v *volume) usableDir(dir *inode) syscall.Errno {
	switch {
	case v.dead:
		return syscall.EIO
	case !dir.isDir():
		return syscall.ENOTDIR
	case dir.removed:
		return syscall.ENOENT
	}
	return 0
}

func (v *volume) lookup(dir *inode, name string, out *fuse.Attr) (*inode, syscall.Errno) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.dead {
		return nil, syscall.EIO
	}
	c, ok := dir.children[name]
	if !ok {
		return nil, syscall.ENOENT
	}
	c.fillAttr(out)
	return c, 0
}

func (v *volume) getattr(n *inode, out *fuse.Attr) syscall.Errno {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.dead {
		return syscall.EIO
	}
	n.fillAttr(out)
	return 0
}

// attrChange is the part of a setattr request the model acts on; nil fields
// are left alone.
type attrChange struct {
	size         *uint64
	mode         *uint32 // permission bits
	uid, gid     *uint32
	atime, mtime *time.Time
}

func (v *volume) setattr(n *inode, ch attrChange, out *fuse.Attr) syscall.Errno {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.dead {
		return syscall.EIO
	}
	now := time.Now()
	if ch.size != nil {
		if n.isDir() {
			return syscall.EISDIR
		}
		if n.data == nil {
			return syscall.EIO
		}
		n.data.truncate(int64(*ch.size))
		n.mtime = now
	}
	if ch.mode != nil {
		n.mode = n.mode&syscall.S_IFMT | *ch.mode&07777
		if n.isDir() {
			if n.parent != nil || n == v.top {
				n.lastOwn = v.record(change{op: opChmod, path: n.path(), mode: n.mode & 07777})
			}
		} else {
			n.attrDirty = true
		}
	}
	setAttr(&n.uid, ch.uid, &n.attrDirty)
	setAttr(&n.gid, ch.gid, &n.attrDirty)
	setAttr(&n.atime, ch.atime, &n.attrDirty)
	setAttr(&n.mtime, ch.mtime, &n.attrDirty)
	n.ctime = now
	n.fillAttr(out)
	return 0
}

// create makes a new regular file named name in dir and opens it. Its
// backing inode is an unnamed O_TMPFILE until the journal links it.
func (v *volume) create(dir *inode, name string, mode, uid, gid uint32, out *fuse.Attr) (*inode, syscall.Errno) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if errno := v.free(dir, name); errno != 0 {
		return nil, errno
	}
	fd, err := unix.Open(v.root, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, mode&07777)
	if err != nil {
		return nil, errnoOf(err)
	}
	f := v.newInode(syscall.S_IFREG|mode&07777, uid, gid)
	f.data = newFileData(os.NewFile(uintptr(fd), "lazyfs-tmpfile"), 0)
	f.nlink, f.opens = 1, 1
	v.files[f] = struct{}{}
	dir.children[name] = f
	seq := v.record(change{op: opLink, path: filepath.Join(dir.path(), name), file: f})
	f.lastOwn = seq
	touch(seq, dir)
	f.fillAttr(out)
	return f, 0
}

func (v *volume) mkdir(dir *inode, name string, mode, uid, gid uint32, out *fuse.Attr) (*inode, syscall.Errno) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if errno := v.free(dir, name); errno != 0 {
		return nil, errno
	}
	d := v.newInode(syscall.S_IFDIR|mode&07777, uid, gid)
	d.children = map[string]*inode{}
	d.parent, d.name = dir, name
	dir.children[name] = d
	seq := v.record(change{op: opMkdir, path: d.path(), mode: mode & 07777})
	d.lastOwn, d.lastEntries = seq, seq
	touch(seq, dir)
	d.fillAttr(out)
	return d, 0
}

func (v *volume) link(dir *inode, name string, f *inode, out *fuse.Attr) syscall.Errno {
	v.mu.Lock()
	defer v.mu.Unlock()
	if errno := v.usableDir(dir); errno != 0 {
		return errno
	}
	switch {
	case f.isDir():
		return syscall.EPERM
	case f.data == nil || f.nlink == 0:
		return syscall.ENOENT
	}
	if errno := v.free(dir, name); errno != 0 {
		return errno
	}
	dir.children[name] = f
	f.nlink++
	f.ctime = time.Now()
	seq := v.record(change{op: opLink, path: filepath.Join(dir.path(), name), file: f})
	f.lastOwn = seq
	touch(seq, dir)
	f.fillAttr(out)
	return 0
}

// free checks that name can be made in dir: a usable directory without
// that entry. The caller holds v.mu.
func (v *volume) free(dir *inode, name string) syscall.Errno {
	if errno := v.usableDir(dir); errno != 0 {
		return errno
	}
	if _, ok := dir.children[name]; ok {
		return syscall.EEXIST
	}
	return 0
}

// child is the entry name of a usable dir; the caller holds v.mu.
func (v *volume) child(dir *inode, name string) (*inode, syscall.Errno) {
	if errno := v.usableDir(dir); errno != 0 {
		return nil, errno
	}
	f, ok := dir.children[name]
	if !ok {
		return nil, syscall.ENOENT
	}
	return f, 0
}

func (v *volume) unlink(dir *inode, name string) syscall.Errno {
	v.mu.Lock()
	defer v.mu.Unlock()
	f, errno := v.child(dir, name)
	switch {
	case errno != 0:
		return errno
	case f.isDir():
		return syscall.EISDIR
	}
	delete(dir.children, name)
	touch(v.record(change{op: opUnlink, path: filepath.Join(dir.path(), name)}), dir)
	f.nlink--
	f.ctime = time.Now()
	v.release(f)
	return 0
}

func (v *volume) rmdir(dir *inode, name string) syscall.Errno {
	v.mu.Lock()
	defer v.mu.Unlock()
	d, errno := v.child(dir, name)
	switch {
	case errno != 0:
		return errno
	case !d.isDir():
		return syscall.ENOTDIR
	case len(d.children) > 0:
		return syscall.ENOTEMPTY
	}
	touch(v.record(change{op: opRmdir, path: d.path()}), dir)
	delete(dir.children, name)
	d.parent, d.removed = nil, true
	return 0
}

// rename implements rename(2) and renameat2(2) with RENAME_NOREPLACE or
// RENAME_EXCHANGE. It is one journal change, so it is durable whole or not
// at all.
func (v *volume) rename(dir *inode, name string, newDir *inode, newName string, flags uint32) syscall.Errno {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, d := range []*inode{dir, newDir} {
		if errno := v.usableDir(d); errno != 0 {
			return errno
		}
	}
	if flags&^(unix.RENAME_NOREPLACE|unix.RENAME_EXCHANGE) != 0 || flags == unix.RENAME_NOREPLACE|unix.RENAME_EXCHANGE {
		return syscall.EINVAL
	}
	src, ok := dir.children[name]
	if !ok {
		return syscall.ENOENT
	}
	dst, exists := newDir.children[newName]
	switch {
	case flags&unix.RENAME_NOREPLACE != 0 && exists:
		return syscall.EEXIST
	case flags&unix.RENAME_EXCHANGE != 0 && !exists:
		return syscall.ENOENT
	case exists && dst == src:
		return 0 // two names of one file: rename(2) does nothing
	}
	// A directory cannot move below itself.
	if src.isDir() && within(newDir, src) || exists && dst.isDir() && flags&unix.RENAME_EXCHANGE != 0 && within(dir, dst) {
		return syscall.EINVAL
	}
	if exists && flags&unix.RENAME_EXCHANGE == 0 {
		switch {
		case src.isDir() && !dst.isDir():
			return syscall.ENOTDIR
		case !src.isDir() && dst.isDir():
			return syscall.EISDIR
		case dst.isDir() && len(dst.children) > 0:
			return syscall.ENOTEMPTY
		}
	}

	seq := v.record(change{
		op:    opRename,
		path:  filepath.Join(dir.path(), name),
		to:    filepath.Join(newDir.path(), newName),
		flags: flags,
	})
	touch(seq, dir, newDir)
	now := time.Now()
	delete(dir.children, name)
	newDir.children[newName] = src
	src.lastOwn, src.ctime = seq, now
	if src.isDir() {
		src.parent, src.name = newDir, newName
	}
	switch {
	case exists && flags&unix.RENAME_EXCHANGE != 0:
		dir.children[name] = dst
		dst.lastOwn, dst.ctime = seq, now
		if dst.isDir() {
			dst.parent, dst.name = dir, name
		}
	case exists && dst.isDir():
		dst.parent, dst.removed = nil, true
	case exists:
		dst.nlink--
		dst.ctime = now
		v.release(dst)
	}
	return 0
}

// within reports whether d is anc or below it.
func within(d, anc *inode) bool {
	for ; d != nil; d = d.parent {
		if d == anc {
			return true
		}
	}
	return false
}

func (v *volume) readdir(dir *inode) ([]dirEntry, syscall.Errno) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.dead {
		return nil, syscall.EIO
	}
	if !dir.isDir() {
		return nil, syscall.ENOTDIR
	}
	out := make([]dirEntry, 0, len(dir.children))
	for name, c := range dir.children {
		out = append(out, dirEntry{name: name, mode: c.mode, ino: c.ino})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, 0
}

func (v *volume) open(f *inode, truncate bool) syscall.Errno {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case v.dead:
		return syscall.EIO
	case f.isDir():
		return syscall.EISDIR
	case f.data == nil:
		return syscall.ENOENT
	}
	f.opens++
	if truncate {
		f.data.truncate(0)
		f.mtime, f.ctime = time.Now(), time.Now()
	}
	return 0
}

func (v *volume) close(f *inode) {
	v.mu.Lock()
	defer v.mu.Unlock()
	f.opens--
	v.release(f)
}

func (v *volume) read(f *inode, buf []byte, off int64) (int, syscall.Errno) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.dead || f.data == nil {
		return 0, syscall.EIO
	}
	n, err := f.data.read(buf, off)
	if err != nil {
		return 0, syscall.EIO
	}
	return n, 0
}

func (v *volume) write(f *inode, data []byte, off int64) syscall.Errno {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.dead || f.data == nil {
		return syscall.EIO
	}
	if err := f.data.write(data, off); err != nil {
		return syscall.EIO
	}
	f.mtime, f.ctime = time.Now(), time.Now()
	return 0
}

// allocate implements fallocate(2) mode 0: the file grows to cover the range.
func (v *volume) allocate(f *inode, off, length uint64, mode uint32) syscall.Errno {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case v.dead || f.data == nil:
		return syscall.EIO
	case mode != 0:
		return syscall.EOPNOTSUPP
	}
	if end := int64(off + length); end > f.data.size {
		f.data.truncate(end)
		f.ctime = time.Now()
	}
	return 0
}

// slowDisk waits out Options.SyncDelay, or until the power cut.
func (v *volume) slowDisk() error {
	if v.delay <= 0 {
		return nil
	}
	t := time.NewTimer(v.delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-v.cut:
		return errPowerCut
	}
}

// fsyncFile makes a file's data, size and attributes durable and, unless
// the namespace is strict, the change that gave the file its name.
func (v *volume) fsyncFile(f *inode) syscall.Errno {
	return v.fsync(&v.stats.Fsyncs, func() error {
		if f.data == nil {
			return nil
		}
		if err := v.syncFile(f); err != nil || v.strict {
			return err
		}
		return v.commit(f.lastOwn)
	})
}

// fsync runs one fsync on a slow disk: the delay, then sync under the lock,
// counted in counter. A power cut during the delay or a dead volume is EIO.
func (v *volume) fsync(counter *int, sync func() error) syscall.Errno {
	if err := v.slowDisk(); err != nil {
		return syscall.EIO
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.dead {
		return syscall.EIO
	}
	*counter++
	if err := sync(); err != nil {
		return syscall.EIO
	}
	return 0
}

func (v *volume) syncFile(f *inode) error {
	if err := f.data.sync(); err != nil {
		return err
	}
	if !f.attrDirty {
		return nil
	}
	fd := int(f.data.backing.Fd())
	if err := unix.Fchmod(fd, f.mode&07777); err != nil {
		return fmt.Errorf("chmod backing: %w", err)
	}
	if err := unix.Fchown(fd, int(f.uid), int(f.gid)); err != nil {
		return fmt.Errorf("chown backing: %w", err)
	}
	tv := []unix.Timeval{unix.NsecToTimeval(f.atime.UnixNano()), unix.NsecToTimeval(f.mtime.UnixNano())}
	if err := unix.Futimes(fd, tv); err != nil {
		return fmt.Errorf("set times on backing: %w", err)
	}
	if err := f.data.backing.Sync(); err != nil {
		return fmt.Errorf("fsync backing: %w", err)
	}
	f.attrDirty = false
	return nil
}

// fsyncDir makes the changes to a directory's entries durable, with every
// change the journal holds before them; unless the namespace is strict,
// also the change that gave the directory its name.
func (v *volume) fsyncDir(d *inode) syscall.Errno {
	return v.fsync(&v.stats.DirFsyncs, func() error {
		upTo := d.lastEntries
		if !v.strict {
			upTo = max(upTo, d.lastOwn)
		}
		return v.commit(upTo)
	})
}

// commit replays the journal on the backing directory up to and including
// change seq, then fsyncs the backing directories it touched.
func (v *volume) commit(seq uint64) error {
	n := 0
	touched := map[string]struct{}{}
	for n < len(v.journal) && v.journal[n].seq <= seq {
		c := &v.journal[n]
		if err := v.apply(c); err != nil {
			v.journal = v.journal[n:]
			return fmt.Errorf("replay change %d on backing: %w", c.seq, err)
		}
		touched[filepath.Dir(c.path)] = struct{}{}
		if c.op == opRename {
			touched[filepath.Dir(c.to)] = struct{}{}
		}
		if c.file != nil {
			c.file.journalRefs--
			v.release(c.file)
		}
		n++
	}
	if n == 0 {
		return nil
	}
	v.journal = slices.Delete(v.journal, 0, n)
	v.stats.Commits += n
	dirs := make([]string, 0, len(touched))
	for d := range touched {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, d := range dirs {
		if err := fsyncPath(filepath.Join(v.root, d)); err != nil {
			// A later change may have removed the directory; its parent's
			// fsync carries that removal.
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return err
		}
	}
	return nil
}

func (v *volume) apply(c *change) error {
	abs := filepath.Join(v.root, c.path)
	switch c.op {
	case opLink:
		src := fmt.Sprintf("/proc/self/fd/%d", c.file.data.backing.Fd())
		return unix.Linkat(unix.AT_FDCWD, src, unix.AT_FDCWD, abs, unix.AT_SYMLINK_FOLLOW)
	case opMkdir:
		return unix.Mkdir(abs, c.mode)
	case opUnlink:
		return unix.Unlink(abs)
	case opRmdir:
		return unix.Rmdir(abs)
	case opRename:
		return unix.Renameat2(unix.AT_FDCWD, abs, unix.AT_FDCWD, filepath.Join(v.root, c.to), uint(c.flags))
	case opChmod:
		return unix.Chmod(abs, c.mode)
	}
	return fmt.Errorf("unknown change %d", c.op)
}

func fsyncPath(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync backing %s: %w", path, err)
	}
	return nil
}

// powerCut drops everything not durable and stops the volume: every later
// operation fails with EIO.
func (v *volume) powerCut() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.dead {
		return
	}
	v.dead = true
	close(v.cut)
	v.stats.DroppedChanges = len(v.journal)
	for _, c := range v.journal {
		if c.file != nil {
			c.file.journalRefs--
		}
	}
	v.journal = nil
	for f := range v.files {
		if f.data.pending() {
			v.stats.DroppedFiles++
			v.stats.DroppedBytes += f.data.pendingBytes()
		}
		_ = f.data.backing.Close()
		f.data = nil
	}
	clear(v.files)
}

// shutdown makes everything durable, as a clean shutdown does, and stops
// the volume.
func (v *volume) shutdown() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.dead {
		return nil
	}
	err := v.commit(v.seq)
	for f := range v.files {
		if err == nil && f.nlink > 0 {
			err = v.syncFile(f)
		}
	}
	v.dead = true
	close(v.cut)
	for f := range v.files {
		_ = f.data.backing.Close()
		f.data = nil
	}
	clear(v.files)
	return err
}

func (v *volume) snapshot() Stats {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.stats
}

// errnoOf turns an error from the backing into the errno the mount reports.
func errnoOf(err error) syscall.Errno {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return syscall.EIO
}

// setAttr sets *dst to *v when v is given, marking the attributes dirty.
func setAttr[T any](dst *T, v *T, dirty *bool) {
	if v != nil {
		*dst, *dirty = *v, true
	}
}
