package ledger

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Delivery is one message as the ledger sees it: its id, where it sits in the
// stream, and its payload.
type Delivery struct {
	// MessageID is the publisher-assigned id (Nats-Msg-Id). Required.
	MessageID string
	Stream    string
	Sequence  uint64 // stream sequence
	Subject   string
	Data      []byte
	// Delivered counts deliveries of this message, 1 on the first.
	Delivered uint64
}

// Outcome says what ApplyBatch did with one delivery.
type Outcome uint8

const (
	// Applied: the ledger row was inserted and the handler's change committed.
	Applied Outcome = iota + 1
	// Duplicate: the id was already applied with the same payload; the
	// handler was not run. Acknowledge it.
	Duplicate
	// Conflict: the id was already applied with a different payload; recorded
	// in the conflicts table, handler not run. Result.Err wraps ErrConflict.
	Conflict
	// Failed: the handler (or the ledger insert) failed and this message's
	// savepoint was rolled back. Result.Err is the handler's error.
	Failed
)

func (o Outcome) String() string {
	switch o {
	case Applied:
		return "applied"
	case Duplicate:
		return "duplicate"
	case Conflict:
		return "conflict"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// Result is the outcome of one delivery in a batch.
type Result struct {
	Outcome Outcome
	Err     error // set for Conflict and Failed
}

// Handler applies one message's local state change inside the batch
// transaction. It must use tx for every write that belongs to the message and
// honour ctx: when ctx ends, the message is rolled back whatever it returns.
type Handler func(ctx context.Context, tx *Tx, d Delivery) error

// Tx is the batch transaction as a handler sees it, positioned inside the
// message's savepoint. It is the message's for as long as its handler runs:
// used after the handler returned (from a goroutine that outlived it, say)
// it fails with ErrTxDone.
type Tx struct {
	b    *batchTx
	d    *Delivery // the message being applied, for Enqueue
	done atomic.Bool
}

// batchTx is one batch's transaction and statement caches.
type batchTx struct {
	s     *Store
	tx    *sql.Tx
	stmts map[string]*sql.Stmt // the handler's, prepared once per batch: parsing dominated the cost
	own   map[string]*sql.Stmt // the ledger's own, apart: a handler must not reach them through its cache
}

// maxCachedStmts bounds the per-batch statement cache; a handler building
// unique SQL per message gets no caching rather than unbounded memory.
const maxCachedStmts = 64

// stmt returns the handler's query prepared in this transaction, preparing
// it once.
func (t *Tx) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if t.done.Load() {
		return nil, ErrTxDone
	}
	return t.b.prepare(ctx, t.b.stmts, query)
}

func (b *batchTx) prepare(ctx context.Context, cache map[string]*sql.Stmt, query string) (*sql.Stmt, error) {
	if st, ok := cache[query]; ok {
		return st, nil
	}
	st, err := b.tx.PrepareContext(ctx, query)
	if err != nil {
		return nil, b.s.guard.explain(err)
	}
	if len(cache) < maxCachedStmts {
		cache[query] = st
	}
	return st, nil
}

// exec runs one of the ledger's own statements.
func (b *batchTx) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := b.prepare(ctx, b.own, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

// ownExec runs one of the ledger's own statements inside the handler's
// window (an outbox row, say), where the guard otherwise refuses writes to
// the ledger's tables.
func (t *Tx) ownExec(ctx context.Context, query string, args ...any) (res sql.Result, err error) {
	if t.done.Load() {
		return nil, ErrTxDone
	}
	err = t.b.s.guard.ownStatement(func() error {
		res, err = t.b.exec(ctx, query, args...)
		return err
	})
	return res, err
}

// ExecContext runs a statement in the message's savepoint.
func (t *Tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := t.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

// QueryContext runs a query in the message's savepoint.
func (t *Tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := t.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// QueryRowContext runs a single-row query in the message's savepoint.
func (t *Tx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := t.stmt(ctx, query)
	if err != nil {
		// sql.Row carries no public constructor for an error: let the
		// transaction report the same preparation error. (After the handler
		// returned, that is a read at most: writes go through ExecContext.)
		return t.b.tx.QueryRowContext(ctx, query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// Budget bounds a batch in time. A consumer gives its ackwait.Plan's
// Deadline and CommitTimeout, so the ledger keeps the plan's AckWait.
type Budget struct {
	// Work bounds the wait for the single writer and the handlers, from the
	// call. A handler still running then is cancelled through its context
	// and its message rolled back; a batch that cannot get the writer in
	// time fails with ErrBusy, nothing applied. 0: only ctx bounds it.
	Work time.Duration
	// Commit bounds the COMMIT, which starts when the work ends and runs
	// even after ctx has ended, so work finished in time is kept. Default
	// CommitTimeoutDefault.
	Commit time.Duration
}

// ApplyBatch applies deliveries in one transaction, one savepoint each, and
// commits once. Each message's ledger row and handler change commit together
// or not at all. The wait for the writer and the handlers run under ctx and
// b.Work; the COMMIT under b.Commit.
//
// The returned error is for the batch as a whole (database unusable, or the
// writer not free within b.Work: ErrBusy); then nothing was committed.
// Otherwise results[i] is the outcome of batch[i].
func (s *Store) ApplyBatch(ctx context.Context, batch []Delivery, h Handler, b Budget) ([]Result, error) {
	b.Commit = cmp.Or(b.Commit, CommitTimeoutDefault)
	if b.Work > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, b.Work, fmt.Errorf("batch deadline %s exceeded", b.Work))
		defer cancel()
	}
	results := make([]Result, len(batch))
	skip := make([]bool, len(batch))
	for redo := false; ; redo = true {
		if redo && ctx.Err() != nil {
			// No time left to redo the rest: they overran with the culprit.
			for i := range batch {
				if !skip[i] {
					results[i] = Result{Outcome: Failed, Err: fmt.Errorf("handler overran its deadline: %w", context.Cause(ctx))}
				}
			}
			return results, nil
		}
		lost, err := s.applyOnce(ctx, batch, h, b.Commit, results, skip)
		if err != nil {
			return nil, interpret(err)
		}
		if lost < 0 {
			return results, nil
		}
		// Everything before the culprit was rolled back with it; it keeps its
		// Failed result and the rest is redone without it.
		skip[lost] = true
	}
}

// begin starts the batch transaction under txCtx, which must outlive ctx:
// database/sql rolls a Tx back when its context ends, and a handler overrunning
// the deadline must cost only its own savepoint. The wait for the writer (the
// pool's one connection here, another process's lock in SQLite's busy
// handler) still ends with ctx.
func (s *Store) begin(ctx, txCtx context.Context, cancelTx context.CancelFunc) (*sql.Tx, error) {
	var mu sync.Mutex
	begun, stopped := false, false
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !begun {
			stopped = true
			cancelTx()
		}
	})
	defer stop()
	tx, err := s.writer.BeginTx(txCtx, nil)
	mu.Lock()
	begun = true
	late := stopped
	mu.Unlock()
	if err == nil && !late {
		return tx, nil
	}
	if tx != nil {
		tx.Rollback()
	}
	if late || ctx.Err() != nil {
		return nil, fmt.Errorf("%w: the writer was not free within the batch deadline (%v)", ErrBusy, context.Cause(ctx))
	}
	return nil, fmt.Errorf("ledger: begin batch: %w", err)
}

// applyOnce returns the index of a message whose failure took the whole
// transaction with it, or -1 when the batch committed.
func (s *Store) applyOnce(ctx context.Context, batch []Delivery, h Handler, commit time.Duration, results []Result, skip []bool) (int, error) {
	txCtx, cancelTx := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelTx()
	tx, err := s.begin(ctx, txCtx, cancelTx)
	if err != nil {
		return -1, err
	}
	s.guard.openBatch()
	defer func() {
		s.guard.closeBatch()
		tx.Rollback() //nolint:errcheck // no-op after Commit
	}()
	now := s.cfg.Now().UnixMilli()
	b := &batchTx{s: s, tx: tx, stmts: make(map[string]*sql.Stmt, 8), own: make(map[string]*sql.Stmt, 8)}
	for i := range batch {
		if skip[i] {
			continue
		}
		res, lost, err := s.applyOne(ctx, context.WithoutCancel(txCtx), b, &batch[i], h, now)
		if err != nil {
			return -1, err
		}
		if lost {
			results[i] = res
			return i, nil
		}
		results[i] = res
	}
	// The commit gets its own bound from now: the work ended in time.
	timer := time.AfterFunc(commit, cancelTx)
	defer timer.Stop()
	s.guard.closeBatch() // the hooks let the ledger's own COMMIT through
	if err := tx.Commit(); err != nil {
		return -1, fmt.Errorf("ledger: commit batch of %d: %w", len(batch), err)
	}
	return -1, nil
}

// applyOne runs one message in its savepoint. lost reports that the whole
// transaction is gone; err is a failure of the ledger itself. The ledger's own
// statements run under txCtx, which must not be cancellable: a context that
// can end makes the driver watch it with a goroutine per statement.
func (s *Store) applyOne(ctx, txCtx context.Context, t *batchTx, d *Delivery, h Handler, now int64) (res Result, lost bool, err error) {
	if d.MessageID == "" {
		return Result{Outcome: Failed, Err: ErrEmptyMessageID}, false, nil
	}
	if _, err := t.exec(txCtx, "SAVEPOINT msg"); err != nil {
		return Result{}, false, fmt.Errorf("ledger: savepoint for %s: %w", d.MessageID, err)
	}
	sum := sha256.Sum256(d.Data)
	ins, err := t.exec(txCtx, `INSERT INTO processed_messages
		(message_id, stream, stream_seq, last_seq, subject, payload_sha256, processed_at, last_seen_at)
		VALUES (?1, ?2, ?3, ?3, ?4, ?5, ?6, ?6) ON CONFLICT (message_id) DO NOTHING`,
		d.MessageID, d.Stream, int64(d.Sequence), d.Subject, sum[:], now)
	if err != nil {
		return Result{}, false, fmt.Errorf("ledger: record %s: %w", d.MessageID, err)
	}
	if n, _ := ins.RowsAffected(); n == 0 {
		res, err := s.seenBefore(txCtx, t, d, sum[:], now)
		if err != nil {
			return Result{}, false, err
		}
		if _, err := t.exec(txCtx, "RELEASE msg"); err != nil {
			return Result{}, false, fmt.Errorf("ledger: release savepoint for %s: %w", d.MessageID, err)
		}
		return res, false, nil
	}

	view := &Tx{b: t, d: d}
	s.guard.enterHandler()
	herr := h(ctx, view, *d)
	s.guard.leaveHandler()
	view.done.Store(true)
	if herr == nil && ctx.Err() != nil {
		// Finished after its deadline: the consumer may already have lost the
		// message to AckWait, so the work is not kept.
		herr = fmt.Errorf("handler overran its deadline: %w", context.Cause(ctx))
	}
	if fault := databaseFault(herr); fault != nil {
		return Result{}, false, fmt.Errorf("ledger: applying %s: %w", d.MessageID, fault)
	}
	if herr == nil && s.guard.lost.Load() {
		// A statement of the handler ended the whole transaction (a conflict
		// resolved by ROLLBACK) and the handler carried on; the commit hook
		// kept its later statements from committing on their own.
		herr = fmt.Errorf("%w: a statement rolled back the whole batch (ON CONFLICT ROLLBACK, INSERT OR ROLLBACK or RAISE(ROLLBACK))",
			ErrTransactionControl)
	}
	if herr == nil {
		if _, err := t.exec(txCtx, "RELEASE msg"); err != nil {
			return Result{}, false, fmt.Errorf("ledger: release savepoint for %s: %w", d.MessageID, err)
		}
		return Result{Outcome: Applied}, false, nil
	}
	failed := Result{Outcome: Failed, Err: herr}
	if _, err := t.exec(txCtx, "ROLLBACK TO msg"); err != nil {
		// SQLite rolls back the whole transaction on an interrupted write,
		// SQLITE_FULL and some I/O errors; the savepoint went with it.
		return failed, true, nil
	}
	if _, err := t.exec(txCtx, "RELEASE msg"); err != nil {
		return failed, true, nil
	}
	return failed, false, nil
}

// pinnedSeq is the last_seq of an id seen in more than one stream: prune
// goes stream by stream and could not tell when every copy is gone, so the
// row is never pruned.
const pinnedSeq = math.MaxInt64

// seenBefore classifies a message whose id is already in the ledger, and
// records where this copy was seen: prune keeps the row while it is in the
// stream.
func (s *Store) seenBefore(ctx context.Context, tx *batchTx, d *Delivery, sum []byte, now int64) (Result, error) {
	var have []byte
	var stream string
	var lastSeq int64
	if err := tx.tx.QueryRowContext(ctx, `SELECT payload_sha256, stream, last_seq FROM processed_messages WHERE message_id = ?`,
		d.MessageID).Scan(&have, &stream, &lastSeq); err != nil {
		return Result{}, fmt.Errorf("ledger: look up %s: %w", d.MessageID, err)
	}
	seq := int64(d.Sequence)
	if stream != d.Stream {
		seq = pinnedSeq
	}
	if seq > lastSeq { // a redelivery of the same copy changes nothing
		if _, err := tx.exec(ctx, `UPDATE processed_messages SET last_seq = ?, last_seen_at = ? WHERE message_id = ?`,
			seq, now, d.MessageID); err != nil {
			return Result{}, fmt.Errorf("ledger: record copy of %s: %w", d.MessageID, err)
		}
	}
	if string(have) == string(sum) {
		return Result{Outcome: Duplicate}, nil
	}
	if _, err := tx.exec(ctx, `INSERT INTO conflicts
		(message_id, stream, stream_seq, subject, existing_sha256, new_sha256, payload, seen_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (message_id, stream, stream_seq) DO NOTHING`,
		d.MessageID, d.Stream, int64(d.Sequence), d.Subject, have, sum, d.Data, now); err != nil {
		return Result{}, fmt.Errorf("ledger: record conflict for %s: %w", d.MessageID, err)
	}
	return Result{Outcome: Conflict, Err: &ConflictError{MessageID: d.MessageID, Existing: have, New: sum}}, nil
}

// ConflictError describes a reused message id. It wraps ErrConflict.
type ConflictError struct {
	MessageID     string
	Existing, New []byte // payload SHA-256 of the applied and of the new message
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("ledger: message id %q reused with a different payload (applied sha256 %x, new %x)", e.MessageID, e.Existing, e.New)
}

func (e *ConflictError) Unwrap() error { return ErrConflict }

// CheckHandlerSQL compiles each statement as a handler would run it, inside
// a write transaction that is rolled back: an error names the statement
// that does not compile, and wraps ErrTransactionControl or ErrFixedSetting
// for one a handler may not run. For checking a handler's SQL at start.
func (s *Store) CheckHandlerSQL(ctx context.Context, stmts []string) error {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("ledger: check handler SQL: %w", interpret(err))
	}
	defer tx.Rollback() //nolint:errcheck // nothing to keep
	s.guard.enterHandler()
	defer s.guard.leaveHandler()
	for i, q := range stmts {
		st, err := tx.PrepareContext(ctx, q)
		if err != nil {
			return fmt.Errorf("statement %d: %w", i+1, s.guard.explain(err))
		}
		st.Close()
	}
	return nil
}
