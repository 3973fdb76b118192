package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// The kinds of a ledger's rows that need a person: a decision nobody but
// a person can take, which a process left alone never settles.
const (
	AttentionReview     = "review"      // outbox rows whose send is ambiguous: resolve, retry or cancel
	AttentionDeadLetter = "dead_letter" // messages given up on: requeue or discard
	AttentionConflict   = "conflict"    // an id reused with another payload, not acknowledged yet
	AttentionNearCap    = "near_cap"    // the file within NearCapShare of Config.MaxSizeBytes: prune, or raise the cap
)

// NearCapShare is the share of Config.MaxSizeBytes past which the ledger
// needs a person: at the cap every commit fails.
const NearCapShare = 0.9

// AttentionKinds are the kinds Attention reports, in its order.
var AttentionKinds = []string{AttentionReview, AttentionDeadLetter, AttentionConflict, AttentionNearCap}

// Attention is how many rows of a kind need a person, and since when the
// oldest of them has (zero when none).
type Attention struct {
	Kind   string    `json:"kind"`
	Count  int64     `json:"count"`
	Oldest time.Time `json:"oldest,omitzero"`
}

// Attention counts, in one read, the rows that need a person, one entry
// per kind of AttentionKinds (a count of 0 included). A review row is
// counted from when it went to review, a dead letter from when it was
// recorded, a conflict from when it was seen; a file near its cap counts
// 1, with no time.
func (s *Store) Attention(ctx context.Context) ([]Attention, error) {
	var counts [4]int64
	var oldest [4]sql.NullInt64
	var size int64
	err := s.reader.QueryRowContext(ctx, `SELECT
		(SELECT page_count FROM pragma_page_count()) * (SELECT page_size FROM pragma_page_size()),
		(SELECT count(*) FROM outbox WHERE status = 'review'),
		(SELECT min(updated_at) FROM outbox WHERE status = 'review'),
		(SELECT count(*) FROM dead_letters),
		(SELECT min(created_at) FROM dead_letters),
		(SELECT count(*) FROM conflicts c WHERE NOT EXISTS (SELECT 1 FROM jetledger_conflict_acks a WHERE a.conflict_id = c.id)),
		(SELECT min(seen_at) FROM conflicts c WHERE NOT EXISTS (SELECT 1 FROM jetledger_conflict_acks a WHERE a.conflict_id = c.id))`).Scan(
		&size, &counts[0], &oldest[0], &counts[1], &oldest[1], &counts[2], &oldest[2])
	if err != nil {
		return nil, fmt.Errorf("ledger: count the rows that need a person in %s: %w", s.path, interpret(err))
	}
	if c := s.cfg.MaxSizeBytes; c > 0 && float64(size) >= NearCapShare*float64(c) {
		counts[3] = 1
	}
	out := make([]Attention, len(AttentionKinds))
	for i, k := range AttentionKinds {
		out[i] = Attention{Kind: k, Count: counts[i]}
		if oldest[i].Valid {
			out[i].Oldest = time.UnixMilli(oldest[i].Int64)
		}
	}
	return out, nil
}

// AcknowledgeConflict records that a person (a.Who) has seen conflict id
// and settled it outside the ledger (a.Note says how), and the action
// (Audit): it no longer needs attention. A conflict acknowledged before is
// ErrAlreadySettled; an unknown id, ErrNotFound.
func (s *Store) AcknowledgeConflict(ctx context.Context, id int64, a Audit) error {
	res, err := s.audited(ctx, &a, "acknowledge", fmt.Sprintf("conflict %d", id), `INSERT INTO jetledger_conflict_acks (conflict_id, acknowledged_at, acknowledged_by, note)
		SELECT id, ?, ?, ? FROM conflicts WHERE id = ? ON CONFLICT (conflict_id) DO NOTHING`,
		s.cfg.Now().UnixMilli(), a.Who, a.Note, id)
	if err != nil {
		return fmt.Errorf("ledger: acknowledge conflict %d: %w", id, interpret(err))
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	var known bool
	if err := s.reader.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM conflicts WHERE id = ?)`, id).Scan(&known); err != nil {
		return fmt.Errorf("ledger: acknowledge conflict %d: %w", id, interpret(err))
	}
	if !known {
		return fmt.Errorf("%w: conflict %d", ErrNotFound, id)
	}
	return fmt.Errorf("%w: conflict %d was acknowledged before", ErrAlreadySettled, id)
}

// AuditRecord is a person's action as the ledger recorded it (Params.Audit).
type AuditRecord struct {
	At     time.Time `json:"at"`
	Who    string    `json:"who"`
	From   string    `json:"from"`
	Action string    `json:"action"`
	Target string    `json:"target"`
	Note   string    `json:"note,omitempty"`
}

// AuditOf lists the actions taken on target (an outbox row's id), oldest
// first.
func (s *Store) AuditOf(ctx context.Context, target string) ([]AuditRecord, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT at, who, origin, action, target, note FROM jetledger_audit WHERE target = ? ORDER BY id`, target)
	return collect("audit of "+target, rows, err, func(sc scanner) (AuditRecord, error) {
		var a AuditRecord
		var at int64
		err := sc.Scan(&at, &a.Who, &a.From, &a.Action, &a.Target, &a.Note)
		a.At = time.UnixMilli(at)
		return a, err
	})
}

// Now is the time by the ledger's clock (Config.Now): what a row's times
// are written by, and Params.Seen is compared with.
func (s *Store) Now() time.Time { return s.cfg.Now() }

// audited runs query in a write transaction and, when it changed a row and
// a is set, records the action on target (Audit) in it.
func (s *Store) audited(ctx context.Context, a *Audit, action, target, query string, args ...any) (sql.Result, error) {
	if a == nil {
		return s.writeExec(ctx, query, args...)
	}
	return s.writeTxExec(ctx, func(tx *writeTx, res sql.Result) error {
		if n, _ := res.RowsAffected(); n > 0 {
			return insertAudit(ctx, tx, s.cfg.Now().UnixMilli(), a, action, target)
		}
		return nil
	}, query, args...)
}

// auditChange records change c of row id as a's action; an undone cancel
// takes back its start's record instead (the latest by a.Who of that row).
func auditChange(ctx context.Context, tx *writeTx, now int64, a *Audit, c Change, id string) error {
	if c != CancelUndoSent && c != CancelUndoReview {
		return insertAudit(ctx, tx, now, a, string(c), id)
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM jetledger_audit WHERE id = (SELECT max(id) FROM jetledger_audit WHERE target = ? AND who = ? AND action = ?)`,
		id, a.Who, string(CancelStart))
	return err
}

// insertAudit records a's action on target at now (ms) in tx.
func insertAudit(ctx context.Context, tx *writeTx, now int64, a *Audit, action, target string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO jetledger_audit (at, who, origin, action, target, note) VALUES (?, ?, ?, ?, ?, ?)`,
		now, a.Who, a.From, action, target, a.Note)
	return err
}
