package ledger

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
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
	// Instance names the stream instance (consumer.StreamInstance), so a
	// replay settles the dead letter of this instance's message, not of
	// one at the same sequence in a stream since deleted. Optional.
	Instance string
	Sequence uint64 // stream sequence
	Subject  string
	Data     []byte
	// Delivered counts deliveries of this message, 1 on the first.
	Delivered uint64
	// Header holds the message's headers as the publisher set them
	// (Nats-Msg-Id among them). Nil when the message has none or the
	// delivery did not come from a stream. Read it; do not modify it.
	Header Header
}

// Header is a message's headers: each key to its values, in order. Keys are
// case-sensitive, as NATS's are. It is a plain map so that ledger needs
// nothing of NATS or HTTP; a nats.Header converts to it as it is.
type Header map[string][]string

// Get returns the first value of key, or "" when there is none.
func (h Header) Get(key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
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
//
// The batch's processed_messages rows are written after its handlers, so
// a handler sees the ledger as it was before the batch (not its own row,
// nor those of earlier messages in the batch); a handler that depends on
// another message records that in its own tables, which it sees as
// written.
type Handler func(ctx context.Context, tx *Tx, d Delivery) error

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

// ApplyBatch applies deliveries in one transaction and commits once. Each
// message's ledger row and handler change commit together or not at all,
// and a message that fails costs only itself. The wait for the writer and
// the handlers run under ctx and b.Work; the COMMIT under b.Commit.
//
// One query finds which ids the ledger already holds; repeats within the
// batch are settled in memory (a later copy of an id whose first copy
// failed is applied); the new ledger rows, and the rows handlers queued
// with InsertLater, are inserted with multi-row statements after the
// handlers. While failures are rare a batch runs the messages that start in
// the first 1/optimisticShare of b.Work without a savepoint each: if one of
// them fails (or overruns the deadline), the transaction is rolled back and
// the batch redone with a savepoint per message, without the failed one;
// later batches keep the savepoints until optimisticAfter batches in a row
// had no failure. The redo's deadline moves on by the work it repeats
// (plus an eighth of b.Work for its fixed costs), so every other message
// gets the time it would have had with savepoints from the start: the
// batch may then run past b.Work by that much, which the consumer's
// InProgress refreshes cover.
//
// The returned error is for the batch as a whole (database unusable, or the
// writer not free within b.Work: ErrBusy); then nothing was committed.
// Otherwise results[i] is the outcome of batch[i].
func (s *Store) ApplyBatch(ctx context.Context, batch []Delivery, h Handler, b Budget) ([]Result, error) {
	results, _, err := s.applyBatch(ctx, batch, h, b, mode{})
	return results, err
}

// ApplyBatchPipelined is ApplyBatch for a pipeline: it returns once the
// batch is committed, before the commit is on disk, and Pending.Durable
// returns once it is. Run the next batch meanwhile and acknowledge nothing
// of this one before Durable returns: the disk's flush then overlaps the
// next batch's work instead of stalling the writer. Until Durable returns a
// power cut can lose the batch, whole (never part of it); a crash of the
// process alone cannot. With Config.Synchronous below FULL there is nothing
// more to wait for on disk.
//
// With a changelog, Durable also waits for the batch's entry to be in the
// log (see EntryAppender): an error then is ErrNotChangelogOwner, and the
// batch is undone, or kept if its entry landed after all, when the store
// next catches up with the log (SettleUnlogged).
func (s *Store) ApplyBatchPipelined(ctx context.Context, batch []Delivery, h Handler, b Budget) ([]Result, Pending, error) {
	return s.applyBatch(ctx, batch, h, b, mode{pipelined: s.cfg.Synchronous == "FULL" || s.cfg.Synchronous == "EXTRA", entryPipelined: true})
}

func (s *Store) applyBatch(ctx context.Context, batch []Delivery, h Handler, b Budget, api mode) ([]Result, Pending, error) {
	b.Commit = cmp.Or(b.Commit, CommitTimeoutDefault)
	var deadline time.Time
	if b.Work > 0 {
		deadline = time.Now().Add(b.Work)
	}
	// Statements the last batch had to prepare itself, while the writer is
	// free; a writer held elsewhere is the first pass's ErrBusy.
	fill, cancelFill := workContext(ctx, deadline, b.Work)
	s.ownStmts.fill(fill, s.writer)
	s.handlerStmts.fill(fill, s.writer)
	cancelFill()
	sums := hashPayloads(batch)
	// Not past the return, even one that comes before a pass waited: the
	// caller owns the payloads again.
	defer sums.wait()
	results := make([]Result, len(batch))
	skip := make([]bool, len(batch))
	m := s.adapt.mode()
	m.pipelined, m.entryPipelined = api.pipelined, api.entryPipelined
	var done Pending
	for redos := 0; ; redos++ {
		redo := redos > 0
		work, cancel := workContext(ctx, deadline, b.Work)
		begin, cancelBegin := work, func() {}
		if redo {
			// The writer was ours a moment ago; a redo whose time is up
			// still runs, to settle duplicates and fail the rest.
			begin, cancelBegin = context.WithTimeout(context.WithoutCancel(ctx), b.Commit)
		}
		end, err := s.applyOnce(begin, work, batch, sums, h, b.Commit, m, results, skip)
		cancelBegin()
		cancel()
		if err != nil {
			return nil, Pending{}, s.explainFull(interpret(err))
		}
		if end.committed {
			done = Pending{y: &s.wal, gen: end.gen, entry: end.entry}
			break
		}
		// Everything was rolled back; the culprit keeps its Failed result
		// and the rest is redone without it, with savepoints. The redo
		// gets back the time spent on what it repeats, so each message has
		// the time it would have had with savepoints from the start.
		if end.culprit >= 0 {
			skip[end.culprit] = true
		}
		if !deadline.IsZero() {
			// And an eighth of the budget for what a pass costs besides.
			deadline = deadline.Add(end.repeated + b.Work/optimisticShare)
		}
		if end.culprit < 0 && !end.inserts || end.inserts && !m.deferInserts || redos >= len(batch)+1 {
			// Every redo takes a message out or changes the mode; one that
			// cannot would run for ever.
			return nil, Pending{}, fmt.Errorf("ledger: batch of %d redone %d times without settling", len(batch), redos)
		}
		m.savepoints = true
		if end.inserts {
			m.deferInserts = false
			s.adapt.insertsFailed()
		}
	}
	s.adapt.note(results)
	s.restartLongWAL()
	return results, done, nil
}

// payloadSums are the SHA-256 of a batch's payloads.
type payloadSums struct {
	sums [][32]byte
	done chan struct{} // closed once sums is filled; nil: filled at once
}

// hashSeparately is the smallest batch hashed on a goroutine of its own.
const hashSeparately = 64

// hashPayloads hashes the payloads of a large batch on a goroutine of its
// own, while the first pass waits for the writer and looks the ids up: the
// hashing is then off the goroutine that holds the writer.
func hashPayloads(batch []Delivery) *payloadSums {
	p := &payloadSums{sums: make([][32]byte, len(batch))}
	hash := func() {
		for i := range batch {
			p.sums[i] = sha256.Sum256(batch[i].Data)
		}
	}
	if len(batch) < hashSeparately {
		hash()
		return p
	}
	p.done = make(chan struct{})
	go func() {
		defer close(p.done)
		hash()
	}()
	return p
}

func (p *payloadSums) wait() [][32]byte {
	if p.done != nil {
		<-p.done
	}
	return p.sums
}

// workContext is a pass's context for its handlers: it ends at deadline
// (none if zero), its cause naming the batch deadline.
func workContext(ctx context.Context, deadline time.Time, work time.Duration) (context.Context, context.CancelFunc) {
	if deadline.IsZero() {
		return context.WithCancel(ctx)
	}
	return context.WithDeadlineCause(ctx, deadline, fmt.Errorf("batch deadline %s: %w", work, context.DeadlineExceeded))
}

// mode is how a pass runs.
type mode struct {
	pipelined bool // commit at synchronous=NORMAL; Pending.Durable syncs
	// The changelog entry's publish overlaps the commit and the next
	// batch; Pending.Durable waits for it.
	entryPipelined bool
	savepoints     bool // one savepoint per message, so a failure costs only itself
	deferInserts   bool // InsertLater queues rows for multi-row inserts
}

// adapt picks each batch's mode from how the last ones went.
type adapt struct {
	clean     atomic.Int64 // batches in a row without a failed message
	immediate atomic.Int64 // batches left that insert InsertLater's rows at once
}

// optimisticAfter is how many batches in a row must pass without a failed
// message before batches run without a savepoint per message again; and
// how many batches insert InsertLater's rows one at a time after a
// multi-row insert failed. With failures in most batches the savepoints
// stay; a failure now and then costs one redo and a few batches with
// savepoints.
const optimisticAfter = 16

func (a *adapt) mode() mode {
	return mode{savepoints: a.clean.Load() < optimisticAfter, deferInserts: a.immediate.Load() <= 0}
}

func (a *adapt) insertsFailed() { a.immediate.Store(optimisticAfter + 1) }

// note counts batches without a failed message.
func (a *adapt) note(results []Result) {
	a.immediate.Add(-1)
	for _, r := range results {
		if r.Outcome == Failed && !errors.Is(r.Err, ErrEmptyMessageID) {
			a.clean.Store(0)
			return
		}
	}
	a.clean.Add(1)
}

// begin starts the batch transaction under txCtx, which must outlive ctx:
// database/sql rolls a Tx back when its context ends, and a handler overrunning
// the deadline must cost only its own savepoint. The wait for the writer (the
// pool's one connection here, another process's lock in SQLite's busy
// handler) still ends with ctx. A pipelined batch holds the writer's
// connection from before its BEGIN to after its COMMIT, at
// synchronous=NORMAL (which SQLite does not let change inside a
// transaction); end, which must be called after the transaction ended,
// sets it back, so no other write commits at NORMAL.
func (s *Store) begin(ctx, txCtx context.Context, cancelTx context.CancelFunc, pipelined bool) (tx *sql.Tx, end func(), err error) {
	end = func() {}
	s.batchAsks.Add(1)
	s.batchWaiting.Add(1)
	late := unlessStopped(ctx, cancelTx, func() {
		if pipelined {
			tx, end, err = s.beginPipelined(txCtx)
		} else {
			tx, err = s.writer.BeginTx(txCtx, nil)
		}
	})
	s.batchWaiting.Add(-1)
	if err == nil && !late {
		held, ended := time.Now(), end
		return tx, func() { s.batchHeld.note(time.Since(held)); ended() }, nil
	}
	if tx != nil {
		tx.Rollback()
	}
	end()
	if late || ctx.Err() != nil {
		return nil, nil, fmt.Errorf("%w: the writer was not free within the batch deadline (%v)", ErrBusy, context.Cause(ctx))
	}
	return nil, nil, fmt.Errorf("ledger: begin batch: %w", err)
}

// unlessStopped runs begin, calling cancel (which ends begin's wait) if ctx
// ends before begin returns; late says it did, and a transaction begun all
// the same is the caller's to roll back. After begin returns, ctx's end
// cancels nothing.
func unlessStopped(ctx context.Context, cancel context.CancelFunc, begin func()) (late bool) {
	var mu sync.Mutex
	begun, stopped := false, false
	undo := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !begun {
			stopped = true
			cancel()
		}
	})
	defer undo()
	begin()
	mu.Lock()
	defer mu.Unlock()
	begun = true
	return stopped
}

