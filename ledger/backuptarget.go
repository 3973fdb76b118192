package ledger

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/jetledger/jetledger/internal/say"
)

// checkBackupTarget refuses, before any work, a destination that is the
// ledger or one of its files, a directory, an existing file without force,
// or one beside a -wal or -journal file: SQLite would replay that file onto
// the copy the first time it is opened.
func (s *Store) checkBackupTarget(to string, opt BackupOptions) error {
	if to == "" || strings.ContainsAny(to, "?#") {
		return opt.refuse("To", to, "backup path %q must be a plain file path", to)
	}
	src, err := filepath.Abs(s.path)
	if err != nil {
		return fmt.Errorf("ledger: backup to %s: %w", to, err)
	}
	dst, err := filepath.Abs(to)
	if err != nil {
		return fmt.Errorf("ledger: backup to %s: %w", to, err)
	}
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		if dst == src+suffix {
			return opt.refuse("To", to, "backup path %s is the ledger's own file", to)
		}
	}
	fi, err := os.Stat(to)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("ledger: backup to %s: %w", to, err)
	case fi.IsDir():
		return opt.refuse("To", to, "backup path %s is a directory", to)
	default:
		// By another name too (a link, a symlinked directory): the ledger
		// or one of its side files, which the copy would replace.
		for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
			if sfi, err := os.Stat(s.path + suffix); err == nil && os.SameFile(fi, sfi) {
				return opt.refuse("To", to, "backup path %s is the ledger's own file", to)
			}
		}
		if !opt.Force {
			return fmt.Errorf("%w: %s (give %s to replace it)", ErrBackupExists, to, say.Name(opt.Names, "Force"))
		}
	}
	for _, suffix := range []string{"-wal", "-journal"} {
		if _, err := os.Lstat(to + suffix); err == nil {
			return fmt.Errorf("%w: %s%s is beside it (the database there is open, or was not closed cleanly); remove it or choose another path", ErrBackupSideFile, to, suffix)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("ledger: backup to %s: %w", to, err)
		}
	}
	return nil
}

// refuse is the *ConfigError of the setting at path with value v, what is
// wrong with it said by format.
func (opt BackupOptions) refuse(path string, v any, format string, a ...any) error {
	err := fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, a...)...)
	return &ConfigError{Reason: fmt.Sprintf("%s %v: %v", say.Name(opt.Names, path), v, err), Err: err}
}
