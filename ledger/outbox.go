package ledger

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// Status is an outbox row's state.
type Status string

// Outbox states. queued → sending only by Claim; sending → sent only by the
// claimer's MarkSent; failure paths never touch sent rows.
const (
	StatusQueued     Status = "queued"     // waiting to be claimed
	StatusSending    Status = "sending"    // claimed; a send may be in flight
	StatusSent       Status = "sent"       // the destination accepted it (external_id)
	StatusFailed     Status = "failed"     // the destination refused it, or retries ran out
	StatusReview     Status = "review"     // ambiguous: may or may not be at the destination
	StatusCancelled  Status = "cancelled"  // never sent, or deleted at the destination
	StatusSuppressed Status = "suppressed" // recorded but deliberately not sent (replay)
)

// Statuses lists every state, in lifecycle order.
var Statuses = []Status{StatusQueued, StatusSending, StatusSent, StatusFailed, StatusReview, StatusCancelled, StatusSuppressed}

// OutboxItem is one outbox row.
type OutboxItem struct {
	ID            string    `json:"id"` // ULID; the idempotency key sent downstream
	MessageID     string    `json:"message_id"`
	Sink          string    `json:"sink"`
	Payload       []byte    `json:"payload"`
	Status        Status    `json:"status"`
	Attempts      int       `json:"attempts"`
	ClaimedBy     string    `json:"claimed_by,omitempty"`
	ClaimedAt     time.Time `json:"claimed_at,omitzero"`
	LeaseUntil    time.Time `json:"lease_until,omitzero"`
	PendingDelete bool      `json:"pending_delete,omitempty"`
	MaybeSent     bool      `json:"maybe_sent,omitempty"` // an earlier attempt's outcome was unknown
	ExternalID    string    `json:"external_id,omitempty"`
	Error         string    `json:"error,omitempty"`
	NextAttemptAt time.Time `json:"next_attempt_at,omitzero"`
	SentAt        time.Time `json:"sent_at,omitzero"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

var ulidEntropy = struct {
	sync.Mutex
	r io.Reader
}{r: ulid.Monotonic(rand.Reader, 0)}

func newULID(now time.Time) string {
	ulidEntropy.Lock()
	defer ulidEntropy.Unlock()
	return ulid.MustNew(ulid.Timestamp(now), ulidEntropy.r).String()
}

// Enqueue adds an outbox row for the message being applied, inside its
// savepoint: the row exists if and only if the message is applied. It
// returns the row's id, which is also the idempotency key.
func (t *Tx) Enqueue(ctx context.Context, sink string, payload []byte) (string, error) {
	return t.enqueue(ctx, sink, payload, StatusQueued)
}

// EnqueueSuppressed records an effect that must not be sent (a replayed
// message's, say), so the ledger still shows it.
func (t *Tx) EnqueueSuppressed(ctx context.Context, sink string, payload []byte) (string, error) {
	return t.enqueue(ctx, sink, payload, StatusSuppressed)
}

// EnqueueReview records an effect whose fate nobody can tell (a replay of a
// message another process may have handled and sent) straight into review,
// with reason, for a person to settle; it is never sent automatically.
func (t *Tx) EnqueueReview(ctx context.Context, sink string, payload []byte, reason string) (string, error) {
	id, err := t.enqueue(ctx, sink, payload, StatusReview)
	if err != nil {
		return "", err
	}
	if _, err := t.ownExec(ctx, `UPDATE outbox SET maybe_sent = 1, error = ? WHERE id = ?`, reason, id); err != nil {
		return "", fmt.Errorf("ledger: enqueue for %s: %w", t.d.MessageID, err)
	}
	return id, nil
}

func (t *Tx) enqueue(ctx context.Context, sink string, payload []byte, st Status) (string, error) {
	if t.d == nil {
		return "", fmt.Errorf("ledger: enqueue outside a handler")
	}
	if t.done.Load() {
		return "", ErrTxDone
	}
	if sink == "" {
		return "", fmt.Errorf("ledger: enqueue for %s: empty sink name", t.d.MessageID)
	}
	now := t.b.s.cfg.Now()
	id := newULID(now)
	if payload == nil {
		payload = []byte{}
	}
	if _, err := t.ownExec(ctx, `INSERT INTO outbox (id, message_id, sink, payload, status, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, id, t.d.MessageID, sink, payload, string(st), now.UnixMilli(), now.UnixMilli()); err != nil {
		return "", fmt.Errorf("ledger: enqueue for %s: %w", t.d.MessageID, err)
	}
	return id, nil
}