// beginPipelined takes the writer's connection, sets synchronous=NORMAL
// and begins; end sets the store's setting back, or discards the
// connection if it cannot.
func (s *Store) beginPipelined(txCtx context.Context) (*sql.Tx, func(), error) {
	conn, err := s.writer.Conn(txCtx)
	if err != nil {
		return nil, func() {}, err
	}
	setSync := func(ctx context.Context, level string) error {
		return s.guard.ownStatement(func() error {
			_, err := conn.ExecContext(ctx, "PRAGMA synchronous = "+level)
			return err
		})
	}
	end := func() {
		restore, cancel := context.WithTimeout(context.Background(), s.cfg.BusyTimeout)
		defer cancel()
		if err := setSync(restore, s.cfg.Synchronous); err != nil {
			s.log.Error("ledger: cannot restore synchronous after a pipelined batch; reopening the writer", "db", s.path, "err", err)
			conn.Raw(func(any) error { return driver.ErrBadConn }) //nolint:errcheck // the error is the point: discard the connection
		}
		conn.Close()
	}
	if err := setSync(txCtx, "NORMAL"); err != nil {
		end()
		return nil, func() {}, err
	}
	tx, err := conn.BeginTx(txCtx, nil)
	if err != nil {
		end()
		return nil, func() {}, err
	}
	return tx, end, nil
}

