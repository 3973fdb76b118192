package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"
)

// SourceFloor is where, in the stream a pruned stream copies (its source),
// the pruned rows came from: every one from below Below. A copy of the
// stream made again (deleted, or its store lost while the ledger survived)
// must start copying there, or the source's older messages come back and
// those whose rows are gone are applied a second time. The ledger keeps the
// names and numbers as given; the caller says what they mean.
type SourceFloor struct {
	// Source names the stream copied (with whatever makes the name unique
	// to the caller, such as its domain). Required.
	Source string `json:"source"`
	// Instance says which instance of Source the floor is of (its identity
	// or creation time); empty when unknown. A floor recorded for another
	// instance replaces the one before: the source was made again, and its
	// sequences started over.
	Instance string `json:"instance"`
	// Below is the source's sequence of the stream's first message that
	// prune keeps: the rows pruned came from below it. More than 0.
	Below uint64 `json:"below"`
	// Since is when the floor was first recorded for this instance (set by
	// the ledger).
	Since time.Time `json:"since"`
}

// RaiseSourceFloors records, in one transaction, the floors of stream's
// sources: before prune removes rows (Prune does it with
// PruneOptions.Floors), and whenever the caller reads them from a copy
// that exists, so that a ledger whose rows were pruned by a release that
// recorded none gets its floors before the copy can be lost. Each floor
// only rises for the same instance of its source, and a new instance
// replaces it.
func (s *Store) RaiseSourceFloors(ctx context.Context, stream string, floors []SourceFloor) error {
	if stream == "" {
		return fmt.Errorf("%w: source floors of no stream", ErrUnsafePrune)
	}
	for _, f := range floors {
		if f.Source == "" || f.Below == 0 || f.Below > math.MaxInt64 {
			return fmt.Errorf("%w: source floor %q at %d: want a source and a sequence above 0", ErrUnsafePrune, f.Source, f.Below)
		}
	}
	if len(floors) == 0 {
		return nil
	}
	tx, err := s.write(ctx)
	if err != nil {
		return fmt.Errorf("ledger: record the source floors of %s: %w", stream, interpret(err))
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	for _, f := range floors {
		// SQLite evaluates every SET expression on the row as it was.
		if _, err := tx.ExecContext(ctx, `INSERT INTO jetledger_source_floors (stream, source, instance, below, recorded_at)
			VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (stream, source) DO UPDATE SET
				below = CASE WHEN instance = excluded.instance THEN max(below, excluded.below) ELSE excluded.below END,
				recorded_at = CASE WHEN instance = excluded.instance THEN recorded_at ELSE excluded.recorded_at END,
				instance = excluded.instance`,
			stream, f.Source, f.Instance, int64(f.Below), s.cfg.Now().UnixMilli()); err != nil {
			return fmt.Errorf("ledger: record the source floor of %s for %s: %w", stream, f.Source, interpret(err))
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("ledger: record the source floors of %s: %w", stream, interpret(err))
	}
	return nil
}

// SourceFloor returns the floor prune recorded for stream's copy of source,
// or an error wrapping ErrNotFound when it recorded none (no row of it was
// pruned while it copied source).
func (s *Store) SourceFloor(ctx context.Context, stream, source string) (SourceFloor, error) {
	f := SourceFloor{Source: source}
	var below, since int64
	err := s.reader.QueryRowContext(ctx, `SELECT instance, below, recorded_at FROM jetledger_source_floors WHERE stream = ? AND source = ?`,
		stream, source).Scan(&f.Instance, &below, &since)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return SourceFloor{}, fmt.Errorf("%w: no source floor of %s for %s", ErrNotFound, stream, source)
	case err != nil:
		return SourceFloor{}, fmt.Errorf("ledger: source floor of %s for %s: %w", stream, source, interpret(err))
	}
	f.Below, f.Since = uint64(below), time.UnixMilli(since)
	return f, nil
}

// SourceFloors returns every floor recorded for stream's sources, by
// source: none for a stream whose copy no prune, start or creation has
// recorded one for (a ledger pruned by a release before floors, say).
func (s *Store) SourceFloors(ctx context.Context, stream string) ([]SourceFloor, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT source, instance, below, recorded_at FROM jetledger_source_floors WHERE stream = ? ORDER BY source`, stream)
	return collect("source floors", rows, err, func(sc scanner) (SourceFloor, error) {
		var f SourceFloor
		var below, since int64
		err := sc.Scan(&f.Source, &f.Instance, &below, &since)
		f.Below, f.Since = uint64(below), time.UnixMilli(since)
		return f, err
	})
}

// RowsOf counts the processed_messages rows of stream.
func (s *Store) RowsOf(ctx context.Context, stream string) (int64, error) {
	var n int64
	if err := s.reader.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM processed_messages WHERE stream = ?1)
		+ (SELECT count(*) FROM processed_messages_v1 WHERE stream = ?1)`, stream).Scan(&n); err != nil {
		return 0, fmt.Errorf("ledger: rows of %s: %w", stream, interpret(err))
	}
	return n, nil
}

// HoldRows tells the ledger that stream was made again and numbers its
// messages anew, and that a copy of an id the ledger holds may come in it at
// any sequence up to seq: each of the stream's rows last seen below seq is
// taken as last seen at seq, so prune keeps it until the new stream's first
// sequence passes seq. Its sequences in the stream before mean nothing in
// this one. It returns how many rows it raised.
func (s *Store) HoldRows(ctx context.Context, stream string, seq uint64) (int64, error) {
	if seq > math.MaxInt64 {
		seq = math.MaxInt64
	}
	var n int64
	err := s.holdRows(ctx, stream, int64(seq), &n)
	if err != nil {
		return 0, fmt.Errorf("ledger: hold the rows of %s to %d: %w", stream, seq, interpret(err))
	}
	return n, nil
}

// holdRows raises the rows of both tables of ledger rows, in one
// transaction, counting them in n.
func (s *Store) holdRows(ctx context.Context, stream string, seq int64, n *int64) error {
	tx, err := s.write(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	for _, t := range ledgerRowTables {
		r, err := tx.ExecContext(ctx, `UPDATE `+t+` SET last_seq = ?1 WHERE stream = ?2 AND last_seq < ?1`, seq, stream)
		if err != nil {
			return err
		}
		raised, _ := r.RowsAffected()
		*n += raised
	}
	return tx.Commit()
}
