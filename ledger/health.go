package ledger

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
)

// lowDiskBytes is the free space below which a disk counts as full: the
// next commit (a batch of 100 messages of 1 KiB with its indexes is about
// half of it) or the WAL's growth may not fit.
const lowDiskBytes = 1 << 20

// CheckWritable says whether the next commit can be written, without taking
// the writer, so it answers at once while a batch runs: it returns an error
// wrapping ErrReadOnly when the file, its WAL or its directory cannot be
// written (a read-only mount, an immutable file, lost permissions),
// ErrFull when the disk has less than 1 MiB free, and a *MaxSizeError when
// the file is within that of Config.MaxSizeBytes. On systems other than
// Linux only the cap is checked. SQLite writes only at commit and
// checkpoint, so this looks at the filesystem rather than at a write that
// might not reach it.
func (s *Store) CheckWritable(ctx context.Context) error {
	for _, p := range []string{s.path, s.path + "-wal"} {
		if err := writable(p); err != nil {
			return fmt.Errorf("%w: %w", ErrReadOnly, err)
		}
	}
	if err := CheckDisk(filepath.Dir(s.path)); err != nil {
		return err
	}
	if s.cfg.MaxSizeBytes == 0 {
		return nil
	}
	room, err := s.capRoom(ctx)
	if err != nil {
		return err
	}
	if room < min(lowDiskBytes, s.cfg.MaxSizeBytes/8) {
		return &MaxSizeError{MaxSizeBytes: s.cfg.MaxSizeBytes}
	}
	return nil
}

// capRoom is how many bytes the database may still grow by under
// Config.MaxSizeBytes, free pages counted as room; read without the writer.
func (s *Store) capRoom(ctx context.Context) (int64, error) {
	var pages, freePages, size int64
	err := s.reader.QueryRowContext(ctx, `SELECT (SELECT page_count FROM pragma_page_count()),
		(SELECT freelist_count FROM pragma_freelist_count()), (SELECT page_size FROM pragma_page_size())`).Scan(&pages, &freePages, &size)
	if err != nil {
		return 0, fmt.Errorf("ledger: size of %s: %w", s.path, interpret(err))
	}
	// max_page_count counts pages of the file's own size.
	return (maxPages(s.cfg.MaxSizeBytes) - pages + freePages) * size, nil
}

// explainFull tells a full cap from a full disk: SQLite says SQLITE_FULL
// for both. The cap is blamed when the disk had room for the database to
// grow to it, so the cap was the tighter limit.
func (s *Store) explainFull(err error) error {
	if err == nil || s.cfg.MaxSizeBytes == 0 || !errors.Is(err, ErrFull) || errors.Is(err, ErrAtMaxSize) {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.BusyTimeout)
	defer cancel()
	room, rerr := s.capRoom(ctx)
	if rerr != nil {
		return err
	}
	if free, known := diskFree(s.path); known && free <= room {
		return err
	}
	return &MaxSizeError{MaxSizeBytes: s.cfg.MaxSizeBytes, Err: err}
}

// CheckDisk is the filesystem half of CheckWritable for any directory (an
// embedded NATS store beside the ledger, say): an error wrapping
// ErrReadOnly when dir cannot be written, ErrFull when its disk has less
// than 1 MiB free; nil where the OS does not say (not Linux).
func CheckDisk(dir string) error {
	if err := writable(dir); err != nil {
		return fmt.Errorf("%w: %w", ErrReadOnly, err)
	}
	if free, known := diskFree(dir); known && free < lowDiskBytes {
		return fmt.Errorf("%w: %d bytes free on the disk of %s", ErrFull, free, dir)
	}
	return nil
}

// DiskFree is the space left on the filesystem holding path for this
// process, as the checks of CheckDisk count it; known is false where it
// cannot be read (another OS, a path gone).
func DiskFree(path string) (free int64, known bool) { return diskFree(path) }