// pass is one run of a batch in one transaction.
type pass struct {
	s    *Store
	ctx  context.Context // the work's: the handlers', and the watchdog's
	b    *batchTx
	h    Handler
	rows ledgerRows
	mode
	inserts []queued // InsertLater's rows

	start           time.Time // of the pass's work
	optimisticUntil time.Time // messages starting after it get a savepoint; zero: no bound
	culpritAt       time.Time // when the message that took the pass down started
	windowClosed    bool      // optimisticUntil has passed
}

// optimisticShare: a batch without savepoints runs its messages without one
// only in the first 1/optimisticShare of its deadline, and with one after;
// a redo then repeats little, and a late overrun costs only itself.
const optimisticShare = 8

// optimistic says whether the next message runs without a savepoint and,
// when the pass has a deadline to refund, when it started. Once the window
// has passed it stays closed, and the clock is not read again.
func (p *pass) optimistic() (bool, time.Time) {
	switch {
	case p.savepoints || p.windowClosed:
		return false, time.Time{}
	case p.optimisticUntil.IsZero():
		return true, time.Time{}
	}
	now := time.Now()
	p.windowClosed = !now.Before(p.optimisticUntil)
	return !p.windowClosed, now
}

// passEnd says how a pass ended when it did not commit.
type passEnd struct {
	committed bool
	gen       uint64        // a pipelined commit's generation
	entry     *flight       // a pipelined changelog entry, on its way
	culprit   int           // a failed message whose change could not be undone alone, or -1
	inserts   bool          // the multi-row insert of InsertLater's rows failed
	repeated  time.Duration // the work a redo repeats: up to the culprit's start, or all of it
}

