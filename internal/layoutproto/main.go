// Command layoutproto measures the cost of a batch of message ids in three
// shapes of the ledger's processed_messages, outside jetledger, so that a
// new layout is chosen on figures (issue 45, BENCHMARKS.md):
//
//   - btree: today's table, clustered by message_id: each random id lands
//     on a leaf of its own, read and written;
//   - runs: clustered by (run, message_id), a run being the last few
//     thousand rows: a batch writes the newest run's few leaves;
//   - append: a rowid table in arrival order, no index on the id; every
//     -seal rows, a run's sorted 8-byte id fingerprints go in one blob.
//
// runs and append find ids through an in-memory set here (an ideal filter:
// a real one adds a probe per false positive). Each batch is one
// transaction, synchronous=FULL, WAL, with a background PASSIVE checkpoint
// every 100 ms, as the ledger runs. It prints msg/s and the WAL's peak.
//
//	go run ./internal/layoutproto -layout append -ids random -n 1000000
package main

import (
	"cmp"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"hash/fnv"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/oklog/ulid/v2"
	_ "modernc.org/sqlite"
)

var (
	layout  = flag.String("layout", "btree", "btree | runs | append")
	kind    = flag.String("ids", "random", "random | ulid")
	rows    = flag.Int("n", 0, "rows in the ledger before the timed batches")
	msgs    = flag.Int("msgs", 100000, "ids inserted, timed")
	batch   = flag.Int("batch", 500, "ids a transaction")
	runSize = flag.Int("k", 4096, "runs: rows of a run")
	seal    = flag.Int("seal", 50000, "append: rows of a run sealed with its fingerprints")
	dir     = flag.String("dir", filepath.Join(os.TempDir(), "layoutproto"), "where the files go; a pre-filled ledger is kept there and copied for each run")
	mmap    = flag.Int64("mmap", 0, "the writer's mmap_size")
)

const columns = `stream TEXT NOT NULL, stream_seq INTEGER NOT NULL, subject TEXT NOT NULL, payload_sha256 BLOB NOT NULL,
	processed_at INTEGER NOT NULL, last_seq INTEGER NOT NULL, last_seen_at INTEGER NOT NULL`

func schema() string {
	s := map[string]string{
		"btree":  `CREATE TABLE pm (message_id TEXT NOT NULL PRIMARY KEY, ` + columns + `) WITHOUT ROWID;`,
		"runs":   `CREATE TABLE pm (run INTEGER NOT NULL, message_id TEXT NOT NULL, ` + columns + `, PRIMARY KEY (run, message_id)) WITHOUT ROWID;`,
		"append": `CREATE TABLE pm (id INTEGER PRIMARY KEY, message_id TEXT NOT NULL, ` + columns + `); CREATE TABLE runs (run INTEGER PRIMARY KEY, fps BLOB NOT NULL);`,
	}[*layout]
	return s + `CREATE INDEX pm_last ON pm (stream, last_seq);`
}

func insertSQL() string {
	if *layout == "runs" {
		return `INSERT INTO pm (run, message_id, stream, stream_seq, subject, payload_sha256, processed_at, last_seq, last_seen_at) VALUES (?,?,?,?,?,?,?,?,?)`
	}
	return `INSERT INTO pm (message_id, stream, stream_seq, subject, payload_sha256, processed_at, last_seq, last_seen_at) VALUES (?,?,?,?,?,?,?,?)`
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "layoutproto:", err)
		os.Exit(1)
	}
}

func main() {
	flag.Parse()
	if !slices.Contains([]string{"btree", "runs", "append"}, *layout) || !slices.Contains([]string{"random", "ulid"}, *kind) {
		must(fmt.Errorf("-layout %q -ids %q: want btree, runs or append, and random or ulid", *layout, *kind))
	}
	must(os.MkdirAll(*dir, 0o755))
	base := filepath.Join(*dir, fmt.Sprintf("base-%s-%d.db", *layout, *rows))
	if _, err := os.Stat(base); err != nil {
		prefill(base)
	}
	path := filepath.Join(*dir, fmt.Sprintf("%s-%d.db", *layout, *rows))
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(path + suffix)
	}
	b, err := os.ReadFile(base)
	must(err)
	must(os.WriteFile(path, b, 0o644))
	syscall.Sync() // the copy's writeback is not the timed part's
	rate, wal := run(path)
	fmt.Printf("%s ids=%s n=%d: %.0f msg/s, WAL at most %d MiB\n", *layout, *kind, *rows, rate, wal>>20)
}

func open(path, extra string) *sql.DB {
	db, err := sql.Open("sqlite", path+fmt.Sprintf("?_pragma=mmap_size(%d)", *mmap)+
		"&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=cache_size(-32768)&_pragma=wal_autocheckpoint(0)&_pragma=busy_timeout(20000)&_txlock=immediate"+extra)
	must(err)
	db.SetMaxOpenConns(1)
	return db
}

var sum = make([]byte, 32)

