package lazyfs

import (
	"fmt"
	"io"
	"os"
	"sort"
)

// pageSize is the granularity of the overlay, as of a kernel page cache.
const pageSize = 4096

// page is one dirty page of a file: its whole content as the mount sees it,
// and the span [lo, hi) that writes have touched since the last sync, which
// is what a power cut counts as lost.
type page struct {
	buf    [pageSize]byte
	lo, hi int
}

// fileData is the page-cache model of one regular file: pages written since
// the last sync, over the content of the backing file, which holds exactly
// what has been synced. The volume's mutex guards it.
type fileData struct {
	backing *os.File // durable content; a named file or an O_TMPFILE

	size        int64 // size as the mount sees it
	durableSize int64 // size of the backing file
	// floor hides backing content at and past it: a truncate below the
	// durable size, followed by growth, must read back zeros, not the old
	// bytes still in the backing file.
	floor int64
	dirty map[int64]*page // by page index
}

func newFileData(backing *os.File, size int64) *fileData {
	return &fileData{backing: backing, size: size, durableSize: size, floor: size, dirty: map[int64]*page{}}
}

// pending reports whether the file has data or a size that a sync would write.
func (d *fileData) pending() bool {
	return len(d.dirty) > 0 || d.size != d.durableSize || d.floor != d.durableSize
}

// pendingBytes is the number of bytes written since the last sync, counted
// per page as the span the writes touched.
func (d *fileData) pendingBytes() int64 {
	var n int64
	for _, p := range d.dirty {
		n += int64(p.hi - p.lo)
	}
	return n
}

// readBase fills buf with the durable content at off: backing bytes below
// the floor, zeros past it.
func (d *fileData) readBase(buf []byte, off int64) error {
	clear(buf)
	limit := min(d.floor, d.durableSize)
	if off >= limit {
		return nil
	}
	n := min(int64(len(buf)), limit-off)
	if _, err := d.backing.ReadAt(buf[:n], off); err != nil && err != io.EOF {
		return fmt.Errorf("read backing: %w", err)
	}
	return nil
}

// read copies the visible content at off into buf, up to the visible size,
// and returns the number of bytes copied.
func (d *fileData) read(buf []byte, off int64) (int, error) {
	if off >= d.size {
		return 0, nil
	}
	buf = buf[:min(int64(len(buf)), d.size-off)]
	for done := 0; done < len(buf); {
		pos := off + int64(done)
		idx, in := pos/pageSize, int(pos%pageSize)
		n := min(len(buf)-done, pageSize-in)
		if p, ok := d.dirty[idx]; ok {
			copy(buf[done:done+n], p.buf[in:in+n])
		} else if err := d.readBase(buf[done:done+n], pos); err != nil {
			return 0, err
		}
		done += n
	}
	return len(buf), nil
}

// write puts data at off into the overlay, growing the file if it ends past
// the visible size.
func (d *fileData) write(data []byte, off int64) error {
	for done := 0; done < len(data); {
		pos := off + int64(done)
		idx, in := pos/pageSize, int(pos%pageSize)
		n := min(len(data)-done, pageSize-in)
		p, err := d.dirtyPage(idx)
		if err != nil {
			return err
		}
		copy(p.buf[in:in+n], data[done:done+n])
		if p.hi == 0 {
			p.lo, p.hi = in, in+n
		} else {
			p.lo, p.hi = min(p.lo, in), max(p.hi, in+n)
		}
		done += n
	}
	d.size = max(d.size, off+int64(len(data)))
	return nil
}

// dirtyPage returns page idx of the overlay, reading it from the durable
// content on first use, as a page cache does on a partial write.
func (d *fileData) dirtyPage(idx int64) (*page, error) {
	if p, ok := d.dirty[idx]; ok {
		return p, nil
	}
	p := &page{}
	start := idx * pageSize
	if start < d.size {
		if err := d.readBase(p.buf[:], start); err != nil {
			return nil, err
		}
		// Bytes past the visible size are zero whatever the backing holds.
		if end := d.size - start; end < pageSize {
			clear(p.buf[end:])
		}
	}
	d.dirty[idx] = p
	return p, nil
}

// truncate sets the visible size. Shrinking drops the overlay past the new
// end and hides the backing content there; growing reads back zeros.
func (d *fileData) truncate(size int64) {
	if size < d.size {
		for idx, p := range d.dirty {
			start := idx * pageSize
			switch {
			case start >= size:
				delete(d.dirty, idx)
			case start+pageSize > size:
				end := int(size - start)
				clear(p.buf[end:])
				p.hi = min(p.hi, end)
				p.lo = min(p.lo, p.hi)
			}
		}
		d.floor = min(d.floor, size)
	}
	d.size = size
}

// sync writes the overlay and the size to the backing file and fsyncs it.
// On error the overlay is kept, so a later sync can retry.
func (d *fileData) sync() error {
	if !d.pending() {
		return nil
	}
	if d.floor < d.durableSize {
		if err := d.backing.Truncate(d.floor); err != nil {
			return fmt.Errorf("truncate backing: %w", err)
		}
		d.durableSize = d.floor
	}
	idxs := make([]int64, 0, len(d.dirty))
	for idx := range d.dirty {
		idxs = append(idxs, idx)
	}
	sort.Slice(idxs, func(i, j int) bool { return idxs[i] < idxs[j] })
	for _, idx := range idxs {
		start := idx * pageSize
		n := min(int64(pageSize), d.size-start)
		if _, err := d.backing.WriteAt(d.dirty[idx].buf[:n], start); err != nil {
			return fmt.Errorf("write backing: %w", err)
		}
		d.durableSize = max(d.durableSize, start+n)
	}
	if d.durableSize != d.size {
		if err := d.backing.Truncate(d.size); err != nil {
			return fmt.Errorf("truncate backing: %w", err)
		}
	}
	if err := d.backing.Sync(); err != nil {
		return fmt.Errorf("fsync backing: %w", err)
	}
	clear(d.dirty)
	d.durableSize, d.floor = d.size, d.size
	return nil
}