// applyOnce runs the batch in one transaction and commits it, or says why not.
// beginCtx bounds the wait for the writer, ctx the work.
func (s *Store) applyOnce(beginCtx, ctx context.Context, batch []Delivery, sums *payloadSums, h Handler, commit time.Duration, m mode, results []Result, skip []bool) (passEnd, error) {
	txCtx, cancelTx := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelTx()
	tx, endTx, err := s.begin(beginCtx, txCtx, cancelTx, m.pipelined)
	if err != nil {
		return passEnd{}, err
	}
	rec, err := s.record()
	if err != nil {
		tx.Rollback() //nolint:errcheck // nothing written
		endTx()
		return passEnd{}, err
	}
	s.guard.openBatch()
	defer func() {
		s.guard.closeBatch()
		rec.close()
		tx.Rollback() //nolint:errcheck // no-op after Commit
		endTx()
	}()
	p := &pass{s: s, ctx: ctx, b: newBatchTx(s, tx, context.WithoutCancel(txCtx)), h: h, mode: m}
	cookie, err := readCookie(p.b.quiet, tx)
	if err != nil {
		return passEnd{}, fmt.Errorf("ledger: read schema version: %w", err)
	}
	s.handlerStmts.atSchema(cookie)
	p.start = time.Now()
	if deadline, ok := ctx.Deadline(); ok && !m.savepoints {
		p.optimisticUntil = p.start.Add(deadline.Sub(p.start) / optimisticShare)
	}
	stopWatch := s.guard.wd.watch(ctx)
	defer stopWatch()
	culprit, err := p.run(batch, sums, results, skip)
	if err != nil || culprit >= 0 {
		return passEnd{culprit: culprit, repeated: p.culpritAt.Sub(p.start)}, err
	}
	// InsertLater's rows are the handlers' work: under their deadline.
	queued := len(p.inserts) > 0
	if err := p.flushInserts(); err != nil {
		if fault := databaseFault(err); fault != nil {
			return passEnd{}, fault
		}
		return passEnd{culprit: -1, inserts: true, repeated: time.Since(p.start)}, nil
	}
	if queued && ctx.Err() != nil {
		// The queued rows ran past the deadline; the redo inserts each in
		// its message's turn, where an overrun is that message's alone.
		return passEnd{culprit: -1, inserts: true, repeated: time.Since(p.start)}, nil
	}
	stopWatch()
	if err := p.flush(); err != nil {
		return passEnd{}, err
	}
	// The commit gets its own bound from now: the work ended in time.
	var late atomic.Bool
	timer := time.AfterFunc(commit, func() { late.Store(true); cancelTx() })
	defer timer.Stop()
	// With a changelog the changes go there first (pipelined: on their way,
	// Pending.Durable waits); refused, the batch is rolled back.
	published, entry, err := s.fencedPublish(rec, txCtx, tx, m, commit)
	if err != nil {
		return passEnd{}, fmt.Errorf("ledger: commit batch of %d: %w", len(batch), err)
	}
	s.guard.closeBatch() // the hooks let the ledger's own COMMIT through
	err = tx.Commit()
	published(err)
	if err != nil {
		if late.Load() {
			// database/sql rolled the transaction back when its context
			// ended: say so, not "already committed or rolled back".
			return passEnd{}, fmt.Errorf("ledger: commit batch of %d: not done within its bound of %v (a slow disk or an overloaded host), rolled back: %w", len(batch), commit, err)
		}
		return passEnd{}, fmt.Errorf("ledger: commit batch of %d: %w", len(batch), err)
	}
	s.ids.committed(p.rows.fresh)
	if m.pipelined {
		return passEnd{committed: true, gen: s.wal.commit(), entry: entry}, nil
	}
	return passEnd{committed: true, entry: entry}, nil
}

