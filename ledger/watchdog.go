package ledger

import (
	"context"
	"database/sql/driver"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// watchdog ends a handler's statement when the batch's work deadline
// passes, with one watcher per batch instead of the driver's goroutine per
// cancellable statement (which cost more than a short statement itself).
//
// The driver does not export sqlite3_interrupt, so the watchdog reads the
// connection's sqlite3 handle from the driver's conn (an unexported field,
// read with reflect) and calls the transpiled sqlite3_interrupt, which is
// safe from any goroutine. If a driver version lays its conn out
// differently, the handle is 0 and every statement keeps the driver's own
// cancellation (TestWatchdogIsArmed fails, so the change is seen).
type watchdog struct {
	mu      sync.Mutex
	db      atomic.Uintptr // the writer's sqlite3*, 0 when unknown
	tls     *libc.TLS      // the watchdog's own: a TLS is not safe for concurrent use
	handler bool           // a handler is running: its statements may be interrupted
	current uint64         // the watch in force; 0: none
	watches uint64         // watches started
}

// connHandle returns the sqlite3* of a modernc.org/sqlite connection, or 0.
func connHandle(conn driver.Conn) uintptr {
	v := reflect.ValueOf(conn)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return 0
	}
	f := v.Elem().FieldByName("db")
	if !f.IsValid() || f.Kind() != reflect.Uintptr {
		return 0
	}
	return uintptr(f.Uint())
}

// attach records the writer connection's handle.
func (w *watchdog) attach(conn driver.Conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.db.Store(connHandle(conn))
	if w.db.Load() != 0 && w.tls == nil {
		w.tls = libc.NewTLS()
	}
}

// watched says whether statements can be left to the watchdog.
func (w *watchdog) watched() bool { return w.db.Load() != 0 }

// interruptEvery is how often the watchdog repeats its interrupt after the
// deadline: SQLite forgets an interrupt that arrives between statements, and
// a handler may start another one.
const interruptEvery = time.Millisecond

// watch starts watching a batch whose work ends with ctx; the returned func
// stops it (once; later calls do nothing) and must be called before the
// batch's own statements after the work (the flush and COMMIT), which must
// not be interrupted.
func (w *watchdog) watch(ctx context.Context) (stop func()) {
	w.mu.Lock()
	w.watches++
	id := w.watches
	w.current = id
	w.mu.Unlock()
	done := make(chan struct{})
	stopAfter := context.AfterFunc(ctx, func() {
		t := time.NewTicker(interruptEvery)
		defer t.Stop()
		// The id keeps an interrupt started late, after stop, from landing
		// on the next watch's handler.
		for w.interrupt(id) {
			select {
			case <-t.C:
			case <-done:
				return
			}
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			stopAfter()
			w.mu.Lock()
			w.current = 0
			w.mu.Unlock()
			close(done)
		})
	}
}

// interrupt interrupts the running handler's statement, if a handler runs
// under watch id, and says whether that watch is still in force.
func (w *watchdog) interrupt(id uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.current != id {
		return false
	}
	if db := w.db.Load(); w.handler && db != 0 {
		sqlite3.Xsqlite3_interrupt(w.tls, db)
	}
	return true
}

// enter and leave bracket a handler's run; leave takes the lock, so no
// interrupt meant for the handler lands on the ledger's next statement.
func (w *watchdog) enter() {
	w.mu.Lock()
	w.handler = true
	w.mu.Unlock()
}

func (w *watchdog) leave() {
	w.mu.Lock()
	w.handler = false
	w.mu.Unlock()
}

func (w *watchdog) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.tls != nil {
		w.tls.Close()
		w.tls = nil
	}
	w.db.Store(0)
}
