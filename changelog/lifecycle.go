package changelog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/ledger"
)

// A host's ledger file, before it follows or owns its partition, takes
// one step, decided by the first rule of lifecycle that matches what the
// file, the stored snapshot and the log hold. Restoring sets a file aside
// unless the snapshot holds all of it (Restore), so no rule destroys a
// copy; a ledger begins a log only when it holds at least the snapshot
// and every message the durable acknowledged; anything else waits, saying
// why, rather than guess.
type step int

const (
	stepFollow  step = iota // apply the log's entries after the file's position
	stepRestore             // replace the file with the partition's snapshot
	stepBegin               // the file may begin the log (when its host holds the lease)
	stepWait                // none of these is safe: wait, and say why
)

// begunFromNoneOn turns the rule "no ledger yet, a log begun from none"
// on (gap C); off while a CI failure is explained (issue 46's note).
const begunFromNoneOn = false

// situation is what a step is decided on.
type situation struct {
	file        fileState
	snap        snapshotInfo
	log         string        // this log's instance
	first, last uint64        // the log's first entry held (0: none) and its last
	acked       uint64        // a message the durable acknowledged that the file has not seen (stream sequence); 0: none or unknown
	owner       OwnerPosition // where the partition's owner said its ledger stood last (zero: never said)
	begunEmpty  bool          // the log's first entry says it began from a ledger with nothing in it (HeaderBegun)
}

// behindOwner: the file is a copy of the log its owner said it stood
// further in.
func (s situation) behindOwner() bool {
	return s.owner.Ahead(s.file.pos)
}

// rule is one row of the lifecycle: when it matches, its step is taken;
// a wait's why says what it waits for.
type rule struct {
	name  string
	match func(s situation) bool
	step  step
	why   func(s situation) string
}

func (s situation) ours() bool          { return s.file.pos.Log == s.log }
func (s situation) noLog() bool         { return s.file.pos.Log == "" }
func (s situation) holds(n uint64) bool { return n == s.last || (s.first != 0 && s.first <= n+1) }
func (s situation) snapOurs() bool      { return s.snap.found && s.snap.Log == s.log }

// left: a file taken out of its log (LeaveChangelog), which may have
// changed outside it since; its origin is where it left.
func (s situation) left() bool { return s.noLog() && s.file.pos.Origin.Log != "" }

// leftFrom is where a file that left its log stood in it.
func (s situation) leftFrom() ledger.ChangelogPosition {
	return ledger.ChangelogPosition{Log: s.file.pos.Origin.Log, Seq: s.file.pos.Origin.Seq}
}

// streamOf is the stream of a log's instance (name@created).
func streamOf(instance string) string {
	name, _, _ := strings.Cut(instance, "@")
	return name
}

