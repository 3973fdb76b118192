package ledger

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// Changelog receives the changes of every write transaction of a store
// opened with Config.Changelog, before the transaction commits: a standby
// that applies them in order (ApplyChanges) holds the same ledger. The
// changes are SQLite session changesets of every table the ledger's own
// transactions write: the ledger's rows, the handler's tables, the outbox
// and dead letters.
type Changelog interface {
	// MaxEntry is the most bytes of changes one entry holds; a
	// transaction's larger changes are split over several entries.
	MaxEntry() int
	// Append publishes parts as the log's next len(parts) entries, each
	// only if the log's last entry is the one before it (the first: after).
	// An error means the transaction is rolled back: the parts may be in
	// the log or not, and the store writes nothing more until it has
	// caught up with the log and taken over again (TakeOver).
	Append(ctx context.Context, after uint64, parts [][]byte) error
}

// ChangelogPosition is where a ledger stands in its changelog.
type ChangelogPosition struct {
	Log   string // the changelog's instance; "" before any
	Seq   uint64 // the log's entry this ledger's state includes last
	Owner string // who took the partition over last
	// Origin is where Log began, when it began from a file that was a
	// copy of another instance: that instance and the entry the file
	// held last. Zero when Log began from a file of no log, or unknown.
	Origin ChangelogOrigin
}

// ChangelogOrigin is the position in an earlier instance of a
// partition's changelog that a later instance began from.
type ChangelogOrigin struct {
	Log string
	Seq uint64
}

// PositionQuery reads a ledger file's ChangelogPosition: log, seq, owner,
// origin log and origin seq. For readers of a closed file (a snapshot);
// the file must be at the schema version of this build.
const PositionQuery = `SELECT c.log, c.seq, c.owner, coalesce(o.log, ''), coalesce(o.seq, 0)
	FROM jetledger_changelog c LEFT JOIN jetledger_changelog_origin o ON o.id = 1 WHERE c.id = 1`

// changelogState is a changelog store's side of its log: where its next
// entry goes and whether it may write at all.
type changelogState struct {
	log Changelog

	mu    sync.Mutex // the writer is one connection; mu keeps after and stale exact
	after uint64     // the log's entry the next one follows
	owner bool       // TakeOver succeeded, and nothing went wrong since
	stale error      // why the store may not write: an Append failed
	tls   *libc.TLS
	// flight is the last pipelined batch's entry (publishPipelined), which
	// may still be on its way to the log; nil: none since the store opened.
	flight *flight
}

// recording is one write transaction's SQLite session.
type recording struct {
	c    *changelogState
	tls  *libc.TLS
	sess uintptr
}

// record starts recording the transaction the writer has just begun; nil
// when the store has no changelog. A store that is not its partition's
// owner (no TakeOver, or an Append failed since) writes nothing.
func (s *Store) record() (*recording, error) {
	c := s.changelog
	if c == nil {
		if log := s.copyOf.Load(); log != nil {
			return nil, fmt.Errorf("%w %s: only its partition's owner writes it, through the log; a change made here alone would not be in the log, and the next owner would not have it (to make it this host's alone, open it with Config.LeaveChangelog, jetledger run --leave-changelog, its standbys stopped)", ErrChangelogCopy, *log)
		}
		return nil, nil
	}
	c.mu.Lock()
	owner, stale := c.owner, c.stale
	c.mu.Unlock()
	switch {
	case stale != nil:
		return nil, fmt.Errorf("%w: %w", ErrNotChangelogOwner, stale)
	case !owner:
		return nil, fmt.Errorf("%w: the store has not taken its changelog over", ErrNotChangelogOwner)
	}
	return s.startSession()
}

// startSession attaches a session to every table of the writer's
// connection; the writer is held, so the connection is the transaction's.
func (s *Store) startSession() (*recording, error) {
	db := s.guard.wd.db.Load()
	if db == 0 {
		return nil, errors.New("ledger: changelog: the SQLite driver's connection handle is unknown")
	}
	tls := s.changelog.tls
	pp := libc.Xmalloc(tls, 8)
	defer libc.Xfree(tls, pp)
	main := cText(tls, "main")
	defer libc.Xfree(tls, main)
	if rc := sqlite3.Xsqlite3session_create(tls, db, main, pp); rc != sqlite3.SQLITE_OK {
		return nil, fmt.Errorf("ledger: changelog: start a session: %s", sqlite3Error(tls, rc))
	}
	r := &recording{c: s.changelog, tls: tls, sess: *(*uintptr)(cptr(pp))}
	one := libc.Xmalloc(tls, 4)
	defer libc.Xfree(tls, one)
	*(*int32)(cptr(one)) = 1
	// Tables without a primary key (a handler's) are recorded by rowid.
	// The session is not sized as it records (OBJCONFIG_SIZE): that costs
	// on every row of every batch, more than copying out twice the rare
	// transaction too large for one entry (publish).
	if rc := sqlite3.Xsqlite3session_object_config(tls, r.sess, sqlite3.SQLITE_SESSION_OBJCONFIG_ROWID, one); rc != sqlite3.SQLITE_OK {
		r.close()
		return nil, fmt.Errorf("ledger: changelog: configure the session: %s", sqlite3Error(tls, rc))
	}
	if rc := sqlite3.Xsqlite3session_attach(tls, r.sess, 0); rc != sqlite3.SQLITE_OK {
		r.close()
		return nil, fmt.Errorf("ledger: changelog: attach the session: %s", sqlite3Error(tls, rc))
	}
	return r, nil
}

