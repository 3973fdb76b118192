package ledger

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"modernc.org/libc"
	"modernc.org/sqlite" // pure-Go driver, so CGO_ENABLED=0 builds work
)

// Defaults for Config fields left at their zero value.
const (
	BusyTimeoutDefault = 10 * time.Second
	// CommitTimeoutDefault bounds a batch's COMMIT when its Budget does not.
	CommitTimeoutDefault = 10 * time.Second
)

// Config configures a Store. The zero value is valid.
type Config struct {
	// BusyTimeout is how long a statement waits for another process's write
	// lock before failing. Default 10s.
	BusyTimeout time.Duration
	// Synchronous is SQLite's synchronous setting. Default "FULL": a commit
	// is on disk before it returns, which "ack only after commit" relies on.
	// With "NORMAL", a commit outside a pipelined batch (whose Pending
	// syncs the WAL) is on disk at the next checkpoint: once the WAL holds
	// 4 MiB, or 30 CheckpointIntervals later.
	Synchronous string
	// Logger receives warnings. Default slog.Default().
	Logger *slog.Logger
	// Now returns the current time; tests inject a clock. Default time.Now.
	Now func() time.Time
	// MaxSizeBytes caps the database file (SQLite's max_page_count, at 4 KiB
	// pages): writes past it fail with ErrFull instead of filling a small
	// disk. Default 0: no cap.
	MaxSizeBytes int64
	// CheckpointInterval is how often a background goroutine looks at the
	// WAL and copies it into the database once it holds 4 MiB not yet
	// copied, or 30 intervals after the last copy. Commits never checkpoint
	// themselves: a checkpoint inside a commit was the whole tail of the
	// commit latency. Default 1s.
	CheckpointInterval time.Duration
	// Sinks names the outbox sinks this store's dispatchers serve. When set,
	// an Enqueue (or EnqueueSuppressed, EnqueueReview) naming any other sink
	// fails at once with ErrUnknownSink, rather than leaving a row queued
	// that no dispatcher will ever claim: a typo is a handler error. Default
	// nil: any sink name is taken (a dispatcher in another process).
	Sinks []string
	// Changelog, when set, receives every write transaction's changes
	// before it commits (see Changelog), and the store writes only after
	// TakeOver. Default nil: a ledger of one host, which pays nothing.
	// A ledger kept by a changelog (its owner's or a standby's copy) opened
	// without one refuses every write with ErrChangelogCopy: a change made
	// there alone is not in the log, so the next owner would lack it.
	Changelog Changelog
	// LeaveChangelog opens a ledger kept by a changelog, without Changelog,
	// as a ledger of this host alone: its changelog position is cleared,
	// and the partition's standbys can no longer follow it (stop them
	// first). Default false.
	LeaveChangelog bool
	// Fence, when set, is asked right before each batch's COMMIT
	// (ApplyBatch, ApplyBatchPipelined): an error rolls the batch back, and
	// the batch fails with ErrFenced wrapping it. A plain run's lease is one
	// (a run paused past it wakes with a batch in hand that another run may
	// have applied meanwhile). Default nil: none.
	Fence func() error
}

// CheckpointIntervalDefault is the default Config.CheckpointInterval.
const CheckpointIntervalDefault = time.Second

// MinSizeBytes is the smallest Config.MaxSizeBytes: a new ledger's schema
// (48 KiB) with room for its first batches and a handler's tables.
const MinSizeBytes = 128 << 10

// maxPages is the max_page_count for a cap of maxBytes, in SQLite's
// default 4 KiB pages.
func maxPages(maxBytes int64) int64 { return max(maxBytes/4096, 1) }

// Store is an open ledger database. It is safe for concurrent use; writes are
// serialised through a single connection.
type Store struct {
	cfg          Config
	path         string
	writer       *sql.DB // one connection: SQLite has one writer anyway
	guard        *guard
	reader       *sql.DB // query_only connections for listings and stats
	checkpointer *sql.DB // one connection for background WAL checkpoints
	walMu        sync.Mutex
	walShm       *walIndexFD // the one look at the WAL of batches, prunes and the checkpoint loop (walLength)
	walKeep      time.Duration
	walKeepUntil time.Time // the writer keeps the WAL's size until then (keepWALSize)
	walKept      bool      // journal_size_limit is walKeptLimit
	log          *slog.Logger
	stop         chan struct{}
	stopped      chan struct{}
	closeOnce    sync.Once
	closeErr     error

	// utf8: text is stored as UTF-8, so SQLite orders ids as Go does
	// (bytewise); in a UTF-16 file (one shared with an application's
	// database) it orders their UTF-16, and lookup cannot skip by order.
	utf8 bool

	ownStmts, handlerStmts stmtCache // statements reused across batches
	adapt                  adapt     // how the next batch runs
	wal                    walSyncer // syncs the WAL for pipelined batches
	ckpt                   checkpointState
	changelog              *changelogState        // nil without Config.Changelog
	copyOf                 atomic.Pointer[string] // without Config.Changelog: the changelog keeping the file, which it may not write
	batchAsks              atomic.Int64           // batches that asked for the writer: a prune yields to them
	batchWaiting           atomic.Int64           // batches waiting for the writer now: a prune step ends early for them
	batchHeld              heldAverage            // how long batches hold the writer, lately: how early a prune step ends for them
	ids                    idIndex                // finds processed_messages rows by id
}

