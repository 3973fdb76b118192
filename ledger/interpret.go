package ledger

import (
	"errors"
	"fmt"

	"modernc.org/sqlite"
)

// SQLite primary result codes that callers act on.
const (
	sqliteBusy     = 5
	sqliteLocked   = 6
	sqliteReadOnly = 8
	sqliteFull     = 13
)

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
	}
	return err
}
