package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Change names a change of an outbox row's state. Every change is one
// guarded UPDATE … RETURNING built from the transitions table below, so the
// legal moves of the outbox live in one place (DESIGN.md rules 5–9).
type Change string

// The changes. "Owned" ones are made only by the worker that claimed the row
// (Params.Worker), so a late write-back never overwrites what someone else
// decided.
const (
	// Claim: queued → sending, for Params.Worker, with a lease of
	// Params.Lease starting once the claim holds the writer. It records
	// Params.SentTo, where the send about to leave goes (see sentTo).
	Claim Change = "claim"
	// Sent (owned): sending → sent with Params.ExternalID.
	Sent Change = "sent"
	// Retry (owned): sending → queued again after Params.Delay: the send
	// provably did not arrive.
	Retry Change = "retry"
	// RetryMaybeSent (owned): sending → queued again after Params.Delay,
	// with maybe_sent set: the outcome is unknown and the destination
	// honours idempotency keys, so it is sent again with the same key.
	RetryMaybeSent Change = "retry maybe sent"
	// Fail (owned): sending → failed. Refused for a row that may be at the
	// destination (maybe_sent): it goes to Review instead.
	Fail Change = "fail"
	// Review (owned): sending, or cancelled during its send → review: its
	// fate at the destination is unknown, or it is there and could not be
	// deleted. A row cancelled during its send keeps its cancel in review
	// (pending_delete): it is never sent again nor settled as sent.
	Review Change = "review"
	// FinishCancel (owned): a row cancelled during its send → cancelled for
	// good: its item was deleted at the destination, or never got there.
	FinishCancel Change = "finish cancel"
	// Cancel: queued or failed → cancelled: nothing was sent. Refused for a
	// row that may be at the destination (ErrMaybeSent) or is being sent
	// (ErrTooLate).
	Cancel Change = "cancel"
	// CancelInFlight: sending → cancelled with a delete pending: the
	// worker's write-back deletes the item at the destination.
	CancelInFlight Change = "cancel in flight"
	// CancelDeleted: sent or review → cancelled, once its item (by
	// Params.ExternalID) was deleted at the destination.
	CancelDeleted Change = "cancel deleted"
	// CancelStart: sent or review (no cancel pending) → review with its
	// cancel pending, before its item (Params.ExternalID) is deleted at the
	// destination: a cancel that deleted it and could not write so after
	// (the writer gone, an owner fenced) leaves the row pending, which a
	// lookup or a person settles (SettleCancel), never sent with no item.
	CancelStart Change = "cancel started"
	// CancelUndoSent, CancelUndoReview: a row CancelStart moved, whose
	// delete then provably did not delete the item, back as it was (sent,
	// or review with no cancel pending); with Params.Audit, CancelStart's
	// record of it goes too: nothing was done.
	CancelUndoSent   Change = "cancel undone (sent)"
	CancelUndoReview Change = "cancel undone (review)"
	// ResolveSent: review → sent with Params.ExternalID, by a person who
	// found the item at the destination.
	ResolveSent Change = "resolve sent"
	// ResolveFailed: review → failed, by a person who found it is not there.
	ResolveFailed Change = "resolve failed"
	// Requeue: failed → queued, sent again with the same key.
	Requeue Change = "requeue"
	// Found: review → sent, by a lookup that found the item at the
	// destination (with its id there, when it gave one). Refused for a row
	// whose cancel is pending (ErrCancelPending).
	Found Change = "found"
	// Unseen: review → queued, by a lookup the destination answered with
	// "never seen": sent again with the same key, no longer maybe sent.
	// Refused for a row whose cancel is pending (ErrCancelPending).
	Unseen Change = "unseen"
	// SettleCancel: review with a cancel pending → cancelled: the item is
	// not at the destination (a proven lookup never saw it, or it was
	// deleted there by Params.ExternalID), or a person found it absent.
	SettleCancel Change = "settle cancel"
	// LookupLater: review stays review, looked up again after Params.Delay
	// (the destination could not answer now).
	LookupLater Change = "lookup later"
	// Expire (owned by the vanished Params.Worker): sending, or cancelled
	// during its send, whose lease ran out → review; a cancelled one keeps
	// its cancel (pending_delete), as with Review.
	Expire Change = "expire"
	// ExpireRequeue (owned by the vanished Params.Worker): sending whose
	// lease ran out → queued with maybe_sent, for an idempotent sink.
	ExpireRequeue Change = "expire requeue"
)

