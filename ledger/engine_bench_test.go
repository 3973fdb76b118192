package ledger

// What calling SQLite's engine directly (modernc.org/sqlite/lib, as
// zombiezen.com/go/sqlite does) would buy the writer over database/sql with
// modernc's driver, on the shape of the ledger's own work per batch: one
// multi-row insert of the batch's ledger rows, then one handler statement
// per message (the balance upsert of jetledger bench), then the commit.
// synchronous=OFF: the layer's CPU is measured, not the disk.
//
//	go test -run XXX -bench Engine -count 5 ./ledger

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

const (
	engineBatch  = 500
	engineSchema = `PRAGMA journal_mode = WAL; PRAGMA synchronous = OFF;
		CREATE TABLE rows (id TEXT PRIMARY KEY, stream TEXT, seq INTEGER, hash BLOB, at INTEGER) WITHOUT ROWID;
		CREATE TABLE balances (account TEXT PRIMARY KEY, amount INTEGER NOT NULL)`
	engineApply = `INSERT INTO balances (account, amount) VALUES (json_extract(?1, '$.account'), json_extract(?1, '$.amount'))
		ON CONFLICT (account) DO UPDATE SET amount = amount + excluded.amount`
)

func engineRowsSQL() string {
	return "INSERT INTO rows (id, stream, seq, hash, at) VALUES " + strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?), ", engineBatch), ", ")
}

type engineMsg struct {
	id   string
	hash []byte
	data string
}

func engineMsgs(batch int) []engineMsg {
	ms := make([]engineMsg, engineBatch)
	for i := range ms {
		n := batch*engineBatch + i
		ms[i] = engineMsg{id: fmt.Sprintf("01JXBENCH%017d", n), hash: make([]byte, 32),
			data: fmt.Sprintf(`{"account":"acct-%d","amount":%d,"n":%d}`, n%100, 1+n%1000, n)}
	}
	return ms
}