// close ends the session; nothing more is recorded. Safe on nil.
func (r *recording) close() {
	if r == nil || r.sess == 0 {
		return
	}
	sqlite3.Xsqlite3session_delete(r.tls, r.sess)
	r.sess = 0
}

// execer is the transaction the recording's changes are in.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// publish puts the transaction's changes in the log, with the ledger's new
// position among them, before the caller commits; a transaction that
// changed nothing publishes nothing. The session ends either way. done,
// called with the COMMIT's error, keeps the store from writing if the
// COMMIT failed after its changes went to the log: the log is then ahead
// of the file.
func (r *recording) publish(ctx context.Context, tx execer) (done func(error), err error) {
	if r == nil {
		return func(error) {}, nil
	}
	defer r.close()
	e, err := r.entry(ctx, tx)
	if err != nil || e.parts == nil {
		return func(error) {}, err
	}
	c := r.c
	if err := c.log.Append(ctx, e.after, e.parts); err != nil {
		c.fail(err)
		return nil, fmt.Errorf("%w: %w", ErrNotChangelogOwner, err)
	}
	return c.moveOn(e), nil
}

// entry is a transaction's changes as the log's next entries.
type entry struct {
	after   uint64   // the log's entry they follow
	parts   [][]byte // nil: the transaction changed nothing
	changes []byte   // the whole changeset
}

// entry waits for the entry before this one to be in the log, if it was
// on its way still (a pipelined batch's), then takes the transaction's
// changes, with the ledger's new position among them, as the log's next
// entries.
func (r *recording) entry(ctx context.Context, tx execer) (entry, error) {
	c := r.c
	if err := c.landed(ctx); err != nil {
		return entry{}, err
	}
	if sqlite3.Xsqlite3session_isempty(r.tls, r.sess) != 0 {
		return entry{}, nil
	}
	c.mu.Lock()
	after := c.after
	c.mu.Unlock()
	max := c.log.MaxEntry()
	// The position row is part of the changes, so a standby's copy moves
	// with them; it names the log's last entry of this transaction, which
	// depends on how many entries the changes take: one, unless the
	// changes copied out say more.
	n := 1
	var changes []byte
	for {
		if _, err := tx.ExecContext(ctx, `UPDATE jetledger_changelog SET seq = ? WHERE id = 1`, int64(after)+int64(n)); err != nil {
			return entry{}, fmt.Errorf("ledger: changelog: record the position: %w", err)
		}
		var err error
		if changes, err = r.changeset(); err != nil {
			return entry{}, err
		}
		if need := (len(changes) + max - 1) / max; need > n {
			n = need
			continue
		}
		break
	}
	parts := make([][]byte, 0, n)
	for i := range n {
		parts = append(parts, changes[min(i*max, len(changes)):min((i+1)*max, len(changes))])
	}
	return entry{after: after, parts: parts, changes: changes}, nil
}

// moveOn moves the position past e, while this transaction holds the
// writer: its COMMIT hands the connection to the next transaction (an
// outbox worker's, a batch) before it returns here, and that one's entry
// must follow this one. The writer is the sequencer; a failed COMMIT keeps
// the store from writing anyway. The returned func takes the COMMIT's
// error.
func (c *changelogState) moveOn(e entry) func(error) {
	c.mu.Lock()
	c.after = e.after + uint64(len(e.parts))
	c.mu.Unlock()
	return func(commitErr error) {
		if commitErr != nil {
			c.fail(fmt.Errorf("a commit failed after its changes went to the changelog: %w", commitErr))
		}
	}
}

// fail keeps the store from writing until it takes over again.
func (c *changelogState) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stale == nil {
		c.stale = err
	}
	c.owner = false
}

