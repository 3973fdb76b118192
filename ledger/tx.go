package ledger

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Tx is the batch transaction as a handler sees it, positioned at the
// message's turn in the batch. It is the message's for as long as its
// handler runs: used after the handler returned (from a goroutine that
// outlived it, say) it fails with ErrTxDone.
type Tx struct {
	b    *batchTx
	p    *pass
	d    *Delivery       // the message being applied, for Enqueue
	ctx  context.Context // the handler's: the batch watchdog interrupts its statements
	done atomic.Bool
}

// batchTx is one batch's transaction and the statements bound to it.
type batchTx struct {
	s     *Store
	tx    *sql.Tx
	quiet context.Context      // never ends: see runCtx
	stmts map[string]*sql.Stmt // the handler's, bound to tx
	own   map[string]*sql.Stmt // the ledger's own, apart: a handler must not reach them through its cache
}

func newBatchTx(s *Store, tx *sql.Tx, quiet context.Context) *batchTx {
	return &batchTx{s: s, tx: tx, quiet: quiet, stmts: make(map[string]*sql.Stmt, 8), own: make(map[string]*sql.Stmt, 16)}
}

// maxCachedStmts bounds each statement cache; a handler building unique SQL
// per message gets no caching rather than unbounded memory.
const maxCachedStmts = 64

// stmtCache keeps statements prepared on the writer across batches: parsing
// was a quarter of the CPU time when every batch prepared its own. A batch
// binds one to its transaction with tx.StmtContext, which reuses the
// connection's prepared statement. Statements are prepared here only outside
// a batch (the writer's one connection is the batch's), so a batch notes
// the queries it had to prepare itself and the next batch adds them first.
//
// The authorizer judges a statement when it is compiled, and fill compiles
// outside a handler's window, where it lets everything through. That is
// sound only at the schema the batch compiled it at under the handler's
// rules: a trigger added in between would be compiled in unjudged. So the
// cache holds statements of one schema (the cookie: main's and temp's
// schema_version), and each batch, holding the write lock, drops it when
// the schema moved since the batch that noted them. A change after that
// makes SQLite recompile at the next step, inside the handler's window.
type stmtCache struct {
	mu      sync.Mutex
	stmts   map[string]*sql.Stmt
	pending []string
	cookie  schemaCookie // the schema of stmts and pending
}

// schemaCookie is the schema versions of the writer's main and temp schemas.
type schemaCookie struct{ main, temp int64 }

// readCookie reads the schema versions in the batch's transaction, on the
// writer's connection (temp is per connection).
func readCookie(ctx context.Context, tx *sql.Tx) (schemaCookie, error) {
	var c schemaCookie
	if err := tx.QueryRowContext(ctx, "PRAGMA main.schema_version").Scan(&c.main); err != nil {
		return c, err
	}
	err := tx.QueryRowContext(ctx, "PRAGMA temp.schema_version").Scan(&c.temp)
	return c, err
}

// atSchema drops the cache if its statements are of another schema than
// the batch's, read at the batch's start.
func (c *stmtCache) atSchema(cookie schemaCookie) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cookie == cookie {
		return
	}
	for _, st := range c.stmts {
		st.Close()
	}
	c.stmts, c.pending, c.cookie = nil, nil, cookie
}

func (c *stmtCache) get(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stmts[query]
}

// note queues a query for preparing before the next batch.
func (c *stmtCache) note(query string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.stmts)+len(c.pending) < maxCachedStmts {
		c.pending = append(c.pending, query)
	}
}

// fill prepares the noted queries on db, outside any transaction. A query
// that no longer prepares (its table dropped, say) is left out; the batch
// that runs it reports the error.
func (c *stmtCache) fill(ctx context.Context, db *sql.DB) {
	c.mu.Lock()
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	for _, q := range pending {
		if c.get(q) != nil {
			continue
		}
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			continue
		}
		c.mu.Lock()
		if c.stmts == nil {
			c.stmts = make(map[string]*sql.Stmt)
		}
		c.stmts[q] = st
		c.mu.Unlock()
	}
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.stmts {
		st.Close()
	}
	c.stmts = nil
}

