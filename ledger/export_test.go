package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// UseSavepoints makes the store's next batches run with a savepoint per
// message (on) or optimistically (off), so tests cover both paths.
func UseSavepoints(s *Store, on bool) {
	if on {
		s.adapt.clean.Store(0)
	} else {
		s.adapt.clean.Store(optimisticAfter)
	}
}

// WatchdogArmed says whether the batch watchdog found the writer's handle.
func WatchdogArmed(s *Store) bool { return s.guard.watched() }

// CachedStatements counts the statements kept across batches: the ledger's
// own and the handlers'.
func CachedStatements(s *Store) (own, handler int) {
	count := func(c *stmtCache) int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.stmts)
	}
	return count(&s.ownStmts), count(&s.handlerStmts)
}

// CheckpointFailures is how many background checkpoints in a row failed.
func CheckpointFailures(s *Store) int { return int(s.ckpt.failures.Load()) }

// RenewCheckpointConn closes the background checkpoints' connection and
// opens their next one now, so a test decides what state the database file
// is in when that connection opens it.
func RenewCheckpointConn(s *Store) error {
	ctx := context.Background()
	old, err := s.checkpointer.Conn(ctx) // waits out a checkpoint in flight: one connection
	if err != nil {
		return err
	}
	discard(old)
	old.Close()
	c, err := s.checkpointer.Conn(ctx)
	if err != nil {
		return err
	}
	return errors.Join(c.PingContext(ctx), c.Close())
}

// ExecStoppedMidWrite runs query in a write transaction (writeTxExec) and
// stops it (cancels ctx) after the statement, before the commit: as a
// run's stop lands mid-write.
func ExecStoppedMidWrite(s *Store, query string) error {
	ctx, cancel := context.WithCancel(context.Background())
	_, err := s.writeTxExec(ctx, func(*writeTx, sql.Result) error {
		cancel()
		return nil
	}, query)
	return err
}

// HoldWriter takes the writer's one connection until the func returned.
func HoldWriter(s *Store) func() {
	c, err := s.writer.Conn(context.Background())
	if err != nil {
		panic(err)
	}
	return func() { c.Close() }
}

// WriterWaits is how many times a caller has waited for the writer's
// connection.
func WriterWaits(s *Store) int64 { return s.writer.Stats().WaitCount }

// CacheSpills is how many dirty pages the writer has written out in the
// middle of a transaction since it opened, for want of room in its page
// cache (SQLITE_DBSTATUS_CACHE_SPILL). Call it with the writer idle.
func CacheSpills(s *Store) (int, error) {
	return writerStatus(s, sqlite3.SQLITE_DBSTATUS_CACHE_SPILL)
}

// WriterCacheUsed is the writer's page cache in bytes
// (SQLITE_DBSTATUS_CACHE_USED). Call it with the writer idle.
func WriterCacheUsed(s *Store) (int, error) {
	return writerStatus(s, sqlite3.SQLITE_DBSTATUS_CACHE_USED)
}

// writerStatus reads one of sqlite3_db_status's counters of the writer.
func writerStatus(s *Store, op int32) (int, error) {
	db := s.guard.wd.db.Load()
	if db == 0 {
		return 0, errors.New("the writer's handle is unknown")
	}
	tls := libc.NewTLS()
	defer tls.Close()
	p := libc.Xmalloc(tls, 8)
	defer libc.Xfree(tls, p)
	if rc := sqlite3.Xsqlite3_db_status(tls, db, op, p, p+4, 0); rc != sqlite3.SQLITE_OK {
		return 0, fmt.Errorf("sqlite3_db_status: %d", rc)
	}
	return int(*(*int32)(cptr(p))), nil
}