// changeset copies the session's changes out.
func (r *recording) changeset() ([]byte, error) {
	pn := libc.Xmalloc(r.tls, 8)
	defer libc.Xfree(r.tls, pn)
	pp := libc.Xmalloc(r.tls, 8)
	defer libc.Xfree(r.tls, pp)
	if rc := sqlite3.Xsqlite3session_changeset(r.tls, r.sess, pn, pp); rc != sqlite3.SQLITE_OK {
		return nil, fmt.Errorf("ledger: changelog: read the changes: %s", sqlite3Error(r.tls, rc))
	}
	n, p := *(*int32)(cptr(pn)), *(*uintptr)(cptr(pp))
	defer sqlite3.Xsqlite3_free(r.tls, p)
	return append([]byte(nil), unsafe.Slice((*byte)(cptr(p)), int(n))...), nil
}

// write begins a write transaction on the writer, recorded when the store
// has a changelog. A stop (ctx cancelled) does not end a transaction once
// begun: its commit publishes to the changelog, and a publish cut short
// may land all the same while the commit does not, so the store, not
// knowing, would fence itself, and the sends in flight of a run that is
// stopping would lose their write-backs (their rows in review at the next
// owner). ctx's deadline still bounds it; a statement run with a cancelled
// ctx fails before the commit, which then publishes nothing.
func (s *Store) write(ctx context.Context) (*writeTx, error) {
	tx, wctx, cancel, err := s.beginBeyondStop(ctx)
	if err != nil {
		return nil, err
	}
	rec, err := s.record()
	if err != nil {
		tx.Rollback() //nolint:errcheck // nothing written
		cancel()
		return nil, err
	}
	return &writeTx{Tx: tx, rec: rec, ctx: wctx, cancel: cancel}, nil
}

// beginBeyondStop begins a transaction on the writer whose context is ctx
// without its cancel (beyondStop). The wait for the writer still ends at
// the stop: a stop before the transaction began refuses it, nothing
// written.
func (s *Store) beginBeyondStop(ctx context.Context) (*sql.Tx, context.Context, context.CancelFunc, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, nil, err
	}
	wctx, cancel := beyondStop(ctx)
	var tx *sql.Tx
	var err error
	late := unlessStopped(ctx, cancel, func() { tx, err = s.writer.BeginTx(wctx, nil) })
	if err == nil && late {
		tx.Rollback() //nolint:errcheck // nothing written
		err = ctx.Err()
	}
	if err != nil {
		cancel()
		return nil, nil, nil, stoppedMidWrite(ctx, err)
	}
	return tx, wctx, cancel, nil
}

// beyondStop is ctx without its cancel: ended by its deadline, or by the
// cancel returned.
func beyondStop(ctx context.Context) (context.Context, context.CancelFunc) {
	detached := context.WithoutCancel(ctx)
	if d, ok := ctx.Deadline(); ok {
		return context.WithDeadline(detached, d)
	}
	return context.WithCancel(detached)
}

// writeTx is a write transaction whose Commit publishes its changes first.
type writeTx struct {
	*sql.Tx
	rec    *recording
	ctx    context.Context
	cancel context.CancelFunc
}

// Commit publishes the changes to the changelog, if any, then commits; a
// failed publish rolls the transaction back.
func (w *writeTx) Commit() error {
	defer w.cancel()
	done, err := w.rec.publish(w.ctx, w.Tx)
	if err != nil {
		w.Tx.Rollback() //nolint:errcheck // the error is err
		return err
	}
	err = w.Tx.Commit()
	done(err)
	return err
}

// Rollback ends the session and rolls back.
func (w *writeTx) Rollback() error {
	defer w.cancel()
	w.rec.close()
	return w.Tx.Rollback()
}

// writeExec runs one statement in its own write transaction.
func (s *Store) writeExec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if s.changelog == nil && s.copyOf.Load() == nil {
		res, err := s.writer.ExecContext(ctx, query, args...)
		return res, stoppedMidWrite(ctx, err)
	}
	return s.writeTxExec(ctx, nil, query, args...)
}

// writeTxExec runs query in a write transaction, then, when set, then on
// the transaction and the query's result, and commits.
func (s *Store) writeTxExec(ctx context.Context, then func(*writeTx, sql.Result) error, query string, args ...any) (sql.Result, error) {
	tx, err := s.write(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	res, err := tx.ExecContext(ctx, query, args...)
	if err == nil && then != nil {
		err = then(tx, res)
	}
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		return nil, stoppedMidWrite(ctx, err)
	}
	return res, nil
}

// stoppedMidWrite is err of a write whose ctx ended meanwhile, said as
// that: database/sql rolls such a transaction back and answers "already
// committed or rolled back", which a caller would take for a fault of the
// ledger rather than the stop it was (a run stopped as it starts).
func stoppedMidWrite(ctx context.Context, err error) error {
	if cerr := ctx.Err(); err != nil && cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w: %w", cerr, err)
	}
	return err
}

