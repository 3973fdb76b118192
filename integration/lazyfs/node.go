package lazyfs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// node is the FUSE face of one inode of the volume: every operation is the
// volume's, under its mutex. Locks are not implemented here on purpose: the
// mount does not ask the kernel to forward them, so the kernel keeps fcntl
// and flock locks itself, correctly for every process on this host.
type node struct {
	fs.Inode
	vol *volume
	in  *inode
}

var (
	_ fs.NodeLookuper  = (*node)(nil)
	_ fs.NodeGetattrer = (*node)(nil)
	_ fs.NodeSetattrer = (*node)(nil)
	_ fs.NodeOpener    = (*node)(nil)
	_ fs.NodeCreater   = (*node)(nil)
	_ fs.NodeReader    = (*node)(nil)
	_ fs.NodeWriter    = (*node)(nil)
	_ fs.NodeFlusher   = (*node)(nil)
	_ fs.NodeReleaser  = (*node)(nil)
	_ fs.NodeFsyncer   = (*node)(nil)
	_ fs.NodeAllocater = (*node)(nil)
	_ fs.NodeMkdirer   = (*node)(nil)
	_ fs.NodeRmdirer   = (*node)(nil)
	_ fs.NodeUnlinker  = (*node)(nil)
	_ fs.NodeRenamer   = (*node)(nil)
	_ fs.NodeLinker    = (*node)(nil)
	_ fs.NodeReaddirer = (*node)(nil)
	_ fs.NodeStatfser  = (*node)(nil)
)

// handle marks a file opened through the mount, so that Release can count
// its close.
type handle struct{}

// child returns the kernel-facing inode for in, reusing the one go-fuse
// already has for the same inode number.
func (n *node) child(ctx context.Context, in *inode) *fs.Inode {
	return n.NewInode(ctx, &node{vol: n.vol, in: in}, fs.StableAttr{Mode: in.mode & syscall.S_IFMT, Ino: in.ino})
}

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	c, errno := n.vol.lookup(n.in, name, &out.Attr)
	if errno != 0 {
		return nil, errno
	}
	return n.child(ctx, c), 0
}

func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	return n.vol.getattr(n.in, &out.Attr)
}

func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	var ch attrChange
	if size, ok := in.GetSize(); ok {
		ch.size = &size
	}
	if mode, ok := in.GetMode(); ok {
		ch.mode = &mode
	}
	if uid, ok := in.GetUID(); ok {
		ch.uid = &uid
	}
	if gid, ok := in.GetGID(); ok {
		ch.gid = &gid
	}
	if atime, ok := in.GetATime(); ok {
		ch.atime = &atime
	}
	if mtime, ok := in.GetMTime(); ok {
		ch.mtime = &mtime
	}
	return n.vol.setattr(n.in, ch, &out.Attr)
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if errno := n.vol.open(n.in, flags&syscall.O_TRUNC != 0); errno != 0 {
		return nil, 0, errno
	}
	// Every change reaches the page cache through this mount, so the
	// kernel may keep it across opens.
	return &handle{}, fuse.FOPEN_KEEP_CACHE, 0
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	uid, gid := caller(ctx)
	c, errno := n.vol.create(n.in, name, mode, uid, gid, &out.Attr)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	return n.child(ctx, c), &handle{}, fuse.FOPEN_KEEP_CACHE, 0
}

func (n *node) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	got, errno := n.vol.read(n.in, dest, off)
	if errno != 0 {
		return nil, errno
	}
	return fuse.ReadResultData(dest[:got]), 0
}

func (n *node) Write(ctx context.Context, f fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	if errno := n.vol.write(n.in, data, off); errno != 0 {
		return 0, errno
	}
	return uint32(len(data)), 0
}

// Flush is close(2): it makes nothing durable.
func (n *node) Flush(ctx context.Context, f fs.FileHandle) syscall.Errno { return 0 }

func (n *node) Release(ctx context.Context, f fs.FileHandle) syscall.Errno {
	if _, ok := f.(*handle); ok {
		n.vol.close(n.in)
	}
	return 0
}

// Fsync serves fsync and fdatasync on files and, through go-fuse's
// fallback for FSYNCDIR, fsync on directories.
func (n *node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	if n.in.isDir() {
		return n.vol.fsyncDir(n.in)
	}
	return n.vol.fsyncFile(n.in)
}

func (n *node) Allocate(ctx context.Context, f fs.FileHandle, off, size uint64, mode uint32) syscall.Errno {
	return n.vol.allocate(n.in, off, size, mode)
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	uid, gid := caller(ctx)
	c, errno := n.vol.mkdir(n.in, name, mode, uid, gid, &out.Attr)
	if errno != 0 {
		return nil, errno
	}
	return n.child(ctx, c), 0
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.vol.rmdir(n.in, name)
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.vol.unlink(n.in, name)
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	return n.vol.rename(n.in, name, np.in, newName, flags)
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	t, ok := target.(*node)
	if !ok {
		return nil, syscall.EXDEV
	}
	if errno := n.vol.link(n.in, name, t.in, &out.Attr); errno != 0 {
		return nil, errno
	}
	return n.child(ctx, t.in), 0
}

func (n *node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	entries, errno := n.vol.readdir(n.in)
	if errno != 0 {
		return nil, errno
	}
	list := make([]fuse.DirEntry, len(entries))
	for i, e := range entries {
		list[i] = fuse.DirEntry{Name: e.name, Mode: e.mode, Ino: e.ino}
	}
	return fs.NewListDirStream(list), 0
}

func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	var st syscall.Statfs_t
	if err := syscall.Statfs(n.vol.root, &st); err != nil {
		return errnoOf(err)
	}
	out.FromStatfsT(&st)
	return 0
}

// caller returns the uid and gid of the process behind a request.
func caller(ctx context.Context) (uid, gid uint32) {
	if c, ok := fuse.FromContext(ctx); ok {
		return c.Uid, c.Gid
	}
	return 0, 0
}