const outboxCols = `id, message_id, sink, payload, status, attempts, claimed_by, claimed_at, lease_until,
	pending_delete, maybe_sent, external_id, error, next_attempt_at, sent_at, created_at, updated_at`

func scanItem(sc interface{ Scan(...any) error }) (OutboxItem, error) {
	var it OutboxItem
	var status string
	var claimedBy, ext, errText sql.NullString
	var claimedAt, lease, sentAt sql.NullInt64
	var next, created, updated int64
	if err := sc.Scan(&it.ID, &it.MessageID, &it.Sink, &it.Payload, &status, &it.Attempts, &claimedBy, &claimedAt,
		&lease, &it.PendingDelete, &it.MaybeSent, &ext, &errText, &next, &sentAt, &created, &updated); err != nil {
		return OutboxItem{}, err
	}
	it.Status, it.ClaimedBy, it.ExternalID, it.Error = Status(status), claimedBy.String, ext.String, errText.String
	it.ClaimedAt, it.LeaseUntil, it.SentAt = msTime(claimedAt), msTime(lease), msTime(sentAt)
	if next > 0 {
		it.NextAttemptAt = time.UnixMilli(next)
	}
	it.CreatedAt, it.UpdatedAt = time.UnixMilli(created), time.UnixMilli(updated)
	return it, nil
}

func msTime(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMilli(v.Int64)
}