// checkpointState is what the background checkpoints have met.
type checkpointState struct {
	failures atomic.Int64 // in a row; 0 after a success
	ticks    atomic.Int64 // of the loop, checkpointing or not
}

//go:embed migrations/*.sql
var migrationFS embed.FS

// OpenExisting is Open of a ledger that must exist already: a tool that
// inspects one never creates an empty database by mistake. No file is the
// stat's error (fs.ErrNotExist) with the path.
func OpenExisting(file string, cfg Config) (*Store, error) {
	if _, err := os.Stat(file); err != nil {
		return nil, fmt.Errorf("ledger %s: %w", file, err)
	}
	return Open(file, cfg)
}

// Open opens (creating if needed) the ledger database at path and brings its
// schema up to date. The file is created with mode 0600.
func Open(file string, cfg Config) (*Store, error) {
	cfg, err := cfg.withDefaults(file)
	if err != nil {
		return nil, err
	}
	if err := create(file, cfg.BusyTimeout); err != nil {
		return nil, err
	}
	// SQLite names the WAL and its index after the file with symbolic
	// links resolved, and the pools open connections later, when the
	// working directory may have changed: one absolute, resolved path for
	// the connections, the WAL's fdatasync and the checks of its files.
	if real, err := filepath.Abs(file); err == nil {
		if r, err := filepath.EvalSymlinks(real); err == nil {
			real = r
		}
		file = real
	}
	s, err := openDBs(file, cfg)
	if err != nil {
		return nil, err
	}
	// Migrations wait at most for another process's lock, then a little more.
	ctx, cancel := context.WithTimeout(context.Background(), cfg.BusyTimeout+time.Minute)
	defer cancel()
	if err := s.migrate(ctx); err != nil {
		close(s.stopped)
		s.closeDBs()
		return nil, err
	}
	var encoding string
	if err := s.writer.QueryRowContext(ctx, "PRAGMA encoding").Scan(&encoding); err != nil {
		close(s.stopped)
		s.closeDBs()
		return nil, fmt.Errorf("ledger: read the text encoding of %s: %w", file, err)
	}
	s.utf8 = strings.EqualFold(encoding, "UTF-8")
	if cfg.Changelog != nil {
		s.changelog = &changelogState{log: cfg.Changelog, tls: libc.NewTLS()}
	} else if err := s.keptBy(ctx, cfg.LeaveChangelog); err != nil {
		close(s.stopped)
		s.closeDBs()
		return nil, err
	}
	s.guard.sealed.Store(true) // from here on the durability settings are fixed
	s.adapt.clean.Store(optimisticAfter)
	go s.checkpointLoop()
	return s, nil
}

// CheckPath refuses, before any I/O, a database path Open refuses: empty,
// or with '?' or '#', which SQLite would read as a URI's parts. The
// *ConfigError's Reason names the path as name, the caller's word for it
// ("--db").
func CheckPath(file, name string) error {
	var why string
	switch {
	case file == "":
		why = name + " needs a file path"
	case strings.ContainsAny(file, "?#"):
		why = fmt.Sprintf("%s %q: the path of a database file may not contain '?' or '#'", name, file)
	default:
		return nil
	}
	return &ConfigError{Reason: why, Err: fmt.Errorf("%w: database path %q must be a plain file path", ErrInvalidConfig, file)}
}

