package ledger

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"modernc.org/sqlite"
)

// handlerGuard keeps a handler from taking over the batch transaction. An
// authorizer on the writer connection refuses, while a handler runs,
// transaction control (BEGIN, COMMIT, ROLLBACK, SAVEPOINT, RELEASE), ATTACH
// and DETACH, and pragmas that change the connection (synchronous,
// journal_mode, ...). SQLite asks the authorizer when it compiles a
// statement, so no comment or odd spelling hides one.
type handlerGuard struct {
	active atomic.Bool
	mu     sync.Mutex
	denied string // what the authorizer refused last, for the error
}

// readPragmas take an argument but change nothing.
var readPragmas = map[string]bool{
	"table_info": true, "table_xinfo": true, "index_info": true, "index_xinfo": true,
	"index_list": true, "foreign_key_list": true, "foreign_key_check": true, "integrity_check": true,
	"quick_check": true, "table_list": true,
}

func (g *handlerGuard) authorize(action sqlite.AuthorizerActionCode, arg1, arg2, _, _ string) sqlite.AuthorizerReturnCode {
	if !g.active.Load() {
		return sqlite.AuthorizerOK
	}
	var what string
	switch action {
	case sqlite.AuthTransaction:
		what = arg1 // BEGIN, COMMIT or ROLLBACK
	case sqlite.AuthSavepoint:
		what = arg1 + " " + arg2 // BEGIN/RELEASE/ROLLBACK and the savepoint's name
	case sqlite.AuthAttach:
		what = "ATTACH " + arg1
	case sqlite.AuthDetach:
		what = "DETACH " + arg1
	case sqlite.AuthPragma:
		if arg2 == "" || readPragmas[strings.ToLower(arg1)] {
			return sqlite.AuthorizerOK
		}
		what = fmt.Sprintf("PRAGMA %s = %s", arg1, arg2)
	default:
		return sqlite.AuthorizerOK
	}
	g.mu.Lock()
	g.denied = what
	g.mu.Unlock()
	return sqlite.AuthorizerDeny
}

// begin and end bracket a handler's run.
func (g *handlerGuard) begin() {
	g.mu.Lock()
	g.denied = ""
	g.mu.Unlock()
	g.active.Store(true)
}

func (g *handlerGuard) end() { g.active.Store(false) }

// explain turns an error from a statement the authorizer refused into one
// wrapping ErrTransactionControl.
func (g *handlerGuard) explain(err error) error {
	if err == nil || !g.active.Load() {
		return err
	}
	g.mu.Lock()
	what := g.denied
	g.mu.Unlock()
	var se *sqlite.Error
	if what == "" || !errors.As(err, &se) || se.Code()&0xff != sqliteAuth {
		return err
	}
	return fmt.Errorf("%w: %s (%v)", ErrTransactionControl, what, err)
}

// guardedConnector installs the guard's authorizer on every connection it
// opens, so a reconnected writer is guarded too.
type guardedConnector struct {
	driver.Connector
	guard *handlerGuard
}

func (c guardedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	r, ok := conn.(sqlite.AuthorizerRegisterer)
	if !ok {
		conn.Close()
		return nil, errors.New("ledger: the SQLite driver offers no authorizer")
	}
	if err := r.RegisterAuthorizer(c.guard.authorize); err != nil {
		conn.Close()
		return nil, fmt.Errorf("ledger: install authorizer: %w", err)
	}
	return conn, nil
}