// ChangelogPosition reads where the ledger stands in its changelog.
func (s *Store) ChangelogPosition(ctx context.Context) (ChangelogPosition, error) {
	var p ChangelogPosition
	var seq, oseq int64
	err := s.writer.QueryRowContext(ctx, PositionQuery).Scan(&p.Log, &seq, &p.Owner, &p.Origin.Log, &oseq)
	if err != nil {
		return p, fmt.Errorf("ledger: read the changelog position: %w", interpret(err))
	}
	p.Seq, p.Origin.Seq = uint64(seq), uint64(oseq)
	return p, nil
}

// SeenExpr is the highest stream sequence a ledger has seen, as an SQL
// expression: of a message it processed (or a later copy of one),
// dead-lettered, or recorded a conflict of; 0 for none. An id seen in two
// streams has last_seq pinned (pinnedSeq), no sequence: it is left out, or
// the copy would seem to have seen everything.
var SeenExpr = SeenExprOf(ledgerRowTables)

// ledgerRowTables are the tables of ledger rows since schema 18: the rows
// in arrival order, and those of the old layout until they age out.
var ledgerRowTables = []string{"processed_messages", "processed_messages_v1"}

// SeenExprOf is SeenExpr over the given tables of ledger rows.
func SeenExprOf(tables []string) string {
	parts := []string{"coalesce((SELECT max(stream_seq) FROM dead_letters), 0)", "coalesce((SELECT max(stream_seq) FROM conflicts), 0)"}
	for _, t := range tables {
		parts = append(parts, `coalesce((SELECT max(max(stream_seq), coalesce(max(nullif(last_seq, 9223372036854775807)), 0)) FROM `+t+`), 0)`)
	}
	return "max(" + strings.Join(parts, ", ") + ")"
}

