package changelog

import "errors"

var (
	// ErrInvalidConfig: a Config that names no partition, or a lease TTL
	// too short.
	ErrInvalidConfig = errors.New("changelog: invalid configuration")
	// ErrFenced: the log refused an entry because another entry came after
	// the one its writer applied last: another owner wrote the log since.
	// The ledger rolls the transaction back and acknowledges nothing.
	ErrFenced = errors.New("changelog: fenced: another owner wrote the log")
	// ErrNeedSnapshot: a ledger cannot catch up with the log by its
	// entries: it is a copy of another instance of the log, or the entries
	// it needs were trimmed behind a snapshot.
	ErrNeedSnapshot = errors.New("changelog: the ledger needs a snapshot")
	// ErrBehindSnapshot: a ledger holds less than the partition's stored
	// snapshot; beginning or continuing a log from it, or storing it as
	// the snapshot, would lose what the snapshot holds.
	ErrBehindSnapshot = errors.New("changelog: the ledger holds less than the partition's snapshot")
	// ErrWaiting: the host's ledger can neither follow the log, be
	// restored from a snapshot, nor begin the log without losing what
	// another copy holds; the error says why and what would end the wait
	// (the owner's first snapshot, a fuller copy started, or a person).
	ErrWaiting = errors.New("changelog: the partition's copy waits")
	// ErrLogGone: the changelog stream is not there any more (deleted);
	// Ensure begins a new instance of it.
	ErrLogGone = errors.New("changelog: the changelog stream is gone")
	// ErrLeaseHeld: another process owns the partition.
	ErrLeaseHeld = errors.New("changelog: the partition has another owner")
	// ErrLeaseLost: the lease was taken over or expired; the owner stops.
	ErrLeaseLost = errors.New("changelog: the partition's lease was lost")
)
