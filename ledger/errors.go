package ledger

import "errors"

var (
	// ErrSchemaTooNew is returned by Open when the database was written by a
	// newer jetledger whose migrations this build does not know. Opening it
	// anyway could corrupt data the newer schema depends on.
	ErrSchemaTooNew = errors.New("ledger: database schema is newer than this build")

	// ErrConflict is the error of a Result whose message id was already
	// applied with a different payload. The handler was not run.
	ErrConflict = errors.New("ledger: message id reused with a different payload")

	// ErrInvalidConfig is returned by Open for a Config or path it cannot use.
	ErrInvalidConfig = errors.New("ledger: invalid configuration")

	// ErrEmptyMessageID is the error of a Result for a Delivery without an id;
	// the ledger cannot deduplicate what it cannot name.
	ErrEmptyMessageID = errors.New("ledger: delivery has no message id")
)
