package outbox

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

// CancelOutcome says what Cancel did.
type CancelOutcome string

const (
	// CancelledUnsent: the row was queued or failed; nothing was sent.
	CancelledUnsent CancelOutcome = "cancelled before sending"
	// CancelledInFlight: too late, already sending. The row is marked
	// cancelled; when the send returns its item is deleted at the
	// destination, or the row moves to review if that fails.
	CancelledInFlight CancelOutcome = "too late, already sending: marked cancelled; the item will be deleted at the destination when the send returns, or the row moved to review"
	// CancelledDeleted: the item was deleted at the destination, then the
	// row cancelled.
	CancelledDeleted CancelOutcome = "deleted at the destination and cancelled"
)

// deleteTimeoutDefault bounds a delete when no sink says otherwise.
const deleteTimeoutDefault = 10 * time.Second

// Cancel cancels outbox row id. Something already sent is deleted at the
// destination through del first, and cancelled only after that delete
// succeeded; without del, or if the delete fails, the error wraps
// ErrStillAtDestination and the row is unchanged. del may be nil: rows not
// yet sent need no destination.
//
// A destination's "no such item" (ErrNoSuchItem) is also what a delete URL
// with no route answers, so it cancels the row only when a lookup by key
// (del is a Looker), proved by finding another row the destination holds,
// does not find the item either; otherwise the error also wraps
// ErrDeleteUnconfirmed. A Dispatcher's Cancel also believes it once its
// sink's delete has deleted an item.
func Cancel(ctx context.Context, o Outbox, del Deleter, id string) (CancelOutcome, error) {
	return cancelRow(ctx, o, del, nil, id, ledger.Params{})
}

// CancelAs is Cancel as a person's action: p.Seen and p.Audit as in
// ledger.Params (a row changed since Seen is left as it is, ErrChanged,
// before anything is deleted), its other fields unused.
func CancelAs(ctx context.Context, o Outbox, del Deleter, id string, p ledger.Params) (CancelOutcome, error) {
	return cancelRow(ctx, o, del, nil, id, ledger.Params{Seen: p.Seen, Audit: p.Audit})
}

// cancelRow is Cancel, as a person's action when p has Seen and Audit
// (ledger.Params); proven, when not nil, remembers that del has deleted an
// item (see deleteItem).
func cancelRow(ctx context.Context, o Outbox, del Deleter, proven *atomic.Bool, id string, p ledger.Params) (CancelOutcome, error) {
	for range 3 { // the row may change state under us; re-read and retry
		it, err := o.Get(ctx, id)
		if err != nil {
			return "", err
		}
		switch it.Status {
		case ledger.StatusQueued, ledger.StatusFailed:
			_, err = o.Transition(ctx, id, ledger.Cancel, p)
			switch {
			case errors.Is(err, ledger.ErrTooLate):
				continue // claimed meanwhile: cancel it in flight
			case errors.Is(err, ledger.ErrMaybeSent):
				return "", fmt.Errorf("%w: an earlier send of %s had an unknown outcome, so the item may be there under idempotency key %s; the row is unchanged: check the destination, or let the row be re-sent with the same key (it then has an external id) and cancel again",
					ErrStillAtDestination, id, id)
			case err != nil:
				return "", err
			}
			return CancelledUnsent, nil
		case ledger.StatusSending:
			if _, err := o.Transition(ctx, id, ledger.CancelInFlight, p); errors.Is(err, ledger.ErrIllegalTransition) {
				continue // it finished meanwhile
			} else if err != nil {
				return "", err
			}
			return CancelledInFlight, nil
		case ledger.StatusSent, ledger.StatusReview:
			return cancelSent(ctx, o, del, proven, it, p)
		default:
			return "", fmt.Errorf("%w: %s is already %s", ledger.ErrIllegalTransition, id, it.Status)
		}
	}
	return "", fmt.Errorf("outbox: cancel %s: the row kept changing; try again", id)
}

