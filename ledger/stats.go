package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Stats is a snapshot of the ledger's contents.
type Stats struct {
	Path          string    `json:"path"`
	SchemaVersion int       `json:"schema_version"`
	SizeBytes     int64     `json:"size_bytes"` // database file, WAL excluded
	Processed     int64     `json:"processed"`  // rows in processed_messages
	Oldest        time.Time `json:"oldest,omitzero"`
	Newest        time.Time `json:"newest,omitzero"`
	Conflicts     int64     `json:"conflicts"`
	DeadLetters   int64     `json:"dead_letters"`
}

// Stats reads counts and sizes. It does not block the writer.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	st := Stats{Path: s.path}
	var oldest, newest sql.NullInt64
	var pages, pageSize int64
	err := s.reader.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM processed_messages),
		(SELECT min(processed_at) FROM processed_messages),
		(SELECT max(processed_at) FROM processed_messages),
		(SELECT count(*) FROM conflicts),
		(SELECT count(*) FROM dead_letters),
		(SELECT page_count FROM pragma_page_count()),
		(SELECT page_size FROM pragma_page_size()),
		(SELECT user_version FROM pragma_user_version())`).Scan(
		&st.Processed, &oldest, &newest, &st.Conflicts, &st.DeadLetters, &pages, &pageSize, &st.SchemaVersion)
	if err != nil {
		return Stats{}, fmt.Errorf("ledger: stats of %s: %w", s.path, err)
	}
	if oldest.Valid {
		st.Oldest = time.UnixMilli(oldest.Int64)
	}
	if newest.Valid {
		st.Newest = time.UnixMilli(newest.Int64)
	}
	st.SizeBytes = pages * pageSize
	return st, nil
}

// CheckWritable takes and releases the write lock: the database accepts
// writes now. For health checks; it waits behind a batch in progress.
func (s *Store) CheckWritable(ctx context.Context) error {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("ledger: %s not writable: %w", s.path, interpret(err))
	}
	// BEGIN IMMEDIATE took the write lock; a read-only file fails only on a
	// real write, so make one that the rollback undoes.
	if _, err := tx.ExecContext(ctx, `UPDATE processed_messages SET processed_at = processed_at WHERE 0`); err != nil {
		tx.Rollback()
		return fmt.Errorf("ledger: %s not writable: %w", s.path, interpret(err))
	}
	return tx.Rollback()
}
