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
	// ErrLeaseHeld: another process owns the partition.
	ErrLeaseHeld = errors.New("changelog: the partition has another owner")
	// ErrLeaseLost: the lease was taken over or expired; the owner stops.
	ErrLeaseLost = errors.New("changelog: the partition's lease was lost")
)