// Get reads one outbox row.
// It reads through the reader connections, so it never waits behind a batch
// holding the writer.
func (s *Store) Get(ctx context.Context, id string) (OutboxItem, error) {
	it, err := scanItem(s.reader.QueryRowContext(ctx, `SELECT `+outboxCols+` FROM outbox WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return OutboxItem{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return OutboxItem{}, fmt.Errorf("ledger: get outbox %s: %w", id, err)
	}
	return it, nil
}

// ListOutbox lists rows, oldest first, optionally of one status; limit 0 is all.
func (s *Store) ListOutbox(ctx context.Context, status Status, limit int) ([]OutboxItem, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.reader.QueryContext(ctx, `SELECT `+outboxCols+` FROM outbox
		WHERE ? = '' OR status = ? ORDER BY id LIMIT ?`, string(status), string(status), limit)
	if err != nil {
		return nil, fmt.Errorf("ledger: list outbox: %w", err)
	}
	defer rows.Close()
	var out []OutboxItem
	for rows.Next() {
		it, err := scanItem(rows)
		if err != nil {
			return nil, fmt.Errorf("ledger: list outbox: %w", err)
		}
		out = append(out, it)
	}
	return out, rows.Err()
}

// OutboxCounts counts rows per status.
func (s *Store) OutboxCounts(ctx context.Context) (map[Status]int64, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT status, count(*) FROM outbox GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("ledger: count outbox: %w", err)
	}
	defer rows.Close()
	out := map[Status]int64{}
	for _, st := range Statuses {
		out[st] = 0
	}
	for rows.Next() {
		var st string
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("ledger: count outbox: %w", err)
		}
		out[Status(st)] = n
	}
	return out, rows.Err()
}

// Due returns ids of queued rows of sink whose next attempt is due, oldest
// first. They are candidates: Claim decides who gets each.
func (s *Store) Due(ctx context.Context, sink string, limit int) ([]string, error) {
	rows, err := s.writer.QueryContext(ctx, `SELECT id FROM outbox
		WHERE status = 'queued' AND sink = ? AND next_attempt_at <= ? ORDER BY id LIMIT ?`,
		sink, s.cfg.Now().UnixMilli(), limit)
	if err != nil {
		return nil, fmt.Errorf("ledger: due outbox rows: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// exec1 runs a guarded UPDATE and reports whether it changed exactly one row.
func (s *Store) exec1(ctx context.Context, what, id, query string, args ...any) (bool, error) {
	res, err := s.writer.ExecContext(ctx, query, args...)
	if err != nil {
		return false, fmt.Errorf("ledger: %s %s: %w", what, id, interpret(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("ledger: %s %s: %w", what, id, err)
	}
	if n > 1 {
		return false, fmt.Errorf("ledger: %s %s: changed %d rows", what, id, n) // id is the primary key
	}
	return n == 1, nil
}

// Claim moves a queued row to sending for worker, with a lease: the single
// guarded UPDATE that decides who sends. ErrNotClaimed means someone else
// has it (or it is done): stop, it is not an error. The lease starts once the
// claim holds the writer, so a wait behind a batch or another process does
// not shorten it; the row is read back by the same statement, so a claimed
// row always reaches its worker.
func (s *Store) Claim(ctx context.Context, id, worker string, lease time.Duration) (OutboxItem, error) {
	tx, err := s.writer.BeginTx(ctx, nil) // BEGIN IMMEDIATE: the wait for the writer is here
	if err != nil {
		return OutboxItem{}, fmt.Errorf("ledger: claim %s: %w", id, interpret(err))
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	now := s.cfg.Now()
	it, err := scanItem(tx.QueryRowContext(ctx, `UPDATE outbox SET status = 'sending', claimed_by = ?, claimed_at = ?,
		lease_until = ?, attempts = attempts + 1, updated_at = ?
		WHERE id = ? AND status = 'queued' RETURNING `+outboxCols,
		worker, now.UnixMilli(), now.Add(lease).UnixMilli(), now.UnixMilli(), id))
	if errors.Is(err, sql.ErrNoRows) {
		return OutboxItem{}, fmt.Errorf("%w: %s", ErrNotClaimed, id)
	}
	if err != nil {
		return OutboxItem{}, fmt.Errorf("ledger: claim %s: %w", id, interpret(err))
	}
	if err := tx.Commit(); err != nil {
		return OutboxItem{}, fmt.Errorf("ledger: claim %s: %w", id, interpret(err))
	}
	return it, nil
}

// whyNot explains a write-back by worker that changed nothing: the row was
// cancelled during the send (ErrCancelled: delete at the destination), or it
// is no longer the worker's (ErrNotOwner).
func (s *Store) whyNot(ctx context.Context, id, worker string) error {
	it, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	if it.Status == StatusCancelled && it.PendingDelete && it.ClaimedBy == worker {
		return fmt.Errorf("%w: %s", ErrCancelled, id)
	}
	return fmt.Errorf("%w: %s is %s (claimed by %q)", ErrNotOwner, id, it.Status, it.ClaimedBy)
}

// MarkSent records a successful send, only if the row is still sending and
// claimed by worker.
func (s *Store) MarkSent(ctx context.Context, id, worker, externalID string) error {
	now := s.cfg.Now().UnixMilli()
	ok, err := s.exec1(ctx, "mark sent", id, `UPDATE outbox SET status = 'sent', external_id = ?, sent_at = ?,
		error = NULL, updated_at = ? WHERE id = ? AND status = 'sending' AND claimed_by = ?`,
		externalID, now, now, id, worker)
	if err != nil || ok {
		return err
	}
	return s.whyNot(ctx, id, worker)
}

// MarkFailed records a failed send by worker. With a positive retryAfter
// the row goes back to queued for another attempt that much later (by the
// ledger's clock); otherwise it is failed. maybeArrived records that this
// attempt's outcome is unknown (MaybeSent). Only rows still queued or sending
// and claimed by worker change: a late failure never overwrites sent. A row
// that may have arrived is never failed: give it to MarkReview.
func (s *Store) MarkFailed(ctx context.Context, id, worker, reason string, retryAfter time.Duration, maybeArrived bool) error {
	now := s.cfg.Now().UnixMilli()
	var ok bool
	var err error
	if retryAfter <= 0 {
		ok, err = s.exec1(ctx, "mark failed", id, `UPDATE outbox SET status = 'failed', error = ?, updated_at = ?
			WHERE id = ? AND status IN ('queued', 'sending') AND claimed_by = ? AND maybe_sent = 0 AND NOT ?`,
			reason, now, id, worker, maybeArrived)
	} else {
		ok, err = s.exec1(ctx, "requeue", id, `UPDATE outbox SET status = 'queued', error = ?, next_attempt_at = ?,
			claimed_by = NULL, claimed_at = NULL, lease_until = NULL, updated_at = ?, maybe_sent = maybe_sent OR ?
			WHERE id = ? AND status IN ('queued', 'sending') AND claimed_by = ?`, reason, now+retryAfter.Milliseconds(), now, maybeArrived, id, worker)
	}
	if err != nil || ok {
		return err
	}
	return s.whyNot(ctx, id, worker)
}

// MarkReview moves a row worker was sending (or that was cancelled during
// its send) to review: its fate at the destination is unknown, or it is
// there (externalID, when known) and could not be deleted.
func (s *Store) MarkReview(ctx context.Context, id, worker, reason, externalID string) error {
	ok, err := s.exec1(ctx, "mark review", id, `UPDATE outbox SET status = 'review', error = ?, pending_delete = 0,
		external_id = coalesce(nullif(?, ''), external_id), updated_at = ? WHERE id = ? AND claimed_by = ?
		AND (status = 'sending' OR (status = 'cancelled' AND pending_delete = 1))`,
		reason, externalID, s.cfg.Now().UnixMilli(), id, worker)
	if err != nil || ok {
		return err
	}
	return s.whyNot(ctx, id, worker)
}

// FinishCancel completes a cancellation that happened during worker's send,
// once the item is known not to be at the destination (deleted there, or the
// send failed).
func (s *Store) FinishCancel(ctx context.Context, id, worker, externalID string) error {
	ok, err := s.exec1(ctx, "finish cancel", id, `UPDATE outbox SET pending_delete = 0,
		external_id = nullif(?, ''), updated_at = ?
		WHERE id = ? AND status = 'cancelled' AND pending_delete = 1 AND claimed_by = ?`,
		externalID, s.cfg.Now().UnixMilli(), id, worker)
	if err != nil || ok {
		return err
	}
	return s.whyNot(ctx, id, worker)
}

// CancelQueued cancels a row nobody has claimed. ErrTooLate: it is sending.
func (s *Store) CancelQueued(ctx context.Context, id string) error {
	ok, err := s.exec1(ctx, "cancel", id, `UPDATE outbox SET status = 'cancelled', updated_at = ?
		WHERE id = ? AND status = 'queued' AND maybe_sent = 0`, s.cfg.Now().UnixMilli(), id)
	if err != nil || ok {
		return err
	}
	return s.illegal(ctx, id, "cancel")
}

// CancelSending marks a row whose send is in flight as cancelled with a
// delete pending: the sender's write-back will find it and delete the item
// at the destination, or move the row to review if it cannot.
func (s *Store) CancelSending(ctx context.Context, id string) error {
	ok, err := s.exec1(ctx, "cancel in flight", id, `UPDATE outbox SET status = 'cancelled', pending_delete = 1,
		error = 'cancelled while sending; delete at the destination pending', updated_at = ?
		WHERE id = ? AND status = 'sending'`, s.cfg.Now().UnixMilli(), id)
	if err != nil || ok {
		return err
	}
	return s.illegal(ctx, id, "cancel in flight")
}

// CancelDeleted marks a row cancelled after its item was deleted at the
// destination, only if it is still in status from with that external id.
func (s *Store) CancelDeleted(ctx context.Context, id string, from Status, externalID string) error {
	ok, err := s.exec1(ctx, "cancel", id, `UPDATE outbox SET status = 'cancelled', pending_delete = 0, updated_at = ?
		WHERE id = ? AND status = ? AND external_id = ?`, s.cfg.Now().UnixMilli(), id, string(from), externalID)
	if err != nil || ok {
		return err
	}
	return s.illegal(ctx, id, "cancel")
}

// CancelFailed cancels a failed row: nothing of it is at the destination.
func (s *Store) CancelFailed(ctx context.Context, id string) error {
	ok, err := s.exec1(ctx, "cancel", id, `UPDATE outbox SET status = 'cancelled', updated_at = ?
		WHERE id = ? AND status = 'failed' AND maybe_sent = 0`, s.cfg.Now().UnixMilli(), id)
	if err != nil || ok {
		return err
	}
	return s.illegal(ctx, id, "cancel")
}

// illegal explains a transition that changed nothing.
func (s *Store) illegal(ctx context.Context, id, what string) error {
	it, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	if it.Status == StatusSending && what == "cancel" {
		return fmt.Errorf("%w: %s is being sent by %s", ErrTooLate, id, it.ClaimedBy)
	}
	if it.MaybeSent && what == "cancel" && (it.Status == StatusQueued || it.Status == StatusFailed) {
		return fmt.Errorf("%w: %s (%s)", ErrMaybeSent, id, it.Status)
	}
	return fmt.Errorf("%w: cannot %s %s: it is %s", ErrIllegalTransition, what, id, it.Status)
}

// Resolve settles a row in review by a person's decision: sent (with the
// external id found at the destination) or failed.
func (s *Store) Resolve(ctx context.Context, id string, as Status, externalID string) error {
	now := s.cfg.Now().UnixMilli()
	var ok bool
	var err error
	switch as {
	case StatusSent:
		if externalID == "" {
			return fmt.Errorf("%w: resolving %s as sent needs the external id", ErrIllegalTransition, id)
		}
		ok, err = s.exec1(ctx, "resolve", id, `UPDATE outbox SET status = 'sent', external_id = ?, sent_at = ?,
			updated_at = ? WHERE id = ? AND status = 'review'`, externalID, now, now, id)
	case StatusFailed:
		ok, err = s.exec1(ctx, "resolve", id, `UPDATE outbox SET status = 'failed', updated_at = ?
			WHERE id = ? AND status = 'review'`, now, id)
	default:
		return fmt.Errorf("%w: resolve %s as %q: want sent or failed", ErrIllegalTransition, id, as)
	}
	if err != nil || ok {
		return err
	}
	return s.illegal(ctx, id, "resolve")
}

// Retry puts a failed row back in the queue.
func (s *Store) Retry(ctx context.Context, id string) error {
	ok, err := s.exec1(ctx, "retry", id, `UPDATE outbox SET status = 'queued', next_attempt_at = 0,
		claimed_by = NULL, claimed_at = NULL, lease_until = NULL, updated_at = ?
		WHERE id = ? AND status = 'failed'`, s.cfg.Now().UnixMilli(), id)
	if err != nil || ok {
		return err
	}
	return s.illegal(ctx, id, "retry")
}

// Expired is what ExpireLeases did.
type Expired struct {
	Review   []string // sending rows whose worker vanished: moved to review
	Requeued []string // sending rows re-queued because the sink is idempotent
}

// ExpireLeases handles rows of sink whose worker's lease ran out mid-send.
// Such a send is ambiguous. With requeue (the destination honours
// idempotency keys) the row is queued again to be re-sent with the same key;
// otherwise it goes to review, never re-sent automatically. A row cancelled
// during such a send also goes to review: its item may be at the destination.
func (s *Store) ExpireLeases(ctx context.Context, sink string, requeue bool) (Expired, error) {
	now := s.cfg.Now().UnixMilli()
	rows, err := s.writer.QueryContext(ctx, `SELECT id, status, claimed_by FROM outbox
		WHERE sink = ? AND lease_until < ? AND (status = 'sending' OR (status = 'cancelled' AND pending_delete = 1))`, sink, now)
	if err != nil {
		return Expired{}, fmt.Errorf("ledger: expired leases: %w", err)
	}
	type row struct{ id, status, worker string }
	var found []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.status, &r.worker); err != nil {
			rows.Close()
			return Expired{}, err
		}
		found = append(found, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Expired{}, err
	}
	var ex Expired
	for _, r := range found {
		var ok bool
		if requeue && r.status == string(StatusSending) {
			// The send may have landed: maybe_sent keeps that through every
			// later path (no cancel-as-unsent, no failure on a later 4xx).
			ok, err = s.exec1(ctx, "requeue expired", r.id, `UPDATE outbox SET status = 'queued', claimed_by = NULL,
				claimed_at = NULL, lease_until = NULL, next_attempt_at = 0, updated_at = ?, maybe_sent = 1,
				error = 'lease of ' || ? || ' expired mid-send; re-sending with the same idempotency key'
				WHERE id = ? AND status = 'sending' AND claimed_by = ? AND lease_until < ?`, now, r.worker, r.id, r.worker, now)
			if ok {
				ex.Requeued = append(ex.Requeued, r.id)
			}
		} else {
			ok, err = s.exec1(ctx, "review expired", r.id, `UPDATE outbox SET status = 'review', pending_delete = 0, updated_at = ?,
				error = CASE status WHEN 'cancelled' THEN 'cancelled while ' || ? || ' was sending, and its lease expired: the item may be at the destination'
				ELSE 'lease of ' || ? || ' expired mid-send: the item may or may not be at the destination' END
				WHERE id = ? AND status = ? AND claimed_by = ? AND lease_until < ?`, now, r.worker, r.worker, r.id, r.status, r.worker, now)
			if ok {
				ex.Review = append(ex.Review, r.id)
			}
		}
		if err != nil {
			return ex, err
		}
	}
	return ex, nil
}

// CountOutbox counts rows in status created at or after since.
func (s *Store) CountOutbox(ctx context.Context, status Status, since time.Time) (int64, error) {
	var n int64
	if err := s.reader.QueryRowContext(ctx, `SELECT count(*) FROM outbox WHERE status = ? AND created_at >= ?`,
		string(status), since.UnixMilli()).Scan(&n); err != nil {
		return 0, fmt.Errorf("ledger: count outbox: %w", err)
	}
	return n, nil
}
