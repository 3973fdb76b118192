package ledger

import (
	"errors"
	"fmt"

	"modernc.org/sqlite"
)

// SQLite primary result codes that callers act on.
const (
	sqliteBusy       = 5
	sqliteLocked     = 6
	sqliteReadOnly   = 8
	sqliteIOErr      = 10
	sqliteFull       = 13
	sqliteConstraint = 19
	sqliteAuth       = 23
)

// Interpret wraps an error of a statement run through Store.DB with the
// ledger sentinel for its condition (ErrBusy, ErrReadOnly, ErrFull,
// ErrIO, ...), keeping the original for the message, as the ledger's own
// errors are; any other error is returned as it is.
func Interpret(err error) error { return interpret(err) }

// interpret wraps a driver error with the ledger sentinel for its condition,
// keeping the original for the message.
func interpret(err error) error {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	switch se.Code() & 0xff { // extended codes carry the primary code in the low byte
	case sqliteBusy, sqliteLocked:
		return fmt.Errorf("%w: %w", ErrBusy, err)
	case sqliteReadOnly:
		return fmt.Errorf("%w: %w", ErrReadOnly, err)
	case sqliteFull:
		return fmt.Errorf("%w: %w", ErrFull, err)
	case sqliteIOErr:
		return fmt.Errorf("%w: %w", ErrIO, err)
	case sqliteConstraint:
		return fmt.Errorf("%w: %w", ErrConstraint, err)
	}
	return err
}

// databaseFault reports a handler error that is the database's condition,
// not the message's: the whole batch fails, so no message is retried toward
// a dead letter for a full or read-only disk.
func databaseFault(err error) error {
	if err == nil {
		return nil
	}
	if ie := interpret(err); errors.Is(ie, ErrFull) || errors.Is(ie, ErrReadOnly) || errors.Is(ie, ErrIO) {
		return ie
	}
	return nil
}
