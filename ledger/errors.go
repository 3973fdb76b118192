package ledger

import (
	"errors"
	"fmt"
)

var (
	// ErrSchemaTooNew is returned by Open when the database was written by a
	// newer jetledger whose migrations this build does not know. Opening it
	// anyway could corrupt data the newer schema depends on.
	ErrSchemaTooNew = errors.New("ledger: database schema is newer than this build")

	// ErrConflict is the error of a Result whose message id was already
	// applied with a different payload. The handler was not run.
	ErrConflict = errors.New("ledger: message id reused with a different payload")

	// ErrInvalidConfig is returned by Open for a Config or path it cannot
	// use, and by a request's Check (*ConfigError: Listing, Resolution).
	ErrInvalidConfig = errors.New("ledger: invalid configuration")

	// ErrEmptyMessageID is the error of a Result for a Delivery without an id;
	// the ledger cannot deduplicate what it cannot name.
	ErrEmptyMessageID = errors.New("ledger: delivery has no message id")

	// ErrTransactionControl: a handler tried to end, split or widen the batch
	// transaction (BEGIN, COMMIT, ROLLBACK, SAVEPOINT, RELEASE, ATTACH,
	// DETACH, a conflict resolved by ROLLBACK), to change the connection
	// (PRAGMA), or to write the ledger's own tables. The ledger owns all of
	// them; the message fails.
	ErrTransactionControl = errors.New("ledger: a handler may not control the batch transaction")

	// ErrFixedSetting: a statement tried to change a setting the ledger's
	// guarantee rests on (PRAGMA synchronous, journal_mode, ...) on its
	// writer. They are fixed once the store is open.
	ErrFixedSetting = errors.New("ledger: the ledger's durability settings are fixed")

	// ErrUnknownSink: an Enqueue named a sink that is not among
	// Config.Sinks, so no dispatcher of this store would ever send the row.
	ErrUnknownSink = errors.New("ledger: unknown outbox sink")
	// ErrNotChangelogOwner: a store with a changelog was asked to write
	// but has not taken its changelog over, or lost it: an entry was
	// refused (another owner wrote the log since) or may not have landed.
	// Nothing was committed; catch up with the log and take over again.
	ErrNotChangelogOwner = errors.New("ledger: not the changelog's owner")
	// ErrChangelogCopy: a write to a ledger kept by a changelog, on a store
	// opened without it (Config.Changelog): only the partition's owner
	// writes such a file, through the log. Nothing was written.
	ErrChangelogCopy = errors.New("ledger: the ledger is kept by a changelog")
	// ErrChangelogAhead: the changelog has entries the ledger has not
	// applied; a take-over needs them first.
	ErrChangelogAhead = errors.New("ledger: the changelog has entries the ledger lacks")
	// ErrChangelogBehind: the ledger holds changes its changelog does not:
	// the log lost entries (made again, or a replica lost), and standbys
	// cannot be trusted to match.
	ErrChangelogBehind = errors.New("ledger: the ledger holds changes its changelog lacks")
	// ErrChangesDoNotFit: a changelog entry does not fit the ledger it is
	// applied to, which is then not a copy of the log's; restore a snapshot.
	ErrChangesDoNotFit = errors.New("ledger: the changes do not fit this ledger")
	// ErrTxDone: a Tx was used after its handler returned.
	ErrTxDone = errors.New("ledger: the handler has returned; its Tx is done")
)

// Outbox errors. Every outbox transition is one guarded UPDATE; these say why
// it changed nothing.
var (
	// ErrNotFound: no row (outbox row, dead letter) has that id.
	ErrNotFound = errors.New("ledger: not found")
	// ErrChanged: a person's action on a row that changed since they saw
	// it (Params.Seen): nothing changed; look again.
	ErrChanged = errors.New("ledger: the row changed since it was seen")
	// ErrAlreadySettled: a person's decision was taken on the row before
	// (a conflict acknowledged): nothing changed.
	ErrAlreadySettled = errors.New("ledger: already settled")
	// ErrNotClaimed: the row was not queued (another worker has it, or it is
	// done). Not a failure: stop, someone else is responsible.
	ErrNotClaimed = errors.New("ledger: outbox row not claimed: it is not queued")
	// ErrNotOwner: the row is no longer in a state this worker owns (its
	// lease expired and it moved on); the write-back changed nothing.
	ErrNotOwner = errors.New("ledger: outbox row is no longer ours")
	// ErrCancelled: the row was cancelled while this worker was sending; the
	// caller must delete the item at the destination.
	ErrCancelled = errors.New("ledger: outbox row was cancelled while sending")
	// ErrTooLate: cancel found the row already being sent.
	ErrTooLate = errors.New("ledger: too late, already sending")
	// ErrMaybeSent: the row is not sent, but an earlier attempt's outcome
	// was unknown, so its item may be at the destination: it cannot simply
	// be cancelled.
	ErrMaybeSent = errors.New("ledger: an earlier send of this outbox row may have reached the destination")
	// ErrCancelPending: the row in review was cancelled while it was being
	// sent; it is never sent again nor settled as sent. Delete the item at
	// the destination (cancel it again), or, if it is not there, resolve it
	// as failed, which finishes the cancel.
	ErrCancelPending = errors.New("ledger: the outbox row's cancel is pending")
	// ErrIllegalTransition: the row's status does not allow the change.
	ErrIllegalTransition = errors.New("ledger: illegal outbox transition")
)