// RowTablesIn lists the tables of ledger rows of the file db opens, which
// may be of an earlier schema: before 18 processed_messages alone, keyed
// by message_id.
func RowTablesIn(ctx context.Context, db *sql.DB) ([]string, error) {
	var n int
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'processed_messages_v1'`).Scan(&n)
	if err != nil || n == 0 {
		return ledgerRowTables[:1], err
	}
	return ledgerRowTables, nil
}

// RemovedQuery is the highest stream sequence of a dead letter the ledger
// removed (jetledger_removed; a file before it has none): seen too.
const RemovedQuery = `SELECT coalesce((SELECT seq FROM jetledger_removed WHERE id = 1), 0)`

// HoldsQuery says (1 or 0) whether a ledger of a schema before 18 holds
// the message of id :id at stream sequence :seq: applied (its id), or
// dead-lettered or refused as a conflict there. HoldsIn asks any file.
const HoldsQuery = `SELECT EXISTS (SELECT 1 FROM processed_messages WHERE message_id = :id AND :id <> '')
	OR EXISTS (SELECT 1 FROM dead_letters WHERE stream_seq = :seq) OR EXISTS (SELECT 1 FROM conflicts WHERE stream_seq = :seq)`

// HoldsIn says whether the ledger file db opens holds the message of id at
// stream sequence seq, as HoldsQuery does, of any schema: from 18 on the
// id is looked for in the rows of the old layout, then through the
// fingerprints of processed_messages.
func HoldsIn(ctx context.Context, db *sql.DB, id string, seq uint64) (bool, error) {
	tables, err := RowTablesIn(ctx, db)
	if err != nil {
		return false, err
	}
	query := HoldsQuery
	if len(tables) > 1 {
		query = strings.Replace(query, "FROM processed_messages WHERE", "FROM processed_messages_v1 WHERE", 1)
	}
	var held bool
	err = db.QueryRowContext(ctx, query, sql.Named("id", id), sql.Named("seq", int64(seq))).Scan(&held)
	if err != nil || held || id == "" || len(tables) == 1 {
		return held, err
	}
	return holdsID(func(query string, args ...any) (*sql.Rows, error) { return db.QueryContext(ctx, query, args...) }, id)
}

// Holds says whether the ledger holds the message of id at stream
// sequence seq (HoldsQuery).
func (s *Store) Holds(ctx context.Context, id string, seq uint64) (bool, error) {
	held, err := HoldsIn(ctx, s.writer, id, seq)
	if err != nil {
		return false, fmt.Errorf("ledger: does it hold %s (stream sequence %d): %w", id, seq, interpret(err))
	}
	return held, nil
}

// Seen is the highest stream sequence the ledger has seen (SeenExpr).
func (s *Store) Seen(ctx context.Context) (uint64, error) {
	var n sql.NullInt64
	var removed int64
	if err := s.writer.QueryRowContext(ctx, `SELECT `+SeenExpr+`, (`+RemovedQuery+`)`).Scan(&n, &removed); err != nil {
		return 0, fmt.Errorf("ledger: read the highest stream sequence seen: %w", interpret(err))
	}
	return uint64(max(n.Int64, removed, 0)), nil
}

// TakeOver makes the store its partition's writer in changelog log (an
// instance's name), as owner: one entry saying so is published after the
// log's last, and from then on an entry of any other writer that still
// believes itself the owner is refused by the log (Changelog.Append), and
// so is its commit. The store must have applied the log's entries through
// applied (ApplyChanges); those after it, through last, must be parts of
// an entry its writer never finished, which no ledger holds. A store
// whose position is another log's takes over only a log with nothing in
// it: the log starts from this file, which a snapshot must then carry to
// standbys. Needs Config.Changelog.
func (s *Store) TakeOver(ctx context.Context, log, owner string, applied, last uint64) error {
	return s.takeOver(ctx, log, owner, applied, last, false)
}

// TakeOverAsSoleWriter is TakeOver by the process that owned the file's
// earlier log and held the partition since without a break (its lease's
// revision proves it): no other host's copy of that log can be ahead of
// this file, so a new log begun from it leaves its queued rows as they
// are (queuedMaybeSent).
func (s *Store) TakeOverAsSoleWriter(ctx context.Context, log, owner string, applied, last uint64) error {
	return s.takeOver(ctx, log, owner, applied, last, true)
}

func (s *Store) takeOver(ctx context.Context, log, owner string, applied, last uint64, sole bool) error {
	s.ids.reset() // rows applied as a copy: see ApplyEntries
	c := s.changelog
	if c == nil {
		return fmt.Errorf("%w: the store was opened without a changelog", ErrInvalidConfig)
	}
	if err := s.unloggedSettled(ctx); err != nil {
		return err
	}
	pos, err := s.ChangelogPosition(ctx)
	if err != nil {
		return err
	}
	switch {
	case applied > last:
		return fmt.Errorf("%w: applied %d is past the log's last, %d", ErrInvalidConfig, applied, last)
	case pos.Log == log && pos.Seq > last:
		return fmt.Errorf("%w: the ledger holds entry %d of changelog %s, beyond its last, %d: the changelog lost entries", ErrChangelogBehind, pos.Seq, log, last)
	case pos.Log == log && pos.Seq < applied:
		return fmt.Errorf("%w: the ledger stands at entry %d of %s; apply the changelog through %d first", ErrChangelogAhead, pos.Seq, log, applied)
	case pos.Log == log && pos.Seq != applied:
		return fmt.Errorf("%w: the ledger stands at entry %d of %s, not %d", ErrChangesDoNotFit, pos.Seq, log, applied)
	case pos.Log != log && last != 0:
		return fmt.Errorf("%w: the ledger is a copy of changelog %q, not of %s, which has entries: restore its snapshot", ErrChangesDoNotFit, pos.Log, log)
	}
	after := last
	c.mu.Lock()
	c.after, c.owner, c.stale, c.flight = after, true, nil, nil
	c.mu.Unlock()
	tx, err := s.write(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	if _, err := tx.ExecContext(ctx, `UPDATE jetledger_changelog SET log = ?, owner = ? WHERE id = 1`, log, owner+" "+s.cfg.Now().UTC().Format("2006-01-02T15:04:05.000Z")); err != nil {
		c.fail(err)
		return fmt.Errorf("ledger: take over: %w", interpret(err))
	}
	if pos.Log != log && pos.Log != "" {
		// The log begins from this file: where the file stood is what a
		// copy of the earlier instance is measured against. A file of no
		// log keeps its origin: the log it left (LeaveChangelog), if any.
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO jetledger_changelog_origin (id, log, seq) VALUES (1, ?, ?)`, pos.Log, int64(pos.Seq)); err != nil {
			c.fail(err)
			return fmt.Errorf("ledger: take over: %w", interpret(err))
		}
		if err := s.queuedMaybeSent(ctx, tx, pos, owner, sole); err != nil {
			c.fail(err)
			return fmt.Errorf("ledger: take over: %w", interpret(err))
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("ledger: take over changelog %s after %d: %w", log, after, err)
	}
	return nil
}

// queuedMaybeSent marks the queued rows of a file that begins a new log
// from its copy of an earlier one as maybe sent: another host's copy of
// that log may have been ahead of this one, and sent them, in entries
// that are gone with it. An idempotent sink sends them again with their
// key; any other sends them nowhere: they go to review (or a lookup).
func (s *Store) queuedMaybeSent(ctx context.Context, tx *writeTx, from ChangelogPosition, owner string, sole bool) error {
	if name, _, _ := cutLast(from.Owner, " "); sole && name == owner {
		return nil // the file's last take-over was this owner's too ("name time")
	}
	reason := fmt.Sprintf("maybe sent: the partition's log began again from this copy of %s at entry %d, and another host's copy of it may have been ahead and sent this row", from.Log, from.Seq)
	_, err := tx.ExecContext(ctx, `UPDATE outbox SET maybe_sent = 1, updated_at = ?,
		error = ? || coalesce(' (before: ' || error || ')', '')
		WHERE status = 'queued' AND maybe_sent = 0`, s.cfg.Now().UnixMilli(), reason)
	return err
}