// prefill writes n rows of random ids in two sorted sweeps (the bench's
// --ledger-rows does the same): leaves end part full, as random inserts
// leave them. In runs, old rows sit in runs of a million.
func prefill(path string) {
	start := time.Now()
	db := open(path, "&_pragma=synchronous(OFF)")
	defer db.Close()
	_, err := db.Exec(schema())
	must(err)
	step := ^uint64(0) / uint64(max(*rows, 1))
	for sweep := range 2 {
		rng := mrand.New(mrand.NewPCG(7, uint64(sweep)))
		tx, err := db.Begin()
		must(err)
		for i := sweep; i < *rows; i += 2 {
			id := fmt.Sprintf("%016x%016x", uint64(i)*step+rng.Uint64N(step/2+1), rng.Uint64())
			args := []any{id, "S", i + 1, "s.x", sum, 1, i + 1, 1}
			if *layout == "runs" {
				args = append([]any{int64(i / 1_000_000)}, args...)
			}
			_, err := tx.Exec(insertSQL(), args...)
			must(err)
		}
		must(tx.Commit())
	}
	_, err = db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	must(err)
	fmt.Fprintf(os.Stderr, "pre-filled %s with %d rows in %v\n", *layout, *rows, time.Since(start).Round(time.Second))
}

// ledger is the timed part's view of the ledger: the ids it holds (the
// ideal filter of runs and append), the newest run and the rows to seal.
type ledger struct {
	db       *sql.DB
	seen     map[string]bool
	run      int64
	inRun    int
	unsealed []string
	seq      int
}

// run inserts -msgs new ids in batches, with a background checkpoint, and
// returns msg/s and the WAL's peak size.
func run(path string) (rate float64, wal int64) {
	l := &ledger{db: open(path, ""), seen: map[string]bool{}, run: 1 << 20, seq: *rows + 1}
	defer l.db.Close()
	ck := open(path, "")
	defer ck.Close()
	var stop atomic.Bool
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for !stop.Load() {
			ck.Exec(`PRAGMA wal_checkpoint(PASSIVE)`) //nolint:errcheck // as the ledger's loop: tried again
			time.Sleep(100 * time.Millisecond)
		}
	}()
	next := newIDs()
	start := time.Now()
	for done := 0; done < *msgs; done += *batch {
		ids := make([]string, *batch)
		for i := range ids {
			ids[i] = next()
		}
		l.apply(ids)
		if fi, err := os.Stat(path + "-wal"); err == nil {
			wal = max(wal, fi.Size())
			if fi.Size() > 64<<20 { // the ledger's restartLongWAL
				l.db.Exec(`PRAGMA wal_checkpoint(PASSIVE)`) //nolint:errcheck // the next batch tries again
			}
		}
	}
	rate = float64(*msgs) / time.Since(start).Seconds()
	stop.Store(true)
	<-stopped
	return rate, wal
}

func newIDs() func() string {
	entropy := ulid.Monotonic(rand.Reader, 0)
	return func() string {
		if *kind == "ulid" {
			return ulid.MustNew(ulid.Now(), entropy).String()
		}
		var b [16]byte
		rand.Read(b[:]) //nolint:errcheck // crypto/rand does not fail
		return hex.EncodeToString(b[:])
	}
}

// apply is one batch's transaction: the lookup, then the inserts in key
// order (as the ledger's flush), and a run sealed when one is full.
func (l *ledger) apply(ids []string) {
	tx, err := l.db.Begin()
	must(err)
	if *layout == "btree" {
		args := make([]any, len(ids))
		for i := range ids {
			args[i] = ids[i]
		}
		found, err := tx.Query(`SELECT message_id, payload_sha256, stream, last_seq FROM pm WHERE message_id IN (`+
			strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",")+`)`, args...)
		must(err)
		for found.Next() {
			must(fmt.Errorf("id found again: random ids of 128 bits do not repeat"))
		}
		found.Close()
	} else {
		for _, id := range ids {
			if l.seen[id] {
				must(fmt.Errorf("id %s found again", id))
			}
		}
	}
	slices.Sort(ids)
	st, err := tx.Prepare(insertSQL())
	must(err)
	for _, id := range ids {
		args := []any{id, "S", l.seq, "s.x", sum, 1, l.seq, 1}
		l.seq++
		l.seen[id] = true
		switch *layout {
		case "runs":
			args = append([]any{l.run}, args...)
			if l.inRun++; l.inRun == *runSize {
				l.run, l.inRun = l.run+1, 0
			}
		case "append":
			l.unsealed = append(l.unsealed, id)
		}
		_, err := st.Exec(args...)
		must(err)
	}
	if len(l.unsealed) >= *seal {
		sealRun(tx, l.unsealed)
		l.unsealed = l.unsealed[:0]
	}
	must(tx.Commit())
}

// sealRun writes a run's sorted fingerprints (8 bytes of the id's hash, 4
// of its offset in the run) as one blob.
func sealRun(tx *sql.Tx, ids []string) {
	type fp struct {
		h   uint64
		off uint32
	}
	fps := make([]fp, len(ids))
	for i, id := range ids {
		h := fnv.New64a()
		h.Write([]byte(id))
		fps[i] = fp{h.Sum64(), uint32(i)}
	}
	slices.SortFunc(fps, func(a, b fp) int { return cmp.Compare(a.h, b.h) })
	blob := make([]byte, 0, 12*len(fps))
	for _, f := range fps {
		blob = binary.LittleEndian.AppendUint64(blob, f.h)
		blob = binary.LittleEndian.AppendUint32(blob, f.off)
	}
	_, err := tx.Exec(`INSERT INTO runs (fps) VALUES (?)`, blob)
	must(err)
}
