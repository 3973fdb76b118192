package ledger

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"modernc.org/sqlite"
)

// guard keeps the batch transaction and the ledger's settings the ledger's.
// It lives on the single writer connection:
//
//   - An authorizer refuses, while a handler runs, transaction control
//     (BEGIN, COMMIT, ROLLBACK, SAVEPOINT, RELEASE), ATTACH and DETACH,
//     pragmas that change the connection, and writes to the ledger's own
//     tables; and at any time after Open, pragmas that weaken durability
//     (synchronous, journal_mode, ...). SQLite asks the authorizer when it
//     compiles a statement, so no comment or odd spelling hides one.
//   - A commit hook refuses any commit while a batch is open but the
//     ledger's own, and a rollback hook notes a rollback the ledger did not
//     ask for: a conflict resolved by ROLLBACK (ON CONFLICT ROLLBACK, INSERT
//     OR ROLLBACK, RAISE(ROLLBACK)) ends the whole transaction without any
//     statement the authorizer could see, and the handler's next statements
//     would otherwise commit on their own.
type guard struct {
	handler atomic.Bool // a handler is running
	own     atomic.Bool // the ledger runs its own statement inside the handler's window
	sealed  atomic.Bool // Open is done: durability settings are fixed
	batch   atomic.Bool // a batch transaction is open and not being ended by the ledger
	lost    atomic.Bool // the open batch was rolled back behind the ledger's back
	wd      watchdog    // interrupts a handler's statement past the batch deadline

	mu     sync.Mutex
	denied string // what the authorizer refused last, for the error
	kind   error  // ErrTransactionControl or ErrFixedSetting

	recording atomic.Bool     // note the tables statements being compiled use
	tables    map[string]bool // under mu

	// settings are the values of fixed pragmas the ledger set: a statement
	// that sets one to the same value (a schema file's PRAGMA journal_mode =
	// WAL, say) changes nothing and passes.
	settings map[string][]string
}

// readPragmas take an argument but change nothing.
var readPragmas = map[string]bool{
	"table_info": true, "table_xinfo": true, "index_info": true, "index_xinfo": true,
	"index_list": true, "foreign_key_list": true, "foreign_key_check": true, "integrity_check": true,
	"quick_check": true, "table_list": true,
}

// fixedPragmas hold the durability and shape the ledger relies on: nobody
// changes them on the writer once it is open.
var fixedPragmas = map[string]bool{
	"synchronous": true, "journal_mode": true, "locking_mode": true, "writable_schema": true,
	"max_page_count": true, "auto_vacuum": true, "fullfsync": true, "checkpoint_fullfsync": true,
	"wal_autocheckpoint": true, "user_version": true, "schema_version": true, "journal_size_limit": true,
}

// ledgerTables are written only by the ledger's own statements.
var ledgerTables = map[string]bool{"processed_messages": true, "processed_messages_v1": true, "processed_runs": true, "processed_fingerprints": true, "conflicts": true, "dead_letters": true, "outbox": true, "jetledger_consumers": true, "jetledger_source_floors": true, "jetledger_changelog": true}

func (g *guard) authorize(action sqlite.AuthorizerActionCode, arg1, arg2, db, _ string) sqlite.AuthorizerReturnCode {
	if g.recording.Load() {
		g.record(action, arg1)
	}
	if action == sqlite.AuthPragma && arg2 != "" && g.sealed.Load() && !g.own.Load() && fixedPragmas[strings.ToLower(arg1)] &&
		!slices.Contains(g.settings[strings.ToLower(arg1)], strings.ToUpper(strings.Trim(arg2, `'"`))) {
		return g.deny(ErrFixedSetting, fmt.Sprintf("PRAGMA %s = %s", arg1, arg2))
	}
	switch action {
	case sqlite.AuthCreateTempTable, sqlite.AuthCreateTempView, sqlite.AuthCreateVTable, sqlite.AuthCreateTable, sqlite.AuthCreateView:
		// From anyone (a --schema too): a temp table, view or virtual table
		// of a ledger table's name would take the ledger's own unqualified
		// statements, and its rows would go with the connection. ("CREATE
		// TABLE temp.x" is a CREATE_TABLE in database temp.)
		temp := action == sqlite.AuthCreateTempTable || action == sqlite.AuthCreateTempView || db == "temp"
		if ledgerTables[strings.ToLower(arg1)] && (temp || action == sqlite.AuthCreateVTable) {
			return g.deny(ErrTransactionControl, "a table or view named as the ledger's table "+arg1)
		}
	}
	if !g.handler.Load() || g.own.Load() {
		return sqlite.AuthorizerOK
	}
	switch action {
	case sqlite.AuthTransaction:
		return g.deny(ErrTransactionControl, arg1) // BEGIN, COMMIT or ROLLBACK
	case sqlite.AuthSavepoint:
		return g.deny(ErrTransactionControl, arg1+" "+arg2) // BEGIN/RELEASE/ROLLBACK and the savepoint's name
	case sqlite.AuthAttach:
		return g.deny(ErrTransactionControl, "ATTACH "+arg1)
	case sqlite.AuthDetach:
		return g.deny(ErrTransactionControl, "DETACH "+arg1)
	case sqlite.AuthPragma:
		if arg2 != "" && !readPragmas[strings.ToLower(arg1)] {
			return g.deny(ErrTransactionControl, fmt.Sprintf("PRAGMA %s = %s", arg1, arg2))
		}
	case sqlite.AuthInsert, sqlite.AuthUpdate, sqlite.AuthDelete, sqlite.AuthDropTable, sqlite.AuthAlterTable:
		if ledgerTables[strings.ToLower(arg1)] {
			return g.deny(ErrTransactionControl, "a write to the ledger's table "+arg1)
		}
	case sqlite.AuthCreateTrigger, sqlite.AuthCreateTempTrigger:
		if ledgerTables[strings.ToLower(arg2)] {
			return g.deny(ErrTransactionControl, "a trigger on the ledger's table "+arg2)
		}
	}
	return sqlite.AuthorizerOK
}