// ApplyChanges applies, in one transaction, a changelog entry's changes
// that end at the log's entry last; the changes carry the ledger's new
// position, which must then be last. For a standby: a store that has taken
// its changelog over writes it itself. Any change that does not fit the
// ledger's rows (a row to insert already there, one to change or delete
// different or gone) fails the whole entry with ErrChangesDoNotFit:
// the ledger is not the copy the log was written from.
func (s *Store) ApplyChanges(ctx context.Context, log string, last uint64, changes []byte) error {
	return s.ApplyEntries(ctx, log, []ChangelogEntry{{Last: last, Changes: changes}})
}

// ChangelogEntry is one entry of a changelog: its changes, which end at
// the log's entry Last.
type ChangelogEntry struct {
	Last    uint64
	Changes []byte
}

// ApplyEntries applies consecutive entries of changelog log in one
// transaction, each as ApplyChanges does, checked entry by entry: a
// standby catching up on a backlog pays one commit for many entries.
func (s *Store) ApplyEntries(ctx context.Context, log string, entries []ChangelogEntry) error {
	if c := s.changelog; c != nil {
		c.mu.Lock()
		owner := c.owner
		c.mu.Unlock()
		if owner {
			return fmt.Errorf("%w: the store owns its changelog and writes it itself", ErrInvalidConfig)
		}
	}
	if len(entries) == 0 {
		return nil
	}
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("ledger: apply changes: %w", interpret(err))
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	for _, e := range entries {
		if err := s.applyChangeset(ctx, tx, e.Changes); err != nil {
			return err
		}
		var have string
		var seq int64
		if err := tx.QueryRowContext(ctx, `SELECT log, seq FROM jetledger_changelog WHERE id = 1`).Scan(&have, &seq); err != nil {
			return fmt.Errorf("ledger: apply changes: %w", interpret(err))
		}
		if have != log || uint64(seq) != e.Last {
			return fmt.Errorf("%w: after the entry ending at %d of %s the ledger says %s/%d", ErrChangesDoNotFit, e.Last, log, have, seq)
		}
	}
	last := entries[len(entries)-1].Last
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("ledger: apply changes through %d: %w", last, interpret(err))
	}
	if s.changelog == nil {
		s.copyOf.Store(&log) // a copy now, whatever it was at open
	}
	// The entries' rows kept the owner's seqs, which this process may have
	// used and seen gone (a standby's reads): its index starts again.
	s.ids.reset()
	s.restartLongWAL() // a standby catching up writes back to back as a backlog's batches do
	return nil
}

// keptBy notes, at open without a changelog, the changelog the file is
// kept by (its writes are then refused), or with leave clears it.
func (s *Store) keptBy(ctx context.Context, leave bool) error {
	var log string
	var seq int64
	if err := s.writer.QueryRowContext(ctx, `SELECT log, seq FROM jetledger_changelog WHERE id = 1`).Scan(&log, &seq); err != nil {
		return fmt.Errorf("ledger: read the changelog position: %w", interpret(err))
	}
	switch {
	case log == "":
	case leave:
		// Where it left is its origin: a file that changed outside its log
		// is never replaced by that log's snapshot when it joins again
		// (changelog's lifecycle); it may begin a new log.
		if err := leaveLog(ctx, s.writer, log, seq); err != nil {
			return fmt.Errorf("ledger: leave changelog %s: %w", log, interpret(err))
		}
		s.log.WarnContext(ctx, "the ledger leaves its changelog: it is this host's alone from now on, and the partition's standbys no longer follow it", "changelog", log, "db", s.path)
	default:
		s.copyOf.Store(&log)
	}
	return nil
}

