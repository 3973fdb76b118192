package lazyfs

import "errors"

var (
	// ErrUnavailable means FUSE cannot be used here: /dev/fuse is missing or
	// cannot be opened, or the mount syscall is not permitted. Tests skip on
	// it; MountForTest does so itself.
	ErrUnavailable = errors.New("lazyfs: FUSE unavailable")

	// ErrInvalid means Mount was given bad options or directories, found
	// before anything was mounted.
	ErrInvalid = errors.New("lazyfs: invalid mount")

	// ErrClosed means the filesystem was already unmounted or powered off.
	ErrClosed = errors.New("lazyfs: filesystem closed")
)
