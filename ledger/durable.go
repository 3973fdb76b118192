package ledger

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
)

// Pipelined commits. With synchronous=FULL in WAL mode SQLite makes a
// commit durable by syncing the WAL file before the commit returns: FULL is
// NORMAL plus that one sync. ApplyBatchPipelined commits a batch at NORMAL
// and leaves the sync to Pending.Durable, which the caller runs on another
// goroutine while the next batch does its work, so the disk's flush no
// longer stalls the writer. Nothing is acknowledged before Durable returns:
// at that point the batch is exactly as durable as a FULL commit.
//
// Every other write of the store stays at FULL; a FULL commit syncs the
// whole WAL, so it also makes every pipelined batch before it durable (an
// outbox claim before a send, for one).

// walSyncer syncs the WAL file on behalf of pipelined commits. One sync
// covers every commit that returned before it began.
type walSyncer struct {
	path      string        // the database's -wal file
	committed atomic.Uint64 // pipelined commits that have returned
	mu        sync.Mutex    // one sync at a time; the rest wait and find theirs done
	durable   uint64        // commits known on disk, under mu
	f         *os.File      // the WAL file, under mu; reopened if SQLite made a new one
}

// Pending is a batch committed by ApplyBatchPipelined whose commit may not
// be on disk yet.
type Pending struct {
	y     *walSyncer
	gen   uint64  // 0: nothing to wait for
	entry *flight // the batch's changelog entry on its way; nil: none
}

// Durable returns once the batch's commit is on disk, as a FULL commit would
// have been when it returned, and its changelog entry, if it has one, is in
// the log. Acknowledge nothing of the batch before.
func (p Pending) Durable(ctx context.Context) error {
	if p.gen != 0 && p.y != nil {
		if err := p.y.wait(ctx, p.gen); err != nil {
			return err
		}
	}
	return p.entry.wait(ctx)
}

// commit records a pipelined commit that has returned and returns its
// generation.
func (y *walSyncer) commit() uint64 { return y.committed.Add(1) }

func (y *walSyncer) wait(ctx context.Context, gen uint64) error {
	y.mu.Lock()
	defer y.mu.Unlock()
	if y.durable >= gen {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	target := y.committed.Load() // every commit counted has written its frames
	if err := y.sync(); err != nil {
		return fmt.Errorf("ledger: sync %s: %w", y.path, err)
	}
	y.durable = target
	return nil
}

// sync flushes the WAL file. SQLite deletes the WAL only when its last
// connection closes, after copying it into the synced database file; if it
// made a new one since, the new one is opened and synced (harmless) and
// the old one's frames are in the database file already.
func (y *walSyncer) sync() error {
	fi, err := os.Stat(y.path)
	if err != nil {
		return err
	}
	if y.f != nil {
		if mine, err := y.f.Stat(); err != nil || !os.SameFile(mine, fi) {
			y.f.Close()
			y.f = nil
		}
	}
	if y.f == nil {
		if y.f, err = os.Open(y.path); err != nil {
			return err
		}
	}
	return fdatasync(y.f)
}

func (y *walSyncer) close() {
	y.mu.Lock()
	defer y.mu.Unlock()
	if y.f != nil {
		y.f.Close()
		y.f = nil
	}
}