// leaveLog takes the ledger out of log, where it stands at entry seq, in
// one transaction: of no log, its origin where it left.
func leaveLog(ctx context.Context, db *sql.DB, log string, seq int64) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	if _, err := tx.ExecContext(ctx, `UPDATE jetledger_changelog SET log = '', seq = 0, owner = '' WHERE id = 1`); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO jetledger_changelog_origin (id, log, seq) VALUES (1, ?, ?)`, log, seq); err != nil {
		return err
	}
	return tx.Commit()
}

// applyChangeset applies changes on the writer's connection, which the
// caller's transaction holds.
// dbFlag sets one of the connection's on/off settings (sqlite3_db_config
// op) to on, and returns what it was.
func dbFlag(tls *libc.TLS, db uintptr, op, on int32) (was int32, err error) {
	va := libc.Xmalloc(tls, 16)
	defer libc.Xfree(tls, va)
	res := libc.Xmalloc(tls, 8)
	defer libc.Xfree(tls, res)
	for _, v := range []int32{-1, on} { // -1 reads it
		if rc := sqlite3.Xsqlite3_db_config(tls, db, op, libc.VaList(va, v, res)); rc != sqlite3.SQLITE_OK {
			return 0, fmt.Errorf("ledger: changelog: configure the connection (%d): %s", op, sqlite3Error(tls, rc))
		}
		if v == -1 {
			was = *(*int32)(cptr(res))
		}
	}
	return was, nil
}

func (s *Store) applyChangeset(ctx context.Context, tx *sql.Tx, changes []byte) error {
	changes, err := toLegacyRows(changes)
	if err != nil {
		return err
	}
	db := s.guard.wd.db.Load()
	if db == 0 {
		return errors.New("ledger: changelog: the SQLite driver's connection handle is unknown")
	}
	tls := libc.NewTLS()
	defer tls.Close()
	p := libc.Xmalloc(tls, libc.Tsize_t(max(len(changes), 1)))
	defer libc.Xfree(tls, p)
	copy(unsafe.Slice((*byte)(cptr(p)), len(changes)), changes)
	// SQLite skips, without a word, the changes of a table the file lacks
	// or has of another shape (a column or a key more or less): a standby
	// without the owner's schema would lose them all.
	if err := fitTables(ctx, tx, tls, p, int32(len(changes))); err != nil {
		return err
	}
	// The changes already hold what the owner's triggers and foreign-key
	// actions did; run again here they would write twice, or delete the
	// rows the changes then look for. Both are off while they apply.
	for _, op := range []int32{sqlite3.SQLITE_DBCONFIG_ENABLE_TRIGGER, sqlite3.SQLITE_DBCONFIG_ENABLE_FKEY} {
		was, err := dbFlag(tls, db, op, 0)
		if err != nil {
			return err
		}
		defer dbFlag(tls, db, op, was) //nolint:errcheck // set just now: it does not fail
	}
	said := libc.Xmalloc(tls, 8) // a key for the conflict's words (conflicts)
	defer libc.Xfree(tls, said)
	defer conflicts.Delete(said)
	rc := sqlite3.Xsqlite3changeset_apply(tls, db, int32(len(changes)), p, 0, conflictAbortFP, said)
	switch {
	case rc == sqlite3.SQLITE_ABORT:
		what, _ := conflicts.Load(said)
		return fmt.Errorf("%w: a change does not match the ledger's rows (%v)", ErrChangesDoNotFit, cmp.Or(what, any("not said")))
	case rc != sqlite3.SQLITE_OK:
		return fmt.Errorf("ledger: apply changes: %s", sqlite3Error(tls, rc))
	}
	return nil
}

// fitTables checks that every table the changes (n bytes at p) are to is
// in the ledger with the columns and primary key the changes have: a
// table recorded by rowid (no primary key of its own) has the rowid as a
// first key column more.
func fitTables(ctx context.Context, tx *sql.Tx, tls *libc.TLS, p uintptr, n int32) error {
	mem := libc.Xmalloc(tls, 5*8)
	defer libc.Xfree(tls, mem)
	pIter, pTab, pCol, pOp, pInd := mem, mem+8, mem+16, mem+24, mem+32
	if rc := sqlite3.Xsqlite3changeset_start(tls, pIter, n, p); rc != sqlite3.SQLITE_OK {
		return fmt.Errorf("%w: the changes cannot be read: %s", ErrChangesDoNotFit, sqlite3Error(tls, rc))
	}
	iter := *(*uintptr)(cptr(pIter))
	defer sqlite3.Xsqlite3changeset_finalize(tls, iter)
	seen := map[string]bool{}
	for sqlite3.Xsqlite3changeset_next(tls, iter) == sqlite3.SQLITE_ROW {
		if rc := sqlite3.Xsqlite3changeset_op(tls, iter, pTab, pCol, pOp, pInd); rc != sqlite3.SQLITE_OK {
			return fmt.Errorf("%w: the changes cannot be read: %s", ErrChangesDoNotFit, sqlite3Error(tls, rc))
		}
		table := libc.GoString(*(*uintptr)(cptr(pTab)))
		if seen[table] {
			continue
		}
		seen[table] = true
		if rc := sqlite3.Xsqlite3changeset_pk(tls, iter, pTab, pCol); rc != sqlite3.SQLITE_OK {
			return fmt.Errorf("%w: the changes cannot be read: %s", ErrChangesDoNotFit, sqlite3Error(tls, rc))
		}
		cols := int(*(*int32)(cptr(pCol)))
		want := make([]byte, cols)
		for i, b := range unsafe.Slice((*byte)(cptr(*(*uintptr)(cptr(pTab)))), cols) {
			want[i] = '0' + min(b, 1)
		}
		var have string
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(group_concat(min(pk, 1), ''), '') FROM (SELECT pk FROM pragma_table_info(?) ORDER BY cid)`, table).Scan(&have); err != nil {
			return fmt.Errorf("ledger: apply changes: %w", interpret(err))
		}
		if have != "" && !strings.Contains(have, "1") {
			have = "1" + have // by rowid
		}
		switch {
		case have == "":
			return fmt.Errorf("%w: the changes are to table %s, which this ledger does not have: give the standby the owner's schema", ErrChangesDoNotFit, table)
		case have != string(want):
			return fmt.Errorf("%w: the changes are to table %s with %d columns (key %s), this ledger's has %d (key %s): give the standby the owner's schema", ErrChangesDoNotFit, table, len(want), want, len(have), have)
		}
	}
	return nil
}