func BenchmarkEngineDatabaseSQL(b *testing.B) {
	db, err := sql.Open("sqlite", filepath.Join(b.TempDir(), "e.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(engineSchema); err != nil {
		b.Fatal(err)
	}
	rows, err := db.Prepare(engineRowsSQL())
	if err != nil {
		b.Fatal(err)
	}
	apply, err := db.Prepare(engineApply)
	if err != nil {
		b.Fatal(err)
	}
	args := make([]any, 0, 5*engineBatch)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		ms := engineMsgs(i)
		b.StartTimer()
		tx, err := db.Begin()
		if err != nil {
			b.Fatal(err)
		}
		args = args[:0]
		for _, m := range ms {
			args = append(args, m.id, "BENCH", int64(i), m.hash, int64(1))
		}
		if _, err := tx.Stmt(rows).Exec(args...); err != nil {
			b.Fatal(err)
		}
		a := tx.Stmt(apply)
		for _, m := range ms {
			if _, err := a.Exec(m.data); err != nil {
				b.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*engineBatch), "ns/msg")
}

// engineConn is the least a direct caller needs: a connection and its
// thread-local state.
type engineConn struct {
	tls *libc.TLS
	db  uintptr
}

func (c engineConn) check(b *testing.B, rc int32) {
	if rc != sqlite3.SQLITE_OK && rc != sqlite3.SQLITE_DONE && rc != sqlite3.SQLITE_ROW {
		b.Fatalf("sqlite rc %d: %s", rc, libc.GoString(sqlite3.Xsqlite3_errmsg(c.tls, c.db)))
	}
}

func (c engineConn) exec(b *testing.B, q string) {
	s := cstring(b, q)
	defer libc.Xfree(c.tls, s)
	c.check(b, sqlite3.Xsqlite3_exec(c.tls, c.db, s, 0, 0, 0))
}

func (c engineConn) prepare(b *testing.B, q string) uintptr {
	s := cstring(b, q)
	defer libc.Xfree(c.tls, s)
	pp := libc.Xmalloc(c.tls, 8)
	defer libc.Xfree(c.tls, pp)
	c.check(b, sqlite3.Xsqlite3_prepare_v3(c.tls, c.db, s, -1, sqlite3.SQLITE_PREPARE_PERSISTENT, pp, 0))
	return *(*uintptr)(cptr(pp))
}

func cstring(b *testing.B, s string) uintptr {
	p, err := libc.CString(s)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// bindText binds s, copied by SQLite (SQLITE_TRANSIENT) from a scratch
// buffer in C memory: Go memory cannot be handed to the engine.
func (c engineConn) bindText(b *testing.B, st uintptr, i int32, s string, scratch *uintptr, size *int) {
	c.bindBytes(b, st, i, unsafe.Slice(unsafe.StringData(s), len(s)), scratch, size, true)
}

func (c engineConn) bindBytes(b *testing.B, st uintptr, i int32, v []byte, scratch *uintptr, size *int, text bool) {
	if len(v) > *size {
		libc.Xfree(c.tls, *scratch)
		*size = max(2*len(v), 256)
		*scratch = libc.Xmalloc(c.tls, uint64(*size))
	}
	copy(unsafe.Slice((*byte)(cptr(*scratch)), len(v)), v)
	const transient = ^uintptr(0) // SQLITE_TRANSIENT: (void*)-1
	if text {
		c.check(b, sqlite3.Xsqlite3_bind_text(c.tls, st, i, *scratch, int32(len(v)), transient))
	} else {
		c.check(b, sqlite3.Xsqlite3_bind_blob(c.tls, st, i, *scratch, int32(len(v)), transient))
	}
}

func BenchmarkEngineDirect(b *testing.B) {
	c := engineConn{tls: libc.NewTLS()}
	defer c.tls.Close()
	path := cstring(b, filepath.Join(b.TempDir(), "e.db"))
	pdb := libc.Xmalloc(c.tls, 8)
	c.check(b, sqlite3.Xsqlite3_open_v2(c.tls, path, pdb, sqlite3.SQLITE_OPEN_READWRITE|sqlite3.SQLITE_OPEN_CREATE, 0))
	c.db = *(*uintptr)(cptr(pdb))
	libc.Xfree(c.tls, pdb)
	libc.Xfree(c.tls, path)
	defer sqlite3.Xsqlite3_close_v2(c.tls, c.db)
	c.exec(b, engineSchema)
	rows, apply := c.prepare(b, engineRowsSQL()), c.prepare(b, engineApply)
	defer sqlite3.Xsqlite3_finalize(c.tls, rows)
	defer sqlite3.Xsqlite3_finalize(c.tls, apply)
	begin, commit := c.prepare(b, "BEGIN IMMEDIATE"), c.prepare(b, "COMMIT")
	defer sqlite3.Xsqlite3_finalize(c.tls, begin)
	defer sqlite3.Xsqlite3_finalize(c.tls, commit)
	var scratch uintptr
	var size int
	defer func() { libc.Xfree(c.tls, scratch) }()
	step := func(st uintptr) {
		c.check(b, sqlite3.Xsqlite3_step(c.tls, st))
		c.check(b, sqlite3.Xsqlite3_reset(c.tls, st))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		ms := engineMsgs(i)
		b.StartTimer()
		step(begin)
		for j, m := range ms {
			k := int32(5*j + 1)
			c.bindText(b, rows, k, m.id, &scratch, &size)
			c.bindText(b, rows, k+1, "BENCH", &scratch, &size)
			c.check(b, sqlite3.Xsqlite3_bind_int64(c.tls, rows, k+2, int64(i)))
			c.bindBytes(b, rows, k+3, m.hash, &scratch, &size, false)
			c.check(b, sqlite3.Xsqlite3_bind_int64(c.tls, rows, k+4, 1))
		}
		step(rows)
		for _, m := range ms {
			c.bindText(b, apply, 1, m.data, &scratch, &size)
			step(apply)
		}
		step(commit)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*engineBatch), "ns/msg")
}