var lifecycle = []rule{
	{"a copy ahead of its log", func(s situation) bool { return s.ours() && s.file.pos.Seq > s.last }, stepWait,
		func(s situation) string {
			return fmt.Sprintf("the file holds entry %d of the log, which ends at %d: the log lost entries this file alone holds; keep this file, and have a person compare it with the owner's", s.file.pos.Seq, s.last)
		}},
	{"a copy its log brings up to date", func(s situation) bool { return s.ours() && s.holds(s.file.pos.Seq) }, stepFollow, nil},
	{"a copy behind its log's first entry, the snapshot fuller", func(s situation) bool {
		return s.ours() && s.snapOurs() && s.snap.Seq >= s.file.pos.Seq && s.holds(s.snap.Seq)
	}, stepRestore, nil},
	{"a copy behind entries nobody holds", func(s situation) bool { return s.ours() }, stepWait,
		func(s situation) string {
			return fmt.Sprintf("the file holds entry %d, the log holds entries from %d and the snapshot through %d: the entries between were purged or trimmed; the owner's next snapshot ends this wait", s.file.pos.Seq, s.first, s.snap.Seq)
		}},
	{"no ledger yet, a snapshot", func(s situation) bool { return s.file.fresh() && s.snap.found }, stepRestore, nil},
	// Its first owner lost before its first snapshot: the log holds all
	// it did, from a ledger with nothing in it (HeaderBegun). Off until
	// CI's TestAMigratedPartitionWaitsForItsFirstSnapshot is explained: a
	// migrated ledger's standby followed its log instead of waiting.
	{"no ledger yet, a log begun from none", func(s situation) bool { return begunFromNoneOn && s.file.fresh() && s.begunEmpty && s.first == 1 }, stepFollow, nil},
	{"no ledger yet, no snapshot, nothing acknowledged, an empty log", func(s situation) bool {
		return s.file.fresh() && s.last == 0 && s.acked == 0
	}, stepBegin, nil},
	{"no ledger yet, no snapshot", func(s situation) bool { return s.file.fresh() }, stepWait,
		func(s situation) string {
			return fmt.Sprintf("the partition has no snapshot, its log %d entries and its durable acknowledged through stream sequence %d: its ledger is on another host; start the run there (it stores the snapshot before it consumes)", s.last, s.acked)
		}},
	// A file that left its log is never replaced by a snapshot: what it
	// applied outside the log is in no entry and no snapshot.
	{"a file that left a log, an empty log, the snapshot no fuller", func(s situation) bool {
		return s.left() && s.last == 0 && (!s.snap.found || holdsAtLeast(s.leftFrom(), s.snap.ChangelogPosition))
	}, stepBegin, nil},
	{"a file that left this log at its last entry", func(s situation) bool {
		return s.left() && s.file.pos.Origin.Log == s.log && s.file.pos.Origin.Seq == s.last
	}, stepWait, func(s situation) string {
		return fmt.Sprintf("the file left the log at its last entry, %d, and may have changed outside it since (--leave-changelog): such changes are in no entry, and the log's copies cannot follow them. To take this file back into the log, delete the changelog stream %s: this file then begins a new log, and the standbys restore its snapshot (their copies set aside, not deleted)", s.last, streamOf(s.log))
	}},
	{"a file that left a log the partition went on without", func(s situation) bool { return s.left() }, stepWait,
		func(s situation) string {
			return fmt.Sprintf("the file left %s at entry %d and may have changed outside it since (--leave-changelog); the partition's log went on without it (%s, at entry %d): two histories. Keep this file, and have a person settle the partition against the owner's ledger", s.file.pos.Origin.Log, s.file.pos.Origin.Seq, s.log, s.last)
		}},
	{"a file of no log, the partition's snapshot", func(s situation) bool { return s.noLog() && s.snap.found }, stepRestore, nil},
	{"a file of no log joins its empty log", func(s situation) bool { return s.noLog() && s.last == 0 }, stepBegin, nil},
	{"a file of no log, a log with entries and no snapshot", func(s situation) bool { return s.noLog() }, stepWait,
		func(s situation) string {
			return "the log has entries and no snapshot yet: its owner stores one before it consumes; start the owner again if it is gone"
		}},
	{"a copy of an earlier log, the new one begun from as much", func(s situation) bool {
		return s.snapOurs() && s.snap.Origin.Log == s.file.pos.Log && s.snap.Origin.Seq >= s.file.pos.Seq
	}, stepRestore, nil},
	{"a copy of an earlier log, the new one begun from less", func(s situation) bool {
		return s.snapOurs() && s.snap.Origin.Log == s.file.pos.Log
	}, stepWait, func(s situation) string {
		return fmt.Sprintf("the file holds entry %d of %s, but the partition's log began again from entry %d of it: entries this file alone holds are in no log; keep this file, and have a person settle the partition", s.file.pos.Seq, s.file.pos.Log, s.snap.Origin.Seq)
	}},
	{"a copy of a log older still", func(s situation) bool { return s.snapOurs() }, stepRestore, nil},
	{"a copy of an earlier log behind its snapshot", func(s situation) bool {
		return s.snap.found && s.snap.Log == s.file.pos.Log && s.snap.Seq > s.file.pos.Seq && s.last == 0
	}, stepRestore, nil},
	{"a copy of an earlier log behind its last owner's, an empty log", func(s situation) bool {
		return (!s.snap.found || s.snap.Log == s.file.pos.Log) && s.last == 0 && s.behindOwner()
	}, stepWait, func(s situation) string {
		return fmt.Sprintf("the file holds entry %d of %s, whose owner %s said at %s that its ledger held entry %d, and that log is gone (deleted, or lost with its server): what the entries between did (sends, a person's actions) is in that host's file alone. Start that host: its copy begins the new log, and this one restores its snapshot. Only if that file is lost for good, delete key %s of bucket %s (nats kv del %s %s): this copy then begins the new log, its queued rows taken as maybe sent, and what those entries did is lost",
			s.file.pos.Seq, s.file.pos.Log, s.owner.Owner, s.owner.At.Format(time.RFC3339), s.owner.Seq, streamOf(s.log), OwnersBucket, OwnersBucket, streamOf(s.log))
	}},
	{"a copy of an earlier log, at least its snapshot, an empty log", func(s situation) bool {
		return (!s.snap.found || s.snap.Log == s.file.pos.Log) && s.last == 0
	}, stepBegin, nil},
	{"a copy of an earlier log, the new log not snapshotted yet", func(s situation) bool { return true }, stepWait,
		func(s situation) string {
			return fmt.Sprintf("the file is a copy of %s; the partition's log %s has %d entries and no snapshot of its own yet: its owner stores one before it consumes", s.file.pos.Log, s.log, s.last)
		}},
}

