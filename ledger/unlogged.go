package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unsafe"

	"github.com/klauspost/compress/s2"
	"github.com/oklog/ulid/v2"
	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// Pipelined changelog entries. A batch of an owned partition committed
// through ApplyBatchPipelined does not wait for its entry's publish: the
// entry goes to the log while the batch commits and the next one does its
// work, and Pending.Durable returns only once the entry is in the log.
// Nothing of a batch leaves before then: its messages are acknowledged
// after Durable, and every other write (an outbox claim before its send)
// waits for the entry before its own commit, so an effect follows only
// entries the log holds. At most one batch is committed and not yet known
// in the log: the next write waits for its entry first.
//
// Such a batch writes, after its changes are taken for the entry, which
// entry it is and the changeset that undoes it (jetledger_unlogged). If
// the entry does not land, the store stops writing (as a refused publish
// does), and whoever opens the file next settles the batch against the log
// before anything else (SettleUnlogged): undone when the log lacks its
// entry, kept when it holds it.

// EntryAppender is a Changelog whose entries' message ids the store
// chooses: AppendAs publishes parts as Append does, part i with message id
// id + "." + i. A store pipelines its batches' entries only through a
// Changelog that is one; with another each batch waits for its entry.
type EntryAppender interface {
	AppendAs(ctx context.Context, after uint64, id string, parts [][]byte) error
}

// flight is a pipelined batch's entry on its way to the log.
type flight struct {
	done chan struct{}
	err  error // set before done closes
}

// wait returns once the entry landed (nil) or did not (its error).
func (f *flight) wait(ctx context.Context) error {
	if f == nil {
		return nil
	}
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// landed waits for the last pipelined batch's entry, if one is on its way:
// a write after it commits only once it is in the log.
func (c *changelogState) landed(ctx context.Context) error {
	c.mu.Lock()
	f := c.flight
	c.mu.Unlock()
	return f.wait(ctx)
}

// publishPipelined is publish for a pipelined batch: it starts the entry's
// publish, bounded by bound, and returns without waiting for it; the
// flight says when it is in the log. The batch's undo, and which entry it
// is, go in jetledger_unlogged within the batch.
func (r *recording) publishPipelined(ctx context.Context, tx execer, bound time.Duration) (done func(error), f *flight, err error) {
	if r == nil {
		return func(error) {}, nil, nil
	}
	appender, ok := r.c.log.(EntryAppender)
	if !ok {
		done, err := r.publish(ctx, tx)
		return done, nil, err
	}
	defer r.close()
	e, err := r.entry(ctx, tx)
	if err != nil || e.parts == nil {
		return func(error) {}, nil, err
	}
	undo, err := r.invert(e.changes)
	if err != nil {
		return nil, nil, err
	}
	id := ulid.Make().String()
	last := id + "." + strconv.Itoa(len(e.parts)-1)
	if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO jetledger_unlogged (id, log, after, seq, entry, undo)
		SELECT 1, log, ?, seq, ?, ? FROM jetledger_changelog WHERE id = 1`, int64(e.after), last, s2.Encode(nil, undo)); err != nil {
		return nil, nil, fmt.Errorf("ledger: changelog: record the batch's undo: %w", err)
	}
	c := r.c
	f = &flight{done: make(chan struct{})}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	go func() {
		defer cancel()
		if err := appender.AppendAs(actx, e.after, id, e.parts); err != nil {
			c.fail(err)
			f.err = fmt.Errorf("%w: %w", ErrNotChangelogOwner, err)
		}
		close(f.done)
	}()
	c.mu.Lock()
	c.flight = f
	c.mu.Unlock()
	return c.moveOn(e), f, nil
}

// invert is the changeset that undoes changes.
func (r *recording) invert(changes []byte) ([]byte, error) {
	tls := r.tls
	in := libc.Xmalloc(tls, libc.Tsize_t(max(len(changes), 1)))
	defer libc.Xfree(tls, in)
	copy(unsafe.Slice((*byte)(cptr(in)), len(changes)), changes)
	pn := libc.Xmalloc(tls, 8)
	defer libc.Xfree(tls, pn)
	pp := libc.Xmalloc(tls, 8)
	defer libc.Xfree(tls, pp)
	if rc := sqlite3.Xsqlite3changeset_invert(tls, int32(len(changes)), in, pn, pp); rc != sqlite3.SQLITE_OK {
		return nil, fmt.Errorf("ledger: changelog: invert the changes: %s", sqlite3Error(tls, rc))
	}
	n, p := *(*int32)(cptr(pn)), *(*uintptr)(cptr(pp))
	defer sqlite3.Xsqlite3_free(tls, p)
	return append([]byte(nil), unsafe.Slice((*byte)(cptr(p)), int(n))...), nil
}

// Unlogged is a pipelined batch the ledger holds whose entry the log may
// lack: the ledger's position is still that entry.
type Unlogged struct {
	Log   string // the changelog's instance
	After uint64 // the entry it follows: where the ledger stood before it
	Seq   uint64 // the entry's last part
	Entry string // the message id of its last part
}

// UnloggedQuery reads a ledger file's Unlogged batch: log, after, seq and
// entry, no row when there is none. For readers of a closed file.
const UnloggedQuery = `SELECT u.log, u.after, u.seq, u.entry FROM jetledger_unlogged u
	JOIN jetledger_changelog c ON c.id = 1 AND c.log = u.log AND c.seq = u.seq WHERE u.id = 1`

// Unlogged says which batch the ledger holds that its log may lack, once
// the entry of the store's own last pipelined batch, if one is on its
// way, has landed or failed. ok false: none.
func (s *Store) Unlogged(ctx context.Context) (u Unlogged, ok bool, err error) {
	if c := s.changelog; c != nil {
		c.landed(ctx) //nolint:errcheck // its outcome is what the log is asked
	}
	return unloggedIn(ctx, s.writer)
}

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// unloggedIn reads the Unlogged batch through q.
func unloggedIn(ctx context.Context, q queryer) (u Unlogged, ok bool, err error) {
	u, ok, err = ScanUnlogged(q.QueryRowContext(ctx, UnloggedQuery))
	if err != nil {
		return Unlogged{}, false, fmt.Errorf("ledger: read the unlogged batch: %w", interpret(err))
	}
	return u, ok, nil
}

// SettleUnlogged settles the batch u (Unlogged): undo true undoes it, for
// its entry is not in the log; false keeps it, for the log holds it (or
// it cannot be told and the file's copy is all there is). Called before
// the store applies or writes anything, as its owner or a standby; an
// owner (TakeOver, and no failure since) is not undone.
func (s *Store) SettleUnlogged(ctx context.Context, u Unlogged, undo bool) error {
	if c := s.changelog; c != nil && undo {
		c.mu.Lock()
		owner := c.owner
		c.mu.Unlock()
		if owner {
			return fmt.Errorf("%w: the store owns its changelog: an unlogged batch is undone before it takes over", ErrInvalidConfig)
		}
	}
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("ledger: settle the unlogged batch: %w", interpret(err))
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	now, ok, err := unloggedIn(ctx, tx)
	switch {
	case err != nil:
		return err
	case !ok || now != u:
		return fmt.Errorf("%w: the unlogged batch is no longer entry %d of %s", ErrChangesDoNotFit, u.Seq, u.Log)
	}
	if undo {
		var packed []byte
		if err := tx.QueryRowContext(ctx, `SELECT undo FROM jetledger_unlogged WHERE id = 1`).Scan(&packed); err != nil {
			return fmt.Errorf("ledger: settle the unlogged batch: %w", interpret(err))
		}
		changes, err := s2.Decode(nil, packed)
		if err != nil {
			return fmt.Errorf("%w: the undo of entry %d of %s cannot be read: %w", ErrChangesDoNotFit, u.Seq, u.Log, err)
		}
		if err := s.applyChangeset(ctx, tx, changes); err != nil {
			return fmt.Errorf("ledger: undo the batch of entry %d of %s: %w", u.Seq, u.Log, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM jetledger_unlogged`); err != nil {
		return fmt.Errorf("ledger: settle the unlogged batch: %w", interpret(err))
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("ledger: settle the unlogged batch: %w", interpret(err))
	}
	if undo {
		s.ids.reset() // its rows are gone, and their seqs free again
	}
	return nil
}