// record notes the table an action reads or writes, triggers included:
// SQLite compiles a trigger's body into the statement that fires it.
func (g *guard) record(action sqlite.AuthorizerActionCode, table string) {
	switch action {
	case sqlite.AuthRead, sqlite.AuthInsert, sqlite.AuthUpdate, sqlite.AuthDelete:
		g.mu.Lock()
		g.tables[strings.ToLower(table)] = true
		g.mu.Unlock()
	}
}

func (g *guard) deny(kind error, what string) sqlite.AuthorizerReturnCode {
	g.mu.Lock()
	g.denied, g.kind = what, kind
	g.mu.Unlock()
	return sqlite.AuthorizerDeny
}

// commitHook refuses a commit while a batch is open: the only commit then is
// the ledger's, which closes the batch first. A non-zero answer turns the
// commit into a rollback.
func (g *guard) commitHook() int32 {
	if g.batch.Load() {
		return 1
	}
	return 0
}

// rollbackHook notes that the open batch was rolled back behind the ledger's
// back; the batch is then redone without the message that did it.
func (g *guard) rollbackHook() {
	if g.batch.Load() {
		g.lost.Store(true)
	}
}

// openBatch and closeBatch bracket a batch transaction; closeBatch comes
// before the ledger's own COMMIT or ROLLBACK, so the hooks let them through.
func (g *guard) openBatch() {
	g.lost.Store(false)
	g.batch.Store(true)
}

func (g *guard) closeBatch() { g.batch.Store(false) }

// enterHandler and leaveHandler bracket a handler's run.
func (g *guard) enterHandler() {
	g.mu.Lock()
	g.denied, g.kind = "", nil
	g.mu.Unlock()
	g.handler.Store(true)
	g.wd.enter()
}

func (g *guard) leaveHandler() {
	g.wd.leave()
	g.handler.Store(false)
}

// watched says whether the batch watchdog can interrupt a handler's
// statements on the writer.
func (g *guard) watched() bool { return g.wd.watched() }

// ownStatement runs one of the ledger's statements inside a handler's window
// (an outbox row, a dead letter cleared): the authorizer lets it write.
func (g *guard) ownStatement(f func() error) error {
	g.own.Store(true)
	defer g.own.Store(false)
	return f()
}

// explain turns an error from a statement the authorizer refused into one
// wrapping ErrTransactionControl or ErrFixedSetting.
func (g *guard) explain(err error) error {
	var se *sqlite.Error
	if err == nil || !errors.As(err, &se) || se.Code()&0xff != sqliteAuth {
		return err
	}
	g.mu.Lock()
	what, kind := g.denied, g.kind
	g.mu.Unlock()
	if kind == nil {
		return err
	}
	return fmt.Errorf("%w: %s (%v)", kind, what, err)
}

// guardedConnector installs the guard on every connection it opens, so a
// reconnected writer is guarded too.
type guardedConnector struct {
	driver.Connector
	guard *guard
}

func (c guardedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	a, ok := conn.(sqlite.AuthorizerRegisterer)
	h, ok2 := conn.(sqlite.HookRegisterer)
	if !ok || !ok2 {
		conn.Close()
		return nil, errors.New("ledger: the SQLite driver offers no authorizer or hooks")
	}
	if err := a.RegisterAuthorizer(c.guard.authorize); err != nil {
		conn.Close()
		return nil, fmt.Errorf("ledger: install authorizer: %w", err)
	}
	h.RegisterCommitHook(c.guard.commitHook)
	h.RegisterRollbackHook(c.guard.rollbackHook)
	// The writer's one connection; database/sql closes it only when the
	// store closes or it goes bad, never while a batch holds it, which is
	// the only time the watchdog uses the handle.
	c.guard.wd.attach(conn)
	return conn, nil
}