// Params are the values a change uses; each change reads only its own.
type Params struct {
	Worker     string        // the claimer
	Lease      time.Duration // Claim
	Delay      time.Duration // Retry, RetryMaybeSent: until the next attempt
	Reason     string        // written to the row's error
	ExternalID string        // the destination's id for the item
	SentTo     Destination   // Claim: the destination's instance and position just before
	// Seen, when set, is when a person saw the row, by the ledger's clock
	// (Store.Now) before it was read: a row updated since, or in that
	// millisecond, is not changed, and the error says so (ErrChanged).
	Seen time.Time
	// Audit, when set, records the change as a person's action, in its
	// transaction.
	Audit *Audit
	// Updated is, for CancelUndoSent and CancelUndoReview, the row's
	// updated_at before CancelStart, restored: a person who saw the row
	// before the cancel that did nothing may still act on it.
	Updated time.Time
}

// Audit is a person's action as recorded: who, from where (a client's
// address or host), and a note.
type Audit struct {
	Who, From, Note string
}

// The states a change may start from, as SQL. A row cancelled while its send
// was in flight is "cancelled" with a delete pending until its worker's
// write-back settles it.
const (
	fromQueued     = `status = 'queued'`
	fromSending    = `status = 'sending'`
	fromCancelling = `(status = 'cancelled' AND pending_delete = 1)`
	fromReview     = `status = 'review'`
	cancelPending  = `pending_delete = 1`
	noCancel       = `pending_delete = 0`
	fromFailed     = `status = 'failed'`
	fromSent       = `status = 'sent'`
	releaseClaim   = `claimed_by = NULL, claimed_at = NULL, lease_until = NULL`
)

// sentTo is how a claim records where its send goes. On the instance already
// recorded, the lower position is kept: an earlier copy may be there, and
// the read must start before it. Elsewhere the claim's own is recorded if no
// earlier send may have landed (maybe_sent = 0: each failed provably, or a
// lookup or a person found the item absent); if one may have, the row's
// copies may be in two instances, or (nothing recorded) anywhere, and no
// record is kept: no single instance can then prove the item never arrived.
// A sink that names no instance leaves no record either.
const sentTo = `sent_to_instance = CASE
		WHEN :to = '' THEN NULL
		WHEN sent_to_instance = :to OR maybe_sent = 0 THEN :to
		ELSE NULL END,
	sent_to_position = CASE
		WHEN :to = '' THEN NULL
		WHEN sent_to_instance = :to THEN min(sent_to_position, :pos)
		WHEN maybe_sent = 0 THEN :pos
		ELSE NULL END`

// transition is one row of the table: from which states, whether only the
// claimer may make it, any further guard, the new state and what else is set.
type transition struct {
	from  []string
	owned bool
	guard string
	to    Status
	set   string
}