// cancelSent deletes a sent (or reviewed) item at the destination, then
// cancels its row. A row changed since p.Seen is left as it is, before the
// delete. The row first goes to review with its cancel pending
// (CancelStart, recorded as p.Audit's action): a cancel that deletes the
// item and cannot write so after (its writer gone, its owner fenced) leaves
// it pending, for a lookup or a person to settle, and never sent with no
// item at the destination; so does a delete that may have deleted
// (ErrDeleteOutcomeUnknown). A delete that provably did not delete puts
// the row back as it was, and takes the record back.
func cancelSent(ctx context.Context, o Outbox, del Deleter, proven *atomic.Bool, it ledger.OutboxItem, p ledger.Params) (CancelOutcome, error) {
	if !p.Seen.IsZero() && it.UpdatedAt.UnixMilli() >= p.Seen.UnixMilli() {
		return "", &ledger.StateError{ID: it.ID, Change: ledger.CancelDeleted, Status: it.Status, Err: ledger.ErrChanged}
	}
	if it.ExternalID == "" {
		return "", fmt.Errorf("%w: %s is %s with no external id, so it cannot be deleted from here; delete it at the destination, then resolve the row",
			ErrStillAtDestination, it.ID, it.Status)
	}
	if del == nil {
		return "", fmt.Errorf("%w: %s is %s (external id %s) and no way to delete it at the destination was given; the row is unchanged",
			ErrStillAtDestination, it.ID, it.Status, it.ExternalID)
	}
	if it.PendingDelete {
		return "", fmt.Errorf("%w: %s is in review with a cancel pending already (its send or another cancel was deleting it): settle it as a row in review (resolve as failed once the item is not at the destination)",
			ledger.ErrCancelPending, it.ID)
	}
	ext := ledger.Params{ExternalID: it.ExternalID, Seen: p.Seen, Audit: p.Audit}
	if _, err := o.Transition(ctx, it.ID, ledger.CancelStart, ext); err != nil {
		return "", err
	}
	ext.Seen = time.Time{}
	if err := deleteItem(ctx, o, del, proven, it); errors.Is(err, ErrDeleteOutcomeUnknown) {
		return "", fmt.Errorf("%w; the row stays in review with its cancel pending: a lookup by key settles it, or a person once the item is known gone (resolve as failed) or there", err)
	} else if err != nil {
		undo := ledger.CancelUndoSent
		if it.Status == ledger.StatusReview {
			undo = ledger.CancelUndoReview
		}
		ext.Updated = it.UpdatedAt
		if _, uerr := o.Transition(ctx, it.ID, undo, ext); uerr != nil {
			return "", fmt.Errorf("%w; the row is in review with its cancel pending (%v): settle it there once the item is deleted or found absent", err, uerr)
		}
		return "", fmt.Errorf("%w; the row is unchanged (%s): cancel it again once the item can be deleted", err, it.Status)
	}
	// Recorded by its start: the settle carries no record.
	_, err := o.Transition(ctx, it.ID, ledger.SettleCancel, ledger.Params{ExternalID: it.ExternalID,
		Reason: fmt.Sprintf("cancelled by a person; deleted at the destination (%s)", it.ExternalID)})
	if errors.Is(err, ledger.ErrIllegalTransition) {
		if now, gerr := o.Get(ctx, it.ID); gerr == nil && now.Status == ledger.StatusCancelled {
			return CancelledDeleted, nil // the lookup of its review row finished it meanwhile
		}
	}
	if err != nil {
		return "", fmt.Errorf("%w: the item was deleted at the destination and the row stays in review with its cancel pending: settle it there (resolve as failed)", err)
	}
	return CancelledDeleted, nil
}

// Cancel cancels an outbox row through the dispatcher's sink, when it can
// delete; see the package-level Cancel. A "no such item" from the sink is
// believed also once the sink's delete has deleted an item in this
// dispatcher: the same URL template then provably reaches items.
func (d *Dispatcher) Cancel(ctx context.Context, id string) (CancelOutcome, error) {
	return d.CancelAs(ctx, id, ledger.Params{})
}

// CancelAs is Cancel as a person's action (the package-level CancelAs).
func (d *Dispatcher) CancelAs(ctx context.Context, id string, p ledger.Params) (CancelOutcome, error) {
	del, _ := d.sink.(Deleter)
	out, err := cancelRow(ctx, d.o, del, &d.deleteProven, id, ledger.Params{Seen: p.Seen, Audit: p.Audit})
	if out == CancelledDeleted {
		d.n.deleted.Add(1)
	}
	return out, err
}