// decide is the first rule of lifecycle that matches s. A ledger that
// would begin the log must hold every message the durable acknowledged:
// a copy that lacks some, while a fuller one may be on another host,
// waits for that one.
func decide(s situation) (rule, error) {
	for _, r := range lifecycle {
		if !r.match(s) {
			continue
		}
		// A copy at its log's last entry that lacks an acknowledged
		// message: a run out of the log applied it (--leave-changelog).
		atLast := r.step == stepFollow && s.ours() && s.file.pos.Seq == s.last
		if (r.step == stepBegin || atLast) && s.acked != 0 {
			return rule{name: r.name + ", lacking acknowledged messages", step: stepWait}, fmt.Errorf("%w: this file holds messages through stream sequence %d and lacks one the durable acknowledged (the first it lacks is at %d): a fuller copy of the partition is on another host; start the run there, or, if none is left, a person restores what was lost", ErrWaiting, s.file.seen, s.acked)
		}
		if r.step == stepWait {
			return r, fmt.Errorf("%w (%s): %s", ErrWaiting, r.name, r.why(s))
		}
		return r, nil
	}
	panic("changelog: the lifecycle's last rule matches everything")
}

// fileState is what a ledger file holds, read before it is opened.
type fileState struct {
	exists bool
	pos    ledger.ChangelogPosition
	rows   int64  // processed messages, outbox rows and dead letters
	seen   uint64 // the highest stream sequence it has seen
}

// fresh: no file, or one of no log with nothing in it.
func (f fileState) fresh() bool { return !f.exists || f.empty() }

func (f fileState) empty() bool { return f.pos.Log == "" && f.pos.Seq == 0 && f.rows == 0 }

// readFile reads file's state without opening it as a store (it is not
// open; a store would migrate it). A file of an earlier schema reads as
// far as it goes.
func readFile(ctx context.Context, file string) (fileState, error) {
	return readFileThen(ctx, file, nil)
}

// readFileThen is readFile, then, on the same read-only connection, then
// (if set): with nil, a file not there.
func readFileThen(ctx context.Context, file string, then func(*sql.DB, fileState) error) (fileState, error) {
	if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) {
		if then != nil {
			return fileState{}, then(nil, fileState{})
		}
		return fileState{}, nil
	}
	db, err := openToRead(ctx, file)
	if err != nil {
		return fileState{}, err
	}
	defer db.Close()
	f, err := readState(ctx, db)
	if err != nil {
		return f, fmt.Errorf("changelog: read %s: %w", file, ledger.Interpret(err))
	}
	if then != nil {
		return f, then(db, f)
	}
	return f, nil
}

