package ledger

import (
	"encoding/binary"
	"time"
)

// A checkpoint copies the WAL's pages into the database file and syncs it:
// a burst of writes that every other fsync on the disk waits behind, the
// embedded server's before each publish ack and the ledger's own before
// each batch's acks. Taken every second at 1 000 msg/s it was the tail of
// the latency: p99.9 13-127 ms and max up to 147 ms over 20 s runs, where
// one every 10 s gave 10-21 ms and at most 28 ms (BENCHMARKS.md). So a tick
// checkpoints only once the WAL holds checkpointBytes not yet copied, or
// checkpointMaxTicks ticks (30 s by default) have passed since the last
// one; at full speed that is every tick, as before.
const (
	checkpointBytes    = 4 << 20
	checkpointMaxTicks = 30
)

// walFrames is the WAL's length in frames since it was last reused from
// its start (mxFrame), and the size of its frames not yet copied into the
// database, read from the WAL index (the -shm file: its header's mxFrame
// and the checkpoint's nBackfill, in the machine's byte order, as
// https://www.sqlite.org/walformat.html lays them out) through SQLite's own
// descriptor of it (walIndexFD). Opening the file again is not an option:
// closing any descriptor of a file drops every POSIX lock this process
// holds on it, SQLite's included. ok is false when it cannot be read; the
// caller checkpoints then. A read racing a commit may be off by that
// commit: the next look sees it.
func walFrames(fd *walIndexFD) (frames uint32, pending int64, ok bool) {
	hdr, ok := fd.read()
	if !ok {
		return 0, 0, false
	}
	page := int64(binary.NativeEndian.Uint16(hdr[14:16]))
	if page == 1 {
		page = 65536
	}
	mxFrame := binary.NativeEndian.Uint32(hdr[16:20])
	nBackfill := binary.NativeEndian.Uint32(hdr[96:100])
	if page < 512 || page&(page-1) != 0 || nBackfill > mxFrame {
		return 0, 0, false // not initialised, or not a WAL index
	}
	return mxFrame, int64(mxFrame-nBackfill) * (page + 24), true
}

// walRestartFrames is the WAL's length (64 MiB of 4 KiB pages) past which
// the writer, after a batch's commit, copies what the background
// checkpoint has not yet (once that is at most walRestartPending), so that
// its next transaction reuses the WAL from its start. The background
// checkpoint runs beside the batches, and the WAL is reused only by a
// transaction that begins after a checkpoint ended: batches that follow
// each other without a gap (a backlog) never begin there, and 100 000
// messages of random ids left a WAL of 460-505 MB beside a ledger of 12
// (TestBackToBackBatchesKeepTheWALBounded). SQLite's own
// wal_autocheckpoint at this length cost that test 40 % of its rate: the
// writer copied the whole WAL itself. Past walCapFrames (256 MiB) the
// writer copies whatever is pending: a backlog of random ids writes a page
// or more per id, faster than the background checkpoint copies it, and the
// WAL must not fill the disk.
const (
	walRestartFrames  = 16384
	walRestartPending = 16 << 20
	walCapFrames      = 65536
)

// checkpointDue says whether a tick should checkpoint, ticks after the
// last checkpoint, and how long until the next tick: while the WAL is long
// (a backlog), every walLongTick, so that little is left for the writer's
// copy (restartLongWAL).
func (s *Store) checkpointDue(ticks int, interval time.Duration) (due bool, next time.Duration) {
	frames, pending, ok := s.walLength()
	long := ok && frames >= walRestartFrames
	if long && pending > 0 { // an idle ledger's long WAL is reused at its next write
		interval = min(interval, walLongTick)
	}
	return !ok || pending >= checkpointBytes || (pending > 0 && ticks >= checkpointMaxTicks) || long && pending > walRestartPending, interval
}

// walLongTick is the background checkpoint's tick while the WAL is long.
const walLongTick = 100 * time.Millisecond