// deleteItem deletes it (by it.ExternalID) at the destination through del:
// nil when the destination deleted it, or provably does not hold it. A
// "no such item" (ErrNoSuchItem) is believed only from a delete that has
// deleted an item before (proven, which a 2xx sets), or when del's lookup by
// key, proved on another row the destination holds, does not find it: a URL
// with no DELETE route answers 404 to everything, and believing it would
// report every cancel done with the item still there. Any other error wraps
// ErrStillAtDestination, and ErrDeleteUnconfirmed when the 404 is unproved.
func deleteItem(ctx context.Context, o Outbox, del Deleter, proven *atomic.Bool, it ledger.OutboxItem) error {
	timeout := timeoutOf(del)
	dctx, cancel := context.WithTimeout(ctx, timeout)
	err := del.Delete(dctx, it.ExternalID)
	cancel()
	switch {
	case err == nil:
		if proven != nil {
			proven.Store(true)
		}
		return nil
	case errors.Is(err, ErrNotDeleted) || errors.Is(err, errors.ErrUnsupported):
		return fmt.Errorf("%w: %s (external id %s) was not deleted: %v", ErrStillAtDestination, it.ID, it.ExternalID, err)
	case !errors.Is(err, ErrNoSuchItem):
		return &deleteError{fmt.Sprintf("outbox: the delete of %s (external id %s) failed and may have removed it all the same: %v", it.ID, it.ExternalID, err),
			[]error{ErrDeleteOutcomeUnknown, ErrStillAtDestination}}
	case proven != nil && proven.Load():
		return nil // this delete has deleted an item: its "no such item" is true
	}
	said, why := lookedUpGone(ctx, o, del, it, timeout)
	switch said {
	case lookupGone:
		return nil
	case lookupThere:
		return fmt.Errorf("%w: the delete of %s (external id %s) answered %v, but a lookup by key finds the item: the delete URL does not reach it; check it",
			ErrStillAtDestination, it.ID, it.ExternalID, err)
	}
	return &deleteError{fmt.Sprintf("outbox: %s (external id %s) may still be at the destination: its delete answered %v, "+
		"which a delete URL with no route answers too, and %s; check that the delete URL deletes (2xx) the items it names, or configure a lookup by key",
		it.ID, it.ExternalID, err, why), []error{ErrDeleteUnconfirmed, ErrStillAtDestination}}
}

// deleteError is a delete that did not surely delete, with what it may
// mean: a "no such item" nothing proved (ErrDeleteUnconfirmed), or a
// failure that may have deleted all the same (ErrDeleteOutcomeUnknown);
// either way the item may be there (ErrStillAtDestination).
type deleteError struct {
	msg  string
	kind []error
}

func (e *deleteError) Error() string   { return e.msg }
func (e *deleteError) Unwrap() []error { return e.kind }

// lookedUp is what a lookup says of an item whose delete found no such item.
type lookedUp uint8

const (
	lookupCannotSay lookedUp = iota
	lookupGone               // a proved lookup does not find it
	lookupThere              // the lookup finds it: trusted, as a find always is
)

// lookedUpGone asks del's lookup, if it has one, whether the destination
// holds it; "not found" counts only from a lookup that finds another sent
// row (the newest but it), as settleReview proves its lookup. why says what
// was missing when it cannot say.
func lookedUpGone(ctx context.Context, o Outbox, del Deleter, it ledger.OutboxItem, timeout time.Duration) (lookedUp, string) {
	look, ok := del.(Looker)
	if !ok {
		return lookupCannotSay, "the sink cannot look items up to confirm it"
	}
	find := func(x ledger.OutboxItem) (bool, error) {
		lctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		_, found, err := look.Lookup(lctx, x)
		return found, err
	}
	found, err := find(it)
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return lookupCannotSay, "no lookup by key is configured to confirm it"
	case err != nil:
		return lookupCannotSay, fmt.Sprintf("the lookup by key could not say: %v", err)
	case found:
		return lookupThere, ""
	}
	ref, ok, err := o.LastSentExcept(ctx, it.Sink, it.ID)
	switch {
	case err != nil:
		return lookupCannotSay, fmt.Sprintf("no sent row could be read to prove the lookup on: %v", err)
	case !ok:
		return lookupCannotSay, "the lookup does not find it, but there is no other sent row to prove the lookup on"
	}
	found, err = find(ref)
	switch {
	case err != nil:
		return lookupCannotSay, fmt.Sprintf("the lookup does not find it, and could not say of sent row %s: %v", ref.ID, err)
	case !found:
		return lookupCannotSay, fmt.Sprintf("the lookup does not find it, but it does not find sent row %s either, so it proves nothing", ref.ID)
	}
	return lookupGone, ""
}

// timeoutOf bounds one request of del: its own timeout, when it has one.
func timeoutOf(del Deleter) time.Duration {
	if s, ok := del.(interface{ Timeout() time.Duration }); ok {
		return s.Timeout()
	}
	return deleteTimeoutDefault
}