// openReadOnly opens the ledger file at file to read it, not as a store.
func openReadOnly(file string) (*sql.DB, error) {
	return sql.Open("sqlite", "file:"+file+"?mode=ro&_pragma=busy_timeout(5000)")
}

// openToRead opens the ledger file at file, not open as a store, to read
// it (openReadOnly), once a hot journal is rolled back (rollBack).
func openToRead(ctx context.Context, file string) (*sql.DB, error) {
	db, err := openReadOnly(file)
	if err != nil {
		return nil, err
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&n); !hotJournal(err) {
		return db, nil // any other error is the reads' to say
	}
	db.Close()
	return rollBack(ctx, file)
}

// hotJournal: a read-only connection met a rollback journal it may not
// roll back (SQLITE_READONLY_ROLLBACK): a process lost mid-transaction on
// a file not in WAL mode yet, as a ledger is while it is made.
func hotJournal(err error) bool {
	var e interface{ Code() int }
	return errors.As(err, &e) && e.Code() == 776
}

// rollBack has SQLite roll the hot journal of file back, as any
// read-write open's first read does, and opens it again to read: what the
// lost transaction wrote is undone, the file as it was before. The file
// is not open as a store here; without this every read-only look failed
// and the host never ran the partition again. The file and its journal
// are copied aside first (file.rolled-back-TIME): a journal that is not
// the file's own (a file copied in over a cut one) would truncate it.
func rollBack(ctx context.Context, file string) (*sql.DB, error) {
	aside := file + ".rolled-back-" + time.Now().UTC().Format("20060102T150405.000")
	for _, suffix := range []string{"", "-journal"} {
		if err := copyPath(file+suffix, aside+suffix); err != nil {
			return nil, fmt.Errorf("changelog: keep %s before its journal is rolled back: %w", file, err)
		}
	}
	rw, err := sql.Open("sqlite", "file:"+file+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return nil, err
	}
	var n int
	err = rw.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&n)
	if cerr := rw.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("roll back the journal a lost transaction left: %w", err)
	}
	return openReadOnly(file)
}