// fencedPublish is publishFor behind Config.Fence, asked first: a fence
// that refuses rolls the batch back before anything is published.
func (s *Store) fencedPublish(rec *recording, ctx context.Context, tx execer, m mode, bound time.Duration) (func(error), *flight, error) {
	if f := s.cfg.Fence; f != nil {
		if err := f(); err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrFenced, err)
		}
	}
	return rec.publishFor(ctx, tx, m, bound)
}

// run applies the batch's messages in order. It returns the index of a
// failed message whose change could not be undone alone (the transaction
// went with it, or the pass has no savepoints), or -1.
func (p *pass) run(batch []Delivery, sums *payloadSums, results []Result, skip []bool) (int, error) {
	if err := p.lookup(batch, skip); err != nil {
		return -1, err
	}
	// Before any handler runs: one could change a payload in place.
	sum := sums.wait()
	for i := range batch {
		if skip[i] {
			continue
		}
		d := &batch[i]
		if d.MessageID == "" {
			results[i] = Result{Outcome: Failed, Err: ErrEmptyMessageID}
			continue
		}
		if k := p.rows.known[d.MessageID]; k != nil {
			results[i] = p.rows.copyOf(k, d, sum[i])
			continue
		}
		if p.ctx.Err() != nil {
			// The deadline passed before its turn: nothing of it to undo.
			results[i] = Result{Outcome: Failed, Err: fmt.Errorf("the batch deadline passed before its turn: %w", context.Cause(p.ctx))}
			continue
		}
		opt, at := p.optimistic()
		res, lost, err := p.apply(d, opt)
		if err != nil {
			return -1, err
		}
		results[i] = res
		if lost {
			// A message with a savepoint whose transaction went anyway
			// (rare) refunds its own time too.
			p.culpritAt = cmp.Or(at, time.Now())
			return i, nil
		}
		if res.Outcome == Applied {
			p.rows.applied(d, sum[i])
		}
	}
	return -1, nil
}

// apply runs one message's handler, in a savepoint unless optimistic.
// lost reports a failure that could not be undone alone; err is a failure
// of the ledger itself, or of the database (a full disk), which is not the
// message's fault.
func (p *pass) apply(d *Delivery, optimistic bool) (res Result, lost bool, err error) {
	if optimistic {
		herr := p.handle(d)
		if fault := databaseFault(herr); fault != nil {
			return Result{}, false, fmt.Errorf("ledger: applying %s: %w", d.MessageID, fault)
		}
		if herr != nil {
			return Result{Outcome: Failed, Err: herr}, true, nil
		}
		return Result{Outcome: Applied}, false, nil
	}
	if _, err := p.b.exec("SAVEPOINT msg"); err != nil {
		return Result{}, false, fmt.Errorf("ledger: savepoint for %s: %w", d.MessageID, err)
	}
	mark := p.mark()
	herr := p.handle(d)
	if fault := databaseFault(herr); fault != nil {
		return Result{}, false, fmt.Errorf("ledger: applying %s: %w", d.MessageID, fault)
	}
	if herr == nil {
		if _, err := p.b.exec("RELEASE msg"); err != nil {
			return Result{}, false, fmt.Errorf("ledger: release savepoint for %s: %w", d.MessageID, err)
		}
		return Result{Outcome: Applied}, false, nil
	}
	p.undo(mark)
	failed := Result{Outcome: Failed, Err: herr}
	if _, err := p.b.exec("ROLLBACK TO msg"); err != nil {
		// SQLite rolls back the whole transaction on an interrupted write,
		// SQLITE_FULL and some I/O errors; the savepoint went with it.
		return failed, true, nil
	}
	if _, err := p.b.exec("RELEASE msg"); err != nil {
		return failed, true, nil
	}
	return failed, false, nil
}

