package ledger

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"modernc.org/sqlite"
)

// BackupStepPagesDefault is BackupOptions.StepPages when it is zero: 4 MiB
// of 4 KiB pages per step.
const BackupStepPagesDefault = 1024

// BackupOptions configure Backup. The zero value is valid.
type BackupOptions struct {
	// Force replaces a file already at the destination. Default false: the
	// backup fails with ErrBackupExists and leaves the file alone.
	Force bool
	// StepPages is how many pages one step of SQLite's online backup copies;
	// ctx is checked and Progress called between steps. Default
	// BackupStepPagesDefault.
	StepPages int
	// Progress, if set, is called after every step with the pages copied so
	// far and the pages of the snapshot being copied.
	Progress func(copied, total int)
	// Names say the settings in the caller's words in an error: "To" (the
	// destination) and "StepPages" in a *ConfigError's Reason, "Force" in
	// the ErrBackupExists of a file at the destination, which it replaces.
	// A setting not in it is said as itself.
	Names map[string]string
}

// BackupResult says what a backup wrote. Its counts are read from the copy,
// after it was checked.
type BackupResult struct {
	Path      string           `json:"path"`       // the copy
	SizeBytes int64            `json:"size_bytes"` // the copy's file
	Pages     int              `json:"pages"`
	Rows      int64            `json:"rows"`   // all rows of all tables
	Tables    map[string]int64 `json:"tables"` // rows per table, the handler's tables included
	Elapsed   time.Duration    `json:"elapsed_ns"`
}

// Backup writes a consistent copy of the ledger, with every committed
// transaction of the WAL, to the file to, safely while the ledger is being
// written (by this Store or another process).
//
// The copy is one snapshot: SQLite's online backup API runs on a connection
// whose read transaction stays open for the whole copy. In WAL mode a reader
// never blocks the writer; it only keeps checkpoints from resetting the WAL
// until it ends. The backup API starts over when its source changes between
// two steps; the snapshot cannot change, so it never does, and a restart
// would fail the backup rather than mix two states. It is written to a temporary file beside to, checked (PRAGMA
// integrity_check), synced, and renamed into place, and the directory is
// synced: a crash leaves either no copy or a whole one, never a torn file.
// The copy has mode 0600. An existing file at to is replaced only with
// opt.Force (ErrBackupExists otherwise); to must not be the ledger itself.
func (s *Store) Backup(ctx context.Context, to string, opt BackupOptions) (BackupResult, error) {
	start := time.Now()
	step := cmp.Or(opt.StepPages, BackupStepPagesDefault)
	if step < 0 {
		return BackupResult{}, opt.refuse("StepPages", opt.StepPages, "backup step of %d pages", opt.StepPages)
	}
	if err := s.checkBackupTarget(to, opt); err != nil {
		return BackupResult{}, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(to), "."+filepath.Base(to)+".backup-*") // mode 0600
	if err != nil {
		return BackupResult{}, fmt.Errorf("ledger: backup to %s: %w", to, err)
	}
	tmp.Close()
	done := false
	defer func() {
		if !done {
			removeDatabaseFiles(tmp.Name())
		}
	}()
	if err := s.copySnapshot(ctx, tmp.Name(), int32(min(step, math.MaxInt32)), opt.Progress); err != nil {
		return BackupResult{}, fmt.Errorf("ledger: backup of %s to %s: %w", s.path, to, err)
	}
	res, err := checkCopy(ctx, tmp.Name())
	if err != nil {
		return BackupResult{}, fmt.Errorf("ledger: backup of %s to %s: %w", s.path, to, err)
	}
	if err := syncFile(tmp.Name()); err != nil {
		return BackupResult{}, fmt.Errorf("ledger: backup to %s: %w", to, err)
	}
	if err := place(tmp.Name(), to, opt.Force); err != nil {
		return BackupResult{}, err
	}
	done = true
	if err := syncDir(filepath.Dir(to)); err != nil {
		return BackupResult{}, fmt.Errorf("ledger: backup to %s: %w", to, err)
	}
	res.Path, res.Elapsed = to, time.Since(start)
	return res, nil
}