// publishFor publishes the batch's changes as m says: pipelined (the
// returned flight on its way) or waited for.
func (r *recording) publishFor(ctx context.Context, tx execer, m mode, bound time.Duration) (func(error), *flight, error) {
	if m.entryPipelined {
		return r.publishPipelined(ctx, tx, bound)
	}
	done, err := r.publish(ctx, tx)
	return done, nil, err
}

// unloggedSettled refuses a take-over while the ledger holds a batch its
// log may lack: settled first (changelog's CatchUp does), or it would be
// the start of entries that do not follow the log's.
func (s *Store) unloggedSettled(ctx context.Context) error {
	u, ok, err := s.Unlogged(ctx)
	switch {
	case err != nil:
		return err
	case ok:
		return fmt.Errorf("%w: the ledger's last batch, entry %d of %s, may not be in the log: settle it first (SettleUnlogged; the changelog's CatchUp does)", ErrChangesDoNotFit, u.Seq, u.Log)
	}
	return nil
}

// LoggedPosition is ChangelogPosition once the log holds it: it waits for
// the entry of the store's last pipelined batch, if one is on its way, and
// fails if that entry did not land. What an owner says it holds (to the
// owners bucket) is this, never a batch the log may lack.
func (s *Store) LoggedPosition(ctx context.Context) (ChangelogPosition, error) {
	pos, err := s.ChangelogPosition(ctx)
	if err != nil || s.changelog == nil {
		return pos, err
	}
	// Read after the position: this batch's entry or a later one's, which
	// lands only after it.
	return pos, s.changelog.landed(ctx)
}

// ScanUnlogged scans UnloggedQuery's row (ok false: none).
func ScanUnlogged(row *sql.Row) (u Unlogged, ok bool, err error) {
	var after, seq int64
	err = row.Scan(&u.Log, &after, &seq, &u.Entry)
	if errors.Is(err, sql.ErrNoRows) {
		return Unlogged{}, false, nil
	}
	if err != nil {
		return Unlogged{}, false, err
	}
	u.After, u.Seq = uint64(after), uint64(seq)
	return u, true, nil
}