// prepare returns query bound to this transaction: from the batch's own
// map, else the store's cache, else prepared now and noted for the cache.
func (b *batchTx) prepare(ctx context.Context, shared *stmtCache, local map[string]*sql.Stmt, query string) (*sql.Stmt, error) {
	if st, ok := local[query]; ok {
		return st, nil
	}
	var st *sql.Stmt
	if cached := shared.get(query); cached != nil {
		st = b.tx.StmtContext(ctx, cached)
	} else {
		var err error
		if st, err = b.tx.PrepareContext(ctx, query); err != nil {
			return nil, b.s.guard.explain(err)
		}
		shared.note(query)
	}
	if len(local) < maxCachedStmts {
		local[query] = st
	}
	return st, nil
}

// exec runs one of the ledger's own statements. They run without a context
// that can end: the driver watches a cancellable one with a goroutine per
// statement, which cost more than the statement.
func (b *batchTx) exec(query string, args ...any) (sql.Result, error) {
	st, err := b.prepare(b.quiet, &b.s.ownStmts, b.own, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(b.quiet, args...)
}

// query runs one of the ledger's own queries.
func (b *batchTx) query(query string, args ...any) (*sql.Rows, error) {
	st, err := b.prepare(b.quiet, &b.s.ownStmts, b.own, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(b.quiet, args...)
}

// stmt returns the handler's query bound to the transaction, and the
// context to run it under.
func (t *Tx) stmt(ctx context.Context, query string) (*sql.Stmt, context.Context, error) {
	if t.done.Load() {
		return nil, nil, ErrTxDone
	}
	ctx, err := t.runCtx(ctx)
	if err != nil {
		return nil, nil, err
	}
	st, err := t.b.prepare(ctx, &t.b.s.handlerStmts, t.b.stmts, query)
	return st, ctx, err
}

// runCtx is the context a handler's statement runs under. The handler's own
// context, the one ApplyBatch gave it, is watched by the batch's watchdog,
// which interrupts the statement running when it ends: the statement then
// runs under a context that cannot end, sparing the driver's goroutine per
// statement. Any other context is the driver's to watch.
func (t *Tx) runCtx(ctx context.Context) (context.Context, error) {
	if ctx != t.ctx || !t.b.s.guard.watched() {
		return ctx, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	return t.b.quiet, nil
}

// ownExec runs one of the ledger's own statements inside the handler's
// window (an outbox row, say), where the guard otherwise refuses writes to
// the ledger's tables.
func (t *Tx) ownExec(_ context.Context, query string, args ...any) (res sql.Result, err error) {
	if t.done.Load() {
		return nil, ErrTxDone
	}
	err = t.b.s.guard.ownStatement(func() error {
		res, err = t.b.exec(query, args...)
		return err
	})
	return res, err
}

// Time is when the ledger records the batch's messages as processed (their
// processed_at): one reading of the clock for the whole batch. A handler
// that stamps its rows with it agrees with the ledger, and gives every row
// of the batch one value, which InsertLater binds once.
func (t *Tx) Time() time.Time { return time.UnixMilli(t.p.rows.now) }

// ExecContext runs a statement in the batch transaction, as part of the
// message's change.
func (t *Tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, ctx, err := t.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

// QueryContext runs a query in the batch transaction.
func (t *Tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, ctx, err := t.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// QueryRowContext runs a single-row query in the batch transaction.
func (t *Tx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	st, rctx, err := t.stmt(ctx, query)
	if err != nil {
		// sql.Row carries no public constructor for an error: let the
		// transaction report a preparation error by preparing again, and
		// anything else (the Tx done, the context ended) through a context
		// ended before the query could run.
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		if !t.preparing(err) {
			cancel()
		}
		return t.b.tx.QueryRowContext(rctx, query, args...)
	}
	return st.QueryRowContext(rctx, args...)
}

// preparing says whether err came from preparing the query, while the
// handler's window is still open.
func (t *Tx) preparing(err error) bool {
	return !t.done.Load() && !errors.Is(err, ErrTxDone) && t.ctx.Err() == nil
}
