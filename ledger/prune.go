package ledger

import (
	"context"
	"fmt"
	"time"
)

// Defaults for pruning, reasoned in README.md: a row may go only when no
// redelivery and no late republish of its id can still arrive.
const (
	// RetentionDefault keeps processed_messages rows a week after they are
	// applied: longer than the retry horizon of webhook providers that
	// re-send the same event id (up to three days), and than any duplicate
	// window in practice.
	RetentionDefault = 7 * 24 * time.Hour
	// OutboxRetentionDefault keeps sent and cancelled outbox rows for audit.
	OutboxRetentionDefault = 30 * 24 * time.Hour
)

// PruneOptions bounds a prune of one stream's ledger rows.
type PruneOptions struct {
	// Stream whose rows are pruned. Required.
	Stream string
	// FirstSeq is the stream's first sequence now: rows at or above it are
	// for messages still in the stream and are never pruned, since those
	// can be redelivered or replayed.
	FirstSeq uint64
	// DuplicateWindow is the stream's: an id younger than that may still be
	// re-published and dropped by the stream, so rows this young stay too.
	DuplicateWindow time.Duration
	// Retention is the least age of a pruned row. Default RetentionDefault;
	// it must not be shorter than DuplicateWindow.
	Retention time.Duration
	// OutboxRetention is the least age (since the last change) of a pruned
	// sent or cancelled outbox row. Default OutboxRetentionDefault.
	OutboxRetention time.Duration
}

// PruneResult says what a prune removed.
type PruneResult struct {
	Processed  int64 `json:"processed"`   // processed_messages rows
	Outbox     int64 `json:"outbox"`      // sent and cancelled outbox rows
	FreedPages int64 `json:"freed_pages"` // pages returned to the file system
}

// Prune removes processed_messages rows of o.Stream that are older than the
// retention, below the stream's first sequence and outside its duplicate
// window, and sent or cancelled outbox rows older than the outbox retention;
// then it returns the freed pages with an incremental vacuum.
func (s *Store) Prune(ctx context.Context, o PruneOptions) (PruneResult, error) {
	if o.Stream == "" {
		return PruneResult{}, fmt.Errorf("%w: no stream given", ErrUnsafePrune)
	}
	if o.Retention == 0 {
		o.Retention = RetentionDefault
	}
	if o.OutboxRetention == 0 {
		o.OutboxRetention = OutboxRetentionDefault
	}
	if o.Retention < o.DuplicateWindow || o.Retention < 0 || o.OutboxRetention < 0 {
		return PruneResult{}, fmt.Errorf("%w: retention %s is shorter than the stream's duplicate window %s",
			ErrUnsafePrune, o.Retention, o.DuplicateWindow)
	}
	now := s.cfg.Now()
	cutoff := now.Add(-max(o.Retention, o.DuplicateWindow)).UnixMilli()
	var res PruneResult
	r, err := s.writer.ExecContext(ctx, `DELETE FROM processed_messages
		WHERE stream = ? AND stream_seq < ? AND processed_at < ?`, o.Stream, int64(o.FirstSeq), cutoff)
	if err != nil {
		return res, fmt.Errorf("ledger: prune processed_messages: %w", interpret(err))
	}
	res.Processed, _ = r.RowsAffected()
	// A cancelled row with a delete still pending is not finished business.
	r, err = s.writer.ExecContext(ctx, `DELETE FROM outbox WHERE status IN ('sent', 'cancelled') AND pending_delete = 0 AND updated_at < ?`,
		now.Add(-o.OutboxRetention).UnixMilli())
	if err != nil {
		return res, fmt.Errorf("ledger: prune outbox: %w", interpret(err))
	}
	res.Outbox, _ = r.RowsAffected()
	var before, after int64
	if err := s.writer.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&before); err != nil {
		return res, fmt.Errorf("ledger: vacuum: %w", err)
	}
	if _, err := s.writer.ExecContext(ctx, `PRAGMA incremental_vacuum`); err != nil {
		return res, fmt.Errorf("ledger: vacuum: %w", interpret(err))
	}
	if err := s.writer.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&after); err != nil {
		return res, fmt.Errorf("ledger: vacuum: %w", err)
	}
	res.FreedPages = before - after
	return res, nil
}