// withDefaults validates cfg and the path of the database file, before any
// I/O, and fills in the defaults of the fields left zero.
func (cfg Config) withDefaults(file string) (Config, error) {
	if err := CheckPath(file, "the path"); err != nil {
		return cfg, err
	}
	cfg.BusyTimeout = cmp.Or(cfg.BusyTimeout, BusyTimeoutDefault)
	cfg.CheckpointInterval = cmp.Or(cfg.CheckpointInterval, CheckpointIntervalDefault)
	cfg.Synchronous = strings.ToUpper(cmp.Or(cfg.Synchronous, "FULL"))
	switch cfg.Synchronous {
	case "OFF", "NORMAL", "FULL", "EXTRA":
	default:
		return cfg, fmt.Errorf("%w: synchronous %q: want OFF, NORMAL, FULL or EXTRA", ErrInvalidConfig, cfg.Synchronous)
	}
	if cfg.BusyTimeout < 0 || cfg.CheckpointInterval < 0 || cfg.MaxSizeBytes < 0 {
		return cfg, fmt.Errorf("%w: timeouts and MaxSizeBytes must not be negative", ErrInvalidConfig)
	}
	if cfg.MaxSizeBytes > 0 && cfg.MaxSizeBytes < MinSizeBytes {
		return cfg, fmt.Errorf("%w: MaxSizeBytes %d is below the %d bytes a new ledger needs", ErrInvalidConfig, cfg.MaxSizeBytes, MinSizeBytes)
	}
	if slices.Contains(cfg.Sinks, "") {
		return cfg, fmt.Errorf("%w: Sinks names an empty sink", ErrInvalidConfig)
	}
	cfg.Sinks = slices.Clone(cfg.Sinks)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return cfg, nil
}

// writerCacheBytes is the writer's page cache without a heap limit: a
// batch of random ids (webhook providers', UUIDv4s) dirties a leaf per id
// in the ledger's and events' id indexes, 1 500 pages for a batch of 500,
// and SQLite's default 2 MiB cache spilled them mid-transaction and read
// them back: random ids ran at two thirds of the speed they do with this
// (BENCHMARKS.md, issue 45). The cache grows only as pages are used.
const writerCacheBytes = 32 << 20

// writerCache is the writer's page cache for a store opened now:
// writerCacheBytes, or a quarter of SQLite's heap limit (SetHeapLimit) if
// that is less: SQLite's default 2 MiB under the edge's 8 MiB, as before
// this cache grew. The limit itself is not enforced by this build, so this
// is what keeps the process within it.
func writerCache() (int64, error) {
	limit, err := HeapLimit()
	if err != nil || limit <= 0 {
		return writerCacheBytes, err
	}
	return min(writerCacheBytes, limit/4), nil
}

// openDBs opens the store's three connection pools on file: the one writer
// (guarded, its durability settings checked), the readers and the
// checkpointer. The schema is not read yet.
func openDBs(file string, cfg Config) (*Store, error) {
	// temp_store=MEMORY keeps savepoint sub-journals off disk: with one
	// savepoint per message they were a third of the CPU time in pwrite.
	// auto_vacuum is set once, by create: as a connection pragma it writes
	// the header, so every new connection would wait for the write lock.
	pragmas := fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=synchronous(%s)&_pragma=foreign_keys(ON)&_pragma=temp_store(MEMORY)",
		cfg.BusyTimeout.Milliseconds(), cfg.Synchronous)
	// BEGIN IMMEDIATE takes the write lock up front, so two processes sharing
	// the file wait on busy_timeout instead of failing on a lock upgrade.
	// journal_size_limit: the WAL file is reused from its start once
	// checkpointed, but keeps the size of its largest burst (a prune, a
	// backlog): 60 MB after minutes at an edge. Past the limit it is cut
	// back when it is reused.
	cache, err := writerCache()
	if err != nil {
		return nil, fmt.Errorf("ledger: open %s: %w", file, err)
	}
	writerDSN := file + "?" + pragmas + fmt.Sprintf("&_pragma=wal_autocheckpoint(0)&_pragma=journal_size_limit(%d)&_pragma=cache_size(%d)&_txlock=immediate",
		walSizeLimit, -cache>>10)
	if cfg.MaxSizeBytes > 0 {
		writerDSN += fmt.Sprintf("&_pragma=max_page_count(%d)", maxPages(cfg.MaxSizeBytes))
	}
	base, err := sqlite.NewConnector(writerDSN)
	if err != nil {
		return nil, fmt.Errorf("ledger: open %s: %w", file, err)
	}
	g := &guard{settings: map[string][]string{
		"journal_mode": {"WAL"},
		"synchronous":  {cfg.Synchronous, fmt.Sprint(map[string]int{"OFF": 0, "NORMAL": 1, "FULL": 2, "EXTRA": 3}[cfg.Synchronous])},
	}}
	writer := sql.OpenDB(guardedConnector{Connector: base, guard: g})
	writer.SetMaxOpenConns(1)
	writer.SetConnMaxIdleTime(0)
	writer.SetConnMaxLifetime(0)
	reader, err := sql.Open("sqlite", file+"?"+pragmas+"&_pragma=query_only(ON)")
	if err != nil {
		writer.Close()
		return nil, fmt.Errorf("ledger: open %s: %w", file, err)
	}
	reader.SetMaxOpenConns(4)
	checkpointer, err := sql.Open("sqlite", file+"?"+pragmas)
	if err != nil {
		writer.Close()
		reader.Close()
		return nil, fmt.Errorf("ledger: open %s: %w", file, err)
	}
	checkpointer.SetMaxOpenConns(1)
	return &Store{cfg: cfg, path: file, writer: writer, guard: g, reader: reader, checkpointer: checkpointer, log: cfg.Logger, walKeep: walKeep,
		stop: make(chan struct{}), stopped: make(chan struct{}), wal: walSyncer{path: file + "-wal"}}, nil
}