// copySnapshot copies the ledger into the empty file tmp with the online
// backup API, in steps of step pages, inside one read transaction.
func (s *Store) copySnapshot(ctx context.Context, tmp string, step int32, progress func(copied, total int)) error {
	conn, err := s.reader.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	// BEGIN is deferred: the read of the schema starts the snapshot. Steps
	// then copy from it: backup_step uses a read transaction already open on
	// its source and starts (and, when the source moved, restarts) only when
	// there is none.
	if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
		return err
	}
	defer func() {
		// A connection back in the pool with its snapshot still open would
		// keep every checkpoint short of it: drop it instead.
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
			conn.Raw(func(any) error { return driver.ErrBadConn }) //nolint:errcheck // the error is the point
		}
	}()
	var n int
	if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&n); err != nil {
		return err
	}
	return conn.Raw(func(dc any) error {
		src, ok := dc.(interface {
			NewBackup(string) (*sqlite.Backup, error)
		})
		if !ok {
			return fmt.Errorf("driver connection %T has no backup API", dc)
		}
		// The copy is a new file that only this connection writes; a journal
		// would protect nothing a failed backup does not delete anyway.
		b, err := src.NewBackup(tmp + "?_pragma=journal_mode(OFF)&_pragma=synchronous(OFF)")
		if err != nil {
			return err
		}
		copied, last := 0, -1
		for {
			if err := ctx.Err(); err != nil {
				b.Finish()
				return err
			}
			more, err := b.Step(step)
			if err != nil {
				b.Finish()
				return interpret(err)
			}
			total, left := b.PageCount(), b.Remaining()
			if !more {
				left = 0
			}
			// Remaining only grows if the backup started over: the snapshot
			// moved, so the copy could mix two states. It cannot while the
			// read transaction is open; refuse rather than trust it.
			if last >= 0 && left > last {
				b.Finish()
				return errors.New("the source changed under the backup's snapshot")
			}
			last, copied = left, total-left
			if progress != nil {
				progress(copied, total)
			}
			if !more {
				return b.Finish()
			}
		}
	})
}

// checkCopy opens the copy, checks its integrity and counts its rows.
func checkCopy(ctx context.Context, file string) (BackupResult, error) {
	db, err := sql.Open("sqlite", file+"?_pragma=query_only(ON)")
	if err != nil {
		return BackupResult{}, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	var verdict string
	if err := db.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&verdict); err != nil {
		return BackupResult{}, fmt.Errorf("check the copy: %w", err)
	}
	if verdict != "ok" {
		return BackupResult{}, fmt.Errorf("the copy fails its integrity check: %s", verdict)
	}
	res := BackupResult{Tables: map[string]int64{}}
	var pageSize int64
	if err := db.QueryRowContext(ctx, "SELECT (SELECT page_count FROM pragma_page_count()), (SELECT page_size FROM pragma_page_size())").
		Scan(&res.Pages, &pageSize); err != nil {
		return BackupResult{}, err
	}
	res.SizeBytes = int64(res.Pages) * pageSize
	rows, err := db.QueryContext(ctx, `SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\'
		AND sql NOT LIKE 'CREATE VIRTUAL%'`)
	if err != nil {
		return BackupResult{}, err
	}
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return BackupResult{}, err
		}
		names = append(names, name)
	}
	if err := rows.Close(); err != nil {
		return BackupResult{}, err
	}
	sort.Strings(names)
	for _, name := range names {
		var n int64
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM "`+strings.ReplaceAll(name, `"`, `""`)+`"`).Scan(&n); err != nil {
			return BackupResult{}, fmt.Errorf("count the copy's %s: %w", name, err)
		}
		res.Tables[name] = n
		res.Rows += n
	}
	return res, nil
}

// place moves the checked copy to its name. Without force a link, which
// fails when the name exists, keeps a file made meanwhile.
func place(tmp, to string, force bool) error {
	if !force {
		err := os.Link(tmp, to)
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: %s", ErrBackupExists, to)
		}
		if err == nil {
			return os.Remove(tmp)
		}
		// A file system without hard links: the check before the copy holds.
	}
	if err := os.Rename(tmp, to); err != nil {
		return fmt.Errorf("ledger: backup to %s: %w", to, err)
	}
	return nil
}

func syncFile(name string) error {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncDir makes a rename in dir durable. Windows cannot sync a directory;
// its renames are durable once they return.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// removeDatabaseFiles deletes a database file and the files SQLite keeps
// beside it.
func removeDatabaseFiles(name string) {
	for _, suffix := range []string{"", "-journal", "-wal", "-shm"} {
		os.Remove(name + suffix)
	}
}