// copyPath copies the file at from to to, synced.
func copyPath(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	if err := dst.Sync(); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

// readState reads a ledger file's state from db.
func readState(ctx context.Context, db *sql.DB) (fileState, error) {
	f := fileState{exists: true}
	var seq, oseq int64
	err := db.QueryRowContext(ctx, ledger.PositionQuery).Scan(&f.pos.Log, &seq, &f.pos.Owner, &f.pos.Origin.Log, &oseq)
	if err != nil && !missingTable(err) {
		return f, err
	}
	if err != nil { // before 0012: no origin
		err = db.QueryRowContext(ctx, `SELECT log, seq, owner FROM jetledger_changelog WHERE id = 1`).Scan(&f.pos.Log, &seq, &f.pos.Owner)
	}
	if err != nil && !missingTable(err) {
		return f, err
	}
	f.pos.Seq, f.pos.Origin.Seq = uint64(seq), uint64(oseq)
	var seen sql.NullInt64
	tables, err := ledger.RowTablesIn(ctx, db)
	if err != nil {
		return f, err
	}
	rows := "(SELECT count(*) FROM outbox) + (SELECT count(*) FROM dead_letters)"
	for _, t := range tables {
		rows += " + (SELECT count(*) FROM " + t + ")"
	}
	err = db.QueryRowContext(ctx, `SELECT `+rows+`, `+ledger.SeenExprOf(tables)).Scan(&f.rows, &seen)
	if err != nil && !missingTable(err) {
		return f, err
	}
	var removed int64
	if err := db.QueryRowContext(ctx, ledger.RemovedQuery).Scan(&removed); err != nil && !missingTable(err) {
		return f, err
	}
	f.seen = uint64(max(seen.Int64, removed, 0))
	return f, nil
}

// ackedOf is Config.Acked of the ledger file read from db (nil: a file
// not there, which holds nothing), its state f.
func (l *Log) ackedOf(ctx context.Context, db *sql.DB, f fileState) (uint64, error) {
	holds := func(context.Context, string, uint64) (bool, error) { return false, nil }
	if db != nil {
		holds = func(ctx context.Context, id string, seq uint64) (bool, error) {
			held, err := ledger.HoldsIn(ctx, db, id, seq)
			if missingTable(err) {
				return false, nil // a file of an earlier schema, or an empty one
			}
			return held, err
		}
	}
	return l.cfg.Acked(ctx, f.seen, holds)
}

// missingTable: a file made before the table was.
func missingTable(err error) bool {
	var e interface{ Code() int }
	return errors.As(err, &e) && e.Code() == 1 // SQLITE_ERROR: no such table/column
}

// situation reads what the step at file is decided on.
func (l *Log) situation(ctx context.Context, file string) (situation, error) {
	s := situation{log: l.instance}
	// The acknowledgements before the log: an owner publishes an entry
	// before it commits and acknowledges, so every message acknowledged
	// by then is in an entry the log's last, read after, covers.
	var acked func(*sql.DB, fileState) error
	if l.cfg.Acked != nil {
		acked = func(db *sql.DB, f fileState) (err error) {
			s.acked, err = l.ackedOf(ctx, db, f)
			return err
		}
	}
	var err error
	if s.file, err = readFileThen(ctx, file, acked); err != nil {
		return s, err
	}
	if s.snap, err = l.stored(ctx); err != nil {
		return s, err
	}
	info, err := l.info(ctx)
	if err != nil {
		return s, err
	}
	s.last, s.first = info.State.LastSeq, firstHeld(info.State)
	// Read only where it decides: the rule on, a new copy, no snapshot,
	// the first entry held.
	if begunFromNoneOn && s.file.fresh() && !s.snap.found && s.first == 1 {
		if s.begunEmpty, err = l.begunEmpty(ctx); err != nil {
			return s, err
		}
	}
	// What the owner said matters only to a copy of a log that is gone:
	// read then alone, so that a bad key stops nothing else.
	if s.last == 0 && s.file.pos.Log != "" && s.file.pos.Log != s.log {
		if s.owner, err = l.lastOwner(ctx); err != nil {
			return s, err
		}
	}
	return s, nil
}

// Prepare brings the ledger file, not open, to where it can follow or
// own the log: it restores the partition's snapshot when the lifecycle
// says so (the file set aside unless the snapshot holds it whole), and
// says whether the file may begin the log. An error wrapping ErrWaiting
// says why nothing safe can be done now; the server's errors are
// returned as they are, to be tried again.
func (l *Log) Prepare(ctx context.Context, file string) (begin bool, err error) {
	if err := l.Settle(ctx, file); err != nil {
		return false, err
	}
	for restored := false; ; restored = true {
		s, err := l.situation(ctx, file)
		if err != nil {
			return false, err
		}
		r, err := decide(s)
		if restored && err == nil && r.step == stepRestore {
			r.step, err = stepWait, fmt.Errorf("%w (%s): the restored snapshot still does not fit (entry %d of %s)", ErrWaiting, r.name, s.snap.Seq, s.snap.Log)
		}
		if merr := l.Move(ctx, roleOf[r.step], Facts{Step: r.step}); merr != nil {
			return false, merr
		}
		if err != nil || r.step != stepRestore {
			return r.step == stepBegin, err
		}
		l.log.InfoContext(ctx, "changelog: restoring the partition's snapshot", "log", l.name, "db", file, "rule", r.name,
			"file_log", s.file.pos.Log, "file_seq", s.file.pos.Seq, "snapshot_log", s.snap.Log, "snapshot_seq", s.snap.Seq)
		if err := l.restore(ctx, file, s.snap, s.file); err != nil {
			return false, err
		}
	}
}

// roleOf is the role a run moves to when the lifecycle decides a step.
var roleOf = map[step]Role{stepFollow: RoleFollowing, stepBegin: RoleFollowing, stepRestore: RoleRestoring, stepWait: RoleWaiting}

// Move moves the run of this log to role to (Roles.Move).
func (l *Log) Move(ctx context.Context, to Role, f Facts) error {
	if l.cfg.Roles == nil {
		return nil
	}
	return l.cfg.Roles.Move(ctx, to, f)
}

// waiter says a wait once per reason, at warn, then at error once it has
// lasted errorAfter, and spaces the looks with a growing pause.
type waiter struct {
	l       *Log
	reason  string
	since   time.Time
	errored bool
	tries   int
}

const waitErrorAfter = 30 * time.Second

// waitUnknown is a waiter's reason before it has looked: a wait someone
// else said may be on.
const waitUnknown = "(not looked yet)"

// wait says err (a wait's reason) as it needs saying and pauses; false
// once ctx has ended.
func (w *waiter) wait(ctx context.Context, err error) bool {
	if msg := err.Error(); msg != w.reason {
		w.reason, w.since, w.errored, w.tries = msg, time.Now(), false, 0
		w.l.log.WarnContext(ctx, "changelog: the partition's copy cannot go on yet", "log", w.l.name, "err", err)
	} else if !w.errored && time.Since(w.since) > waitErrorAfter {
		w.errored = true
		w.l.log.ErrorContext(ctx, "changelog: the partition's copy still cannot go on", "log", w.l.name, "waited", time.Since(w.since).Round(time.Second), "err", err)
	}
	if w.l.cfg.Waiting != nil {
		w.l.cfg.Waiting(err)
	}
	w.tries++
	return ackwait.Sleep(ctx, min(PollDefault<<min(w.tries, 6), 10*time.Second))
}

// clear says the wait is over.
func (w *waiter) clear() {
	if w.reason != "" && w.l.cfg.Waiting != nil {
		w.l.cfg.Waiting(nil)
	}
	w.reason, w.tries = "", 0
}

// Release gives the lease up now, if this owner still holds it: a host
// that took it and then found its copy may not begin or continue the log.
func (l *Lease) Release() { l.release() }

// TTL is the lease's time to live after its last renewal.
func (l *Lease) TTL() time.Duration { return l.ttl }

// Fence refuses (ErrLeaseLost) while the lease is not held (Held): the
// commit path of a run without a changelog (ledger.Config.Fence), which
// a pause past the TTL would otherwise let commit a batch another run has
// been handed meanwhile.
func (l *Lease) Fence() error {
	if !l.Held() {
		return fmt.Errorf("%w: %s not renewed within %v", ErrLeaseLost, l.key, l.ttl-l.ttl/4)
	}
	return nil
}

// holdsAtLeast says whether a ledger at pos holds all a snapshot at have
// holds: a later entry of the same log, or a log begun from a file that
// held at least as much of have's.
func holdsAtLeast(pos, have ledger.ChangelogPosition) bool {
	switch {
	case pos.Log == have.Log:
		return pos.Seq >= have.Seq
	case pos.Origin.Log == have.Log:
		return pos.Origin.Seq >= have.Seq
	}
	return false
}

// Gap says whether the log lacks entries after its stored snapshot (it
// was purged, or trimmed past it), or there is no snapshot of this log (its
// object or its bucket deleted): a copy behind the log's first entry, or a
// new one, can go on only from a newer snapshot, which its owner should
// store now. Without a snapshot a replacement standby waited for the next
// one, up to the snapshot interval (10 min), with one copy of the
// partition meanwhile (helper-19).
func (l *Log) Gap(ctx context.Context) (bool, error) {
	info, err := l.info(ctx)
	if err != nil {
		return false, err
	}
	snap, err := l.stored(ctx)
	if err != nil {
		return false, err
	}
	if !snap.found || snap.Log != l.instance {
		return true, nil
	}
	if first := firstHeld(info.State); first != 0 {
		return first > snap.Seq+1, nil
	}
	return info.State.LastSeq > snap.Seq, nil
}
