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
		(SELECT count(*) FROM processed_messages) + (SELECT count(*) FROM processed_messages_v1),
		(SELECT min(t) FROM (SELECT min(processed_at) t FROM processed_messages UNION ALL SELECT min(processed_at) FROM processed_messages_v1)),
		(SELECT max(t) FROM (SELECT max(processed_at) t FROM processed_messages UNION ALL SELECT max(processed_at) FROM processed_messages_v1)),
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

// Size is the database file's size by its pages, WAL excluded: what Stats
// says as SizeBytes without its counts, cheap enough for every scrape.
func (s *Store) Size(ctx context.Context) (int64, error) {
	var n int64
	err := s.reader.QueryRowContext(ctx, `SELECT (SELECT page_count FROM pragma_page_count()) * (SELECT page_size FROM pragma_page_size())`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("ledger: size of %s: %w", s.path, err)
	}
	return n, nil
}

// Add adds o to s, as the sum over several ledgers (the partitions of a
// stream): counts and sizes add up, Oldest and Newest span both, and
// SchemaVersion is the lower one, the ledger that lags (a zero s takes
// o's). Path is left as it is: the sum is the file of none of them.
func (s *Stats) Add(o Stats) {
	if s.SchemaVersion == 0 || o.SchemaVersion < s.SchemaVersion {
		s.SchemaVersion = o.SchemaVersion
	}
	s.SizeBytes += o.SizeBytes
	s.Processed += o.Processed
	s.Conflicts += o.Conflicts
	s.DeadLetters += o.DeadLetters
	if !o.Oldest.IsZero() && (s.Oldest.IsZero() || o.Oldest.Before(s.Oldest)) {
		s.Oldest = o.Oldest
	}
	if o.Newest.After(s.Newest) {
		s.Newest = o.Newest
	}
}