// handle runs the handler and says what became of the message's change.
func (p *pass) handle(d *Delivery) error {
	view := &Tx{b: p.b, p: p, d: d, ctx: p.ctx}
	p.s.guard.enterHandler()
	herr := p.h(p.ctx, view, *d)
	p.s.guard.leaveHandler()
	view.done.Store(true)
	switch {
	case herr == nil && p.ctx.Err() != nil:
		// Finished after its deadline: the consumer may already have lost the
		// message to AckWait, so the work is not kept.
		herr = fmt.Errorf("handler overran its deadline: %w", context.Cause(p.ctx))
	case herr != nil && p.ctx.Err() != nil:
		// Most likely the watchdog's interrupt ("interrupted (9)"): say why.
		herr = fmt.Errorf("handler overran its deadline: %w: %w", context.Cause(p.ctx), herr)
	}
	if herr == nil && p.s.guard.lost.Load() {
		// A statement of the handler ended the whole transaction (a conflict
		// resolved by ROLLBACK) and the handler carried on; the commit hook
		// kept its later statements from committing on their own.
		herr = fmt.Errorf("%w: a statement rolled back the whole batch (ON CONFLICT ROLLBACK, INSERT OR ROLLBACK or RAISE(ROLLBACK))",
			ErrTransactionControl)
	}
	return herr
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
	_, err := s.checkHandlerSQL(ctx, stmts)
	return err
}

// TablesUsed checks stmts as CheckHandlerSQL does and returns the tables
// they read or write, lower-cased, including those the triggers they fire
// touch: whether a handler's statements could see rows queued with
// InsertLater.
func (s *Store) TablesUsed(ctx context.Context, stmts []string) (map[string]bool, error) {
	return s.checkHandlerSQL(ctx, stmts)
}

func (s *Store) checkHandlerSQL(ctx context.Context, stmts []string) (map[string]bool, error) {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("ledger: check handler SQL: %w", interpret(err))
	}
	defer tx.Rollback() //nolint:errcheck // nothing to keep
	g := s.guard
	g.enterHandler()
	defer g.leaveHandler()
	g.mu.Lock()
	g.tables = map[string]bool{}
	g.mu.Unlock()
	g.recording.Store(true)
	defer g.recording.Store(false)
	for i, q := range stmts {
		st, err := tx.PrepareContext(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("statement %d: %w", i+1, g.explain(err))
		}
		st.Close()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.tables, nil
}

// restartLongWAL copies, on the writer after a batch's commit (or a
// standby's entries), the few frames the background checkpoint has not yet
// copied of a WAL grown past walRestartFrames, so that the next
// transaction reuses the WAL from its start (walRestartFrames says why). A
// WAL with more pending waits for the background checkpoint, which looks
// again soon while the WAL is long.
func (s *Store) restartLongWAL() {
	frames, pending, ok := s.walLength()
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.BusyTimeout)
	defer cancel()
	s.keepWALSize(ctx, frames >= walRestartFrames)
	if frames < walRestartFrames || pending > walRestartPending && frames < walCapFrames {
		return
	}
	_, _ = s.writer.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)") // a failure is the background checkpoint's to say
}

// keepWALSize has the writer keep the WAL file's size when it reuses it
// while the WAL is long (a backlog) and for walKeep after, and cut it back
// to walSizeLimit otherwise (journal_size_limit). Cut back at each reuse,
// the WAL grew again over the next batches, and a backlog of random ids
// ran at 0.72 of its rate (BENCHMARKS.md).
func (s *Store) keepWALSize(ctx context.Context, long bool) {
	now := time.Now()
	s.walMu.Lock()
	if long {
		s.walKeepUntil = now.Add(s.walKeep)
	}
	keep := now.Before(s.walKeepUntil)
	change := keep != s.walKept
	s.walMu.Unlock()
	if !change {
		return
	}
	limit := walSizeLimit
	if keep {
		limit = walKeptLimit
	}
	// The guard refuses this setting to anyone but the ledger: the
	// connection first, so that no handler runs in the window.
	conn, err := s.writer.Conn(ctx)
	if err != nil {
		return // tried again after the next batch
	}
	defer conn.Close()
	if err := s.guard.ownStatement(func() error {
		_, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA journal_size_limit = %d", limit))
		return err
	}); err != nil {
		return
	}
	s.walMu.Lock()
	s.walKept = keep
	s.walMu.Unlock()
}

// walLength is the WAL's length and what of it is not yet copied, through the
// store's one look at its index (walFrames).
func (s *Store) walLength() (frames uint32, pending int64, ok bool) {
	s.walMu.Lock()
	defer s.walMu.Unlock()
	if s.walShm == nil {
		s.walShm = newWALIndexFD(s.path)
	}
	return walFrames(s.walShm)
}