// conflictAbort answers every conflict of an applied changeset with
// ABORT: a standby's copy either fits the log exactly or is not a copy.
func conflictAbort(tls *libc.TLS, said uintptr, kind int32, iter uintptr) int32 {
	if said != 0 {
		conflicts.Store(said, conflictWords(tls, kind, iter))
	}
	return sqlite3.SQLITE_CHANGESET_ABORT
}

// conflicts holds what conflictAbort saw, by the key applyChangeset gave
// it, for its error: which table, which change, which key, what kind.
var conflicts sync.Map

// conflictWords says a conflict of kind (SQLITE_CHANGESET_*) at iter.
func conflictWords(tls *libc.TLS, kind int32, iter uintptr) string {
	mem := libc.Xmalloc(tls, 4*8)
	defer libc.Xfree(tls, mem)
	pTab, pCol, pOp, pInd := mem, mem+8, mem+16, mem+24
	if sqlite3.Xsqlite3changeset_op(tls, iter, pTab, pCol, pOp, pInd) != sqlite3.SQLITE_OK {
		return fmt.Sprintf("conflict %d", kind)
	}
	table := libc.GoString(*(*uintptr)(cptr(pTab)))
	op := *(*int32)(cptr(pOp))
	value := sqlite3.Xsqlite3changeset_old
	if op == sqlite3.SQLITE_INSERT {
		value = sqlite3.Xsqlite3changeset_new
	}
	key := "?"
	if value(tls, iter, 0, pCol) == sqlite3.SQLITE_OK {
		if v := *(*uintptr)(cptr(pCol)); v != 0 {
			key = libc.GoString(sqlite3.Xsqlite3_value_text(tls, v))
		}
	}
	kinds := map[int32]string{sqlite3.SQLITE_CHANGESET_DATA: "its row differs", sqlite3.SQLITE_CHANGESET_NOTFOUND: "its row is not there",
		sqlite3.SQLITE_CHANGESET_CONFLICT: "its row is there already", sqlite3.SQLITE_CHANGESET_CONSTRAINT: "a constraint refuses it"}
	ops := map[int32]string{sqlite3.SQLITE_INSERT: "insert", sqlite3.SQLITE_UPDATE: "update", sqlite3.SQLITE_DELETE: "delete"}
	return fmt.Sprintf("%s of %s %q: %s", ops[op], table, key, cmp.Or(kinds[kind], fmt.Sprint("conflict ", kind)))
}

// conflictAbortFP is conflictAbort as the C function pointer the
// transpiled SQLite calls (as the driver makes its own: a pointer to the
// func value, which a top-level func keeps in read-only data).
var conflictAbortFP = *(*uintptr)(unsafe.Pointer(&struct {
	f func(*libc.TLS, uintptr, int32, uintptr) int32
}{conflictAbort}))

// cText is s in C memory, NUL-terminated; free it with libc.Xfree.
func cText(tls *libc.TLS, s string) uintptr {
	p := libc.Xmalloc(tls, libc.Tsize_t(len(s)+1))
	b := unsafe.Slice((*byte)(cptr(p)), len(s)+1)
	copy(b, s)
	b[len(s)] = 0
	return p
}

// cptr is C memory's address as a pointer (the engine's memory is not
// Go's: the collector neither moves nor frees it).
func cptr(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

func sqlite3Error(tls *libc.TLS, rc int32) string {
	return fmt.Sprintf("%s (%d)", libc.GoString(sqlite3.Xsqlite3_errstr(tls, rc)), rc)
}

// cutLast is strings.Cut at the last sep.
func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}