var transitions = map[Change]transition{
	Claim: {from: []string{fromQueued}, to: StatusSending,
		set: `claimed_by = :worker, claimed_at = :now, lease_until = :now + :lease, attempts = attempts + 1, ` + sentTo},
	Sent: {from: []string{fromSending}, owned: true, to: StatusSent,
		set: `external_id = nullif(:ext, ''), sent_at = :now, error = NULL`},
	Retry: {from: []string{fromSending}, owned: true, to: StatusQueued,
		set: `error = :reason, next_attempt_at = :now + :delay, ` + releaseClaim},
	RetryMaybeSent: {from: []string{fromSending}, owned: true, to: StatusQueued,
		set: `error = :reason, next_attempt_at = :now + :delay, maybe_sent = 1, ` + releaseClaim},
	Fail: {from: []string{fromSending}, owned: true, guard: `maybe_sent = 0`, to: StatusFailed,
		set: `error = :reason`},
	Review: {from: []string{fromSending, fromCancelling}, owned: true, to: StatusReview,
		set: `error = :reason, external_id = coalesce(nullif(:ext, ''), external_id)`},
	FinishCancel: {from: []string{fromCancelling}, owned: true, to: StatusCancelled,
		set: `pending_delete = 0, external_id = nullif(:ext, '')`},
	Cancel: {from: []string{fromQueued, fromFailed}, guard: `maybe_sent = 0`, to: StatusCancelled},
	CancelInFlight: {from: []string{fromSending}, to: StatusCancelled,
		set: `pending_delete = 1, error = 'cancelled while sending; delete at the destination pending'`},
	CancelDeleted: {from: []string{fromSent, fromReview}, guard: `external_id = :ext`, to: StatusCancelled,
		set: `pending_delete = 0`},
	CancelStart: {from: []string{fromSent, fromReview}, guard: `external_id = :ext AND ` + noCancel, to: StatusReview,
		set: `pending_delete = 1, error = coalesce(error, 'cancelled by a person; deleting it at the destination')`},
	CancelUndoSent: {from: []string{fromReview}, guard: `external_id = :ext AND ` + cancelPending, to: StatusSent,
		set: `pending_delete = 0, error = NULL, updated_at = :updated`}, // the last assignment of a column wins
	CancelUndoReview: {from: []string{fromReview}, guard: `external_id = :ext AND ` + cancelPending, to: StatusReview,
		set: `pending_delete = 0, updated_at = :updated`},
	ResolveSent: {from: []string{fromReview}, guard: `:ext <> '' AND ` + noCancel, to: StatusSent,
		set: `external_id = :ext, sent_at = :now, error = NULL`}, // the send's error no longer stands
	ResolveFailed: {from: []string{fromReview}, guard: noCancel, to: StatusFailed,
		set: `maybe_sent = 0, error = 'resolved as not sent by a person (the send said: ' || coalesce(error, '') || ')'`},
	Requeue: {from: []string{fromFailed}, to: StatusQueued, set: `next_attempt_at = 0, ` + releaseClaim},
	Found: {from: []string{fromReview}, guard: noCancel, to: StatusSent,
		set: `external_id = coalesce(nullif(:ext, ''), external_id), sent_at = :now, error = NULL`},
	Unseen: {from: []string{fromReview}, guard: noCancel, to: StatusQueued,
		set: `maybe_sent = 0, next_attempt_at = 0, error = :reason, ` + releaseClaim},
	SettleCancel: {from: []string{fromReview}, guard: cancelPending, to: StatusCancelled,
		set: `pending_delete = 0, external_id = coalesce(nullif(:ext, ''), external_id), error = coalesce(nullif(:reason, ''), error)`},
	LookupLater: {from: []string{fromReview}, to: StatusReview, set: `next_attempt_at = :now + :delay, error = :reason`},
	Expire: {from: []string{fromSending, fromCancelling}, owned: true, guard: leaseOver, to: StatusReview,
		set: `error = CASE WHEN status = 'cancelled' THEN 'cancelled while ' || :worker ||
			' was sending, and its lease expired: the item may be at the destination'
			WHEN claimed_at > :now + ` + clockStepSlackMs + ` THEN 'claimed by ' || :worker ||
			' at a time ahead of the ledger''s clock (it stepped back): its lease cannot be judged, and the item may or may not be at the destination'
			ELSE 'lease of ' || :worker || ' expired mid-send: the item may or may not be at the destination' END`},
	ExpireRequeue: {from: []string{fromSending}, owned: true, guard: leaseOver, to: StatusQueued,
		set: `maybe_sent = 1, next_attempt_at = 0, error = 'lease of ' || :worker ||
			' expired mid-send; re-sending with the same idempotency key', ` + releaseClaim},
}

// A lease is judged on the ledger's clock. leaseOver is a lease that ran
// out, or one claimed more than a minute ahead of the clock now: the
// clock stepped back since (NTP correcting one that ran ahead), and by it
// that lease would last as long as the step. Its send is as ambiguous as an
// expired one, so it is expired (review, or a re-send with the same key);
// a smaller step back only lengthens a lease by the step.
const (
	clockStepSlackMs = "60000" // a minute, in the ledger's milliseconds
	leaseOver        = `(lease_until < :now OR claimed_at > :now + ` + clockStepSlackMs + `)`
)

// seenMs is Params.Seen as the ledger's milliseconds, 0 when unset.
func seenMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// query builds the guarded UPDATE of a change.
func (t transition) query() string {
	var b strings.Builder
	b.WriteString(`UPDATE outbox SET status = '` + string(t.to) + `', updated_at = :now`)
	if t.set != "" {
		b.WriteString(", " + t.set)
	}
	b.WriteString(` WHERE id = :id AND (` + strings.Join(t.from, " OR ") + `) AND (:seen = 0 OR updated_at < :seen)`)
	if t.owned {
		b.WriteString(` AND claimed_by = :worker`)
	}
	if t.guard != "" {
		b.WriteString(` AND ` + t.guard)
	}
	b.WriteString(` RETURNING ` + outboxCols)
	return b.String()
}