// create makes a new database file, not world-readable (it holds payloads),
// with auto_vacuum=INCREMENTAL, which lets Prune hand freed pages back to
// the disk; it can only be set before the file switches to WAL mode.
func create(file string, busy time.Duration) error {
	f, err := os.OpenFile(file, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("ledger: open %s: %w", file, err)
	}
	fi, err := f.Stat()
	f.Close()
	if err != nil {
		return fmt.Errorf("ledger: open %s: %w", file, err)
	}
	if fi.Size() > 0 {
		return nil
	}
	db, err := sql.Open("sqlite", fmt.Sprintf("%s?_pragma=busy_timeout(%d)", file, busy.Milliseconds()))
	if err != nil {
		return fmt.Errorf("ledger: create %s: %w", file, err)
	}
	defer db.Close()
	// Another process creating it at the same moment can make the switch to
	// WAL fail at once with SQLITE_BUSY, without waiting: try again.
	ctx, cancel := context.WithTimeout(context.Background(), busy)
	defer cancel()
	retry := ackwait.Backoff{Base: 10 * time.Millisecond, Max: 200 * time.Millisecond}
	for n := 1; ; n++ {
		_, err := db.Exec("PRAGMA auto_vacuum = INCREMENTAL; PRAGMA journal_mode = WAL")
		if err = interpret(err); err != nil && errors.Is(err, ErrBusy) && retry.Wait(ctx, n) {
			continue
		}
		if err != nil {
			return fmt.Errorf("ledger: create %s: %w", file, err)
		}
		return nil
	}
}

// checkpointLoop copies the WAL into the database in the background. PASSIVE
// never blocks the writer or readers; what it cannot copy now it copies later.
// A failing checkpoint (a full or read-only disk) is retried with backoff,
// said once at warn with its cause, again only when the cause changes, and
// its recovery once at info.
func (s *Store) checkpointLoop() {
	defer close(s.stopped)
	t := time.NewTimer(s.cfg.CheckpointInterval)
	defer t.Stop()
	retry := ackwait.Backoff{Base: s.cfg.CheckpointInterval, Max: max(checkpointBackoffMax, s.cfg.CheckpointInterval)}
	var cause error // the failure last said
	var since time.Time
	skipped := 0
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.ckpt.ticks.Add(1)
		due, next := s.checkpointDue(skipped+1, s.cfg.CheckpointInterval) // skips ticks while the WAL is small
		if cause == nil && !due {
			skipped++
			t.Reset(next)
			continue
		}
		skipped = 0
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.BusyTimeout)
		err := s.checkpoint(ctx)
		cancel()
		switch {
		case err != nil:
			n := s.ckpt.failures.Add(1)
			err = interpret(err) // never the cap: the pages it copies are in it already
			if cause == nil || condition(err) != condition(cause) {
				s.log.Warn("ledger: WAL checkpoint failed; the WAL grows until it succeeds: free space on the disk or make the database writable. Retrying with backoff, said again only when the cause changes",
					"db", s.path, "err", err)
				cause, since = err, time.Now()
			}
			next = retry.Delay(int(n))
		case cause != nil:
			s.log.Info("ledger: WAL checkpoint succeeds again", "db", s.path, "failed_attempts", s.ckpt.failures.Load(),
				"failing_for", time.Since(since).Round(time.Millisecond))
			s.ckpt.failures.Store(0)
			cause = nil
		}
		t.Reset(next)
	}
}