// Database conditions, translated from the driver's result codes so callers
// can decide without reading error text.
var (
	// ErrBusy: another connection held the write lock past the busy
	// timeout. Transient: try again later.
	ErrBusy = errors.New("ledger: database is locked by another writer")
	// ErrFenced: Config.Fence refused a batch's commit; nothing of it was
	// applied.
	ErrFenced = errors.New("ledger: the fence refused the commit")
	// ErrReadOnly: the database file or its directory cannot be written.
	ErrReadOnly = errors.New("ledger: database is read-only")
	// ErrFull: the disk, or the database's max_page_count, is full.
	ErrFull = errors.New("ledger: database or disk is full")
	// ErrAtMaxSize: the database reached Config.MaxSizeBytes while the disk
	// still had room. Errors that wrap it are also ErrFull, and a
	// *MaxSizeError names the cap.
	ErrAtMaxSize = errors.New("ledger: database is at its size cap")
	// ErrIO: the disk failed a read or write.
	ErrIO = errors.New("ledger: disk I/O error")
	// ErrConstraint: a statement failed a constraint (a foreign key, NOT
	// NULL, CHECK, UNIQUE, a trigger's RAISE): the data's condition, not
	// the SQL's.
	ErrConstraint = errors.New("ledger: constraint failed")
)

// ErrUnsafePrune: a prune whose bounds could remove a row a redelivery or a
// republish might still meet.
var ErrUnsafePrune = errors.New("ledger: unsafe prune")

// ErrBackupExists: the backup's destination exists and the caller did not
// ask to replace it, or a -wal or -journal file lies beside it, which SQLite
// would apply to the copy when it opens it.
var ErrBackupExists = errors.New("ledger: backup destination exists")

// ErrBackupSideFile is the ErrBackupExists of a -wal or -journal file beside
// the destination: unlike a file at the destination, BackupOptions.Force
// does not replace it. errors.Is(err, ErrBackupExists) holds for it too.
var ErrBackupSideFile = fmt.Errorf("%w", ErrBackupExists)

// MaxSizeError is a write refused, or about to be, because the database is
// at Config.MaxSizeBytes. It is ErrAtMaxSize and ErrFull.
type MaxSizeError struct {
	MaxSizeBytes int64 // the cap
	Err          error // what SQLite said, if a write failed
}

func (e *MaxSizeError) Error() string {
	msg := fmt.Sprintf("ledger: database is at its size cap of %d bytes (Config.MaxSizeBytes) while the disk has room; raise the cap or prune", e.MaxSizeBytes)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *MaxSizeError) Is(target error) bool { return target == ErrAtMaxSize || target == ErrFull }
func (e *MaxSizeError) Unwrap() error        { return e.Err }

// ConfigError is a request refused before the ledger was asked (Listing,
// Resolution, Backup's destination): Reason says what is wrong, naming the
// settings as their Names say, so that a caller prints it as it is. It is
// ErrInvalidConfig for errors.Is.
type ConfigError struct {
	Reason string
	Err    error // the refusal as a Go program reads it, wrapping ErrInvalidConfig, if any
}

func (e *ConfigError) Error() string {
	if e.Err != nil {
		return e.Err.Error()
	}
	return ErrInvalidConfig.Error() + ": " + e.Reason
}

// Unwrap gives Err, else ErrInvalidConfig.
func (e *ConfigError) Unwrap() error {
	if e.Err != nil {
		return e.Err
	}
	return ErrInvalidConfig
}

// Refusal is Reason.
func (e *ConfigError) Refusal() string { return e.Reason }