// Transition makes change c to row id: one guarded UPDATE … RETURNING in a
// write transaction whose clock is read once it holds the writer (a lease
// starts then, not before a wait behind a batch). It returns the row as the
// change left it. When the guard does not hold, nothing changes and the error
// says why: ErrNotFound, ErrNotClaimed (Claim: someone else has it, not a
// failure), ErrCancelled (an owned write-back found the row cancelled during
// its send: delete the item at the destination), ErrNotOwner, ErrTooLate,
// ErrMaybeSent, ErrCancelPending or ErrIllegalTransition.
func (s *Store) Transition(ctx context.Context, id string, c Change, p Params) (OutboxItem, error) {
	t, ok := transitions[c]
	if !ok {
		return OutboxItem{}, fmt.Errorf("%w: unknown change %q", ErrIllegalTransition, c)
	}
	tx, err := s.write(ctx) // BEGIN IMMEDIATE: the wait for the writer is here
	if err != nil {
		return OutboxItem{}, fmt.Errorf("ledger: %s %s: %w", c, id, interpret(err))
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	now := s.cfg.Now().UnixMilli()
	it, err := scanItem(tx.QueryRowContext(ctx, t.query(), sql.Named("id", id), sql.Named("now", now),
		sql.Named("worker", p.Worker), sql.Named("lease", p.Lease.Milliseconds()), sql.Named("delay", p.Delay.Milliseconds()),
		sql.Named("reason", p.Reason), sql.Named("ext", p.ExternalID),
		sql.Named("to", p.SentTo.Instance), sql.Named("pos", int64(p.SentTo.Position)), sql.Named("seen", seenMs(p.Seen)), sql.Named("updated", p.Updated.UnixMilli())))
	if errors.Is(err, sql.ErrNoRows) {
		tx.Rollback() //nolint:errcheck // nothing changed; explain reads on its own
		return OutboxItem{}, s.refused(ctx, id, c, t, p)
	}
	if err == nil && p.Audit != nil {
		err = auditChange(ctx, tx, now, p.Audit, c, id)
	}
	if err != nil {
		return OutboxItem{}, fmt.Errorf("ledger: %s %s: %w", c, id, s.explainFull(interpret(err)))
	}
	if err := tx.Commit(); err != nil {
		return OutboxItem{}, fmt.Errorf("ledger: %s %s: %w", c, id, s.explainFull(interpret(err)))
	}
	return it, nil
}

// StateError is a change the row's state did not allow. It wraps the
// sentinel that says why (ErrNotClaimed, ErrCancelled, ErrNotOwner,
// ErrTooLate, ErrMaybeSent, ErrCancelPending or ErrIllegalTransition).
type StateError struct {
	ID        string
	Change    Change
	Status    Status // the row's state when the change was refused
	ClaimedBy string
	Err       error
}

func (e *StateError) Error() string {
	switch e.Err {
	case ErrTooLate:
		return fmt.Sprintf("%v: %s is being sent by %s", e.Err, e.ID, e.ClaimedBy)
	case ErrNotOwner:
		return fmt.Sprintf("%v: %s is %s (claimed by %q)", e.Err, e.ID, e.Status, e.ClaimedBy)
	case ErrIllegalTransition:
		return fmt.Sprintf("%v: cannot %s %s: it is %s", e.Err, e.Change, e.ID, e.Status)
	}
	return fmt.Sprintf("%v: %s (%s)", e.Err, e.ID, e.Status)
}

func (e *StateError) Unwrap() error { return e.Err }

// refused explains a change whose guard did not hold.
func (s *Store) refused(ctx context.Context, id string, c Change, t transition, p Params) error {
	it, err := s.Get(ctx, id)
	if c == Claim && errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: %w", ErrNotClaimed, err) // gone meanwhile: not ours to send
	}
	if err != nil {
		return err
	}
	e := &StateError{ID: id, Change: c, Status: it.Status, ClaimedBy: it.ClaimedBy, Err: ErrIllegalTransition}
	switch {
	case !p.Seen.IsZero() && it.UpdatedAt.UnixMilli() >= p.Seen.UnixMilli():
		e.Err = ErrChanged
	case c == Claim:
		e.Err = ErrNotClaimed
	case t.owned && it.Status == StatusCancelled && it.PendingDelete && it.ClaimedBy == p.Worker:
		e.Err = ErrCancelled
	case t.owned && (it.ClaimedBy != p.Worker || it.Status != StatusSending):
		e.Err = ErrNotOwner
	case c == Cancel && it.Status == StatusSending:
		e.Err = ErrTooLate
	case it.MaybeSent && (c == Cancel || c == Fail):
		e.Err = ErrMaybeSent
	case it.Status == StatusReview && it.PendingDelete && (c == Found || c == Unseen || c == ResolveSent || c == ResolveFailed):
		e.Err = ErrCancelPending
	}
	return e
}
