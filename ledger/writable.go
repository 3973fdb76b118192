package ledger

import "context"

// CheckMayWrite returns the error the store's next write would be refused
// with before it touched the file, and writes nothing: ErrChangelogCopy,
// naming the log, for a ledger kept by a changelog opened without it;
// ErrNotChangelogOwner for a store with a changelog that has not taken it
// over, or whose Append failed since; ErrBusy when another process holds
// the write lock past Config.BusyTimeout. A caller that acts outside the
// ledger and then records it (a requeue publishes a copy, then removes the
// dead letter) checks first, so that it does not act where the record
// would be refused. It takes the writer for a moment, as a write does;
// CheckWritable looks at the disk instead, without the writer.
func (s *Store) CheckMayWrite(ctx context.Context) error {
	tx, err := s.write(ctx) // the refusal is the one every write meets (record)
	if err != nil {
		return interpret(err)
	}
	return interpret(tx.Rollback())
}