// checkpoint runs one PASSIVE checkpoint. A connection whose checkpoint
// failed is closed, not pooled, and the next attempt opens a new one: SQLite
// opens a database file it cannot open read-write (immutable, a read-only
// mount) read-only, silently, and a checkpoint on that connection fails
// (SQLITE_IOERR_WRITE) for as long as it lives, long after the file is
// writable again.
func (s *Store) checkpoint(ctx context.Context) error {
	c, err := s.checkpointer.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err = c.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)"); err != nil {
		discard(c)
	}
	return err
}

// discard closes c's driver connection instead of handing it back to its
// pool.
func discard(c *sql.Conn) { c.Raw(func(any) error { return driver.ErrBadConn }) }

// walSizeLimit is the WAL file's size kept after it is reused (SQLite's
// journal_size_limit); walKeptLimit while batches come back to back
// (keepWALSize), for walKeep after the WAL was last long.
const (
	walSizeLimit = 16 << 20
	walKeptLimit = 1 << 30
	walKeep      = 30 * time.Second
)

// checkpointBackoffMax bounds the wait between failing checkpoints.
const checkpointBackoffMax = 30 * time.Second

// condition is the ledger sentinel an error is, for telling one failure's
// cause from another's; nil for another error.
func condition(err error) error {
	for _, c := range []error{ErrAtMaxSize, ErrFull, ErrReadOnly, ErrIO, ErrBusy} {
		if errors.Is(err, c) {
			return c
		}
	}
	return nil
}

// Path returns the database file's path.
func (s *Store) Path() string { return s.path }

// Close stops the background checkpoints, checkpoints once more and closes
// the database.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		<-s.stopped
		if s.changelog != nil {
			s.changelog.landed(context.Background()) //nolint:errcheck // bounded by its publish's own
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.BusyTimeout)
		defer cancel()
		cerr := s.checkpoint(ctx)
		s.closeErr = errors.Join(cerr, s.closeDBs())
		if s.changelog != nil {
			s.changelog.tls.Close()
		}
	})
	return s.closeErr
}

func (s *Store) closeDBs() error {
	s.ownStmts.close()
	s.handlerStmts.close()
	defer s.guard.wd.close()
	defer s.wal.close()
	return errors.Join(s.writer.Close(), s.reader.Close(), s.checkpointer.Close())
}

// Exec runs statements of the caller's (a schema, say) on the writer,
// outside any batch. The ledger's durability settings are fixed: a pragma
// that would change one fails with an error wrapping ErrFixedSetting.
func (s *Store) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	res, err := s.writer.ExecContext(ctx, query, args...)
	return res, interpret(s.guard.explain(err))
}

// DB returns the single writer connection pool, for callers that manage their
// own tables in the same file (a handler's schema, say). Writes through it
// are serialised with the ledger's own.
func (s *Store) DB() *sql.DB { return s.writer }

type migration struct {
	version int
	name    string
	sql     string
}

func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range entries {
		var v int
		if _, err := fmt.Sscanf(e.Name(), "%04d_", &v); err != nil {
			return nil, fmt.Errorf("ledger: migration %s: name must start with a 4-digit number", e.Name())
		}
		b, err := migrationFS.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("ledger: migration %s: expected number %d", m.name, i+1)
		}
	}
	return ms, nil
}

// apply runs one migration unless another process did meanwhile: the
// version is read again inside the migration's write transaction.
func (s *Store) apply(ctx context.Context, m migration) error {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	var have int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&have); err != nil {
		return err
	}
	if have >= m.version {
		return nil
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return err
	}
	// PRAGMA takes no bound parameters; the version is our own integer.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", m.version)); err != nil {
		return err
	}
	return tx.Commit()
}

// SchemaVersion is the schema version this build writes.
func SchemaVersion() int {
	ms, err := migrations()
	if err != nil {
		panic(err) // embedded at build time; a bad name is a build bug
	}
	return len(ms)
}

func (s *Store) migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	var have int
	if err := s.writer.QueryRowContext(ctx, "PRAGMA user_version").Scan(&have); err != nil {
		return fmt.Errorf("ledger: read schema version of %s: %w", s.path, err)
	}
	if have > len(ms) {
		return fmt.Errorf("%w: %s has schema version %d, this build knows up to %d; use a newer jetledger",
			ErrSchemaTooNew, s.path, have, len(ms))
	}
	for _, m := range ms[have:] {
		if err := s.apply(ctx, m); err != nil {
			return fmt.Errorf("ledger: migration %s: %w", m.name, err)
		}
	}
	return nil
}
