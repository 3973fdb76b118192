package outbox

import (
	"context"
	"errors"
	"fmt"
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
func Cancel(ctx context.Context, o Outbox, del Deleter, id string) (CancelOutcome, error) {
	for range 3 { // the row may change state under us; re-read and retry
		it, err := o.Get(ctx, id)
		if err != nil {
			return "", err
		}
		switch it.Status {
		case ledger.StatusQueued, ledger.StatusFailed:
			_, err = o.Transition(ctx, id, ledger.Cancel, ledger.Params{})
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
			if _, err := o.Transition(ctx, id, ledger.CancelInFlight, ledger.Params{}); errors.Is(err, ledger.ErrIllegalTransition) {
				continue // it finished meanwhile
			} else if err != nil {
				return "", err
			}
			return CancelledInFlight, nil
		case ledger.StatusSent, ledger.StatusReview:
			return cancelSent(ctx, o, del, it)
		default:
			return "", fmt.Errorf("%w: %s is already %s", ledger.ErrIllegalTransition, id, it.Status)
		}
	}
	return "", fmt.Errorf("outbox: cancel %s: the row kept changing; try again", id)
}

// cancelSent deletes a sent (or reviewed) item at the destination, then
// cancels its row.
func cancelSent(ctx context.Context, o Outbox, del Deleter, it ledger.OutboxItem) (CancelOutcome, error) {
	if it.ExternalID == "" {
		return "", fmt.Errorf("%w: %s is %s with no external id, so it cannot be deleted from here; delete it at the destination, then resolve the row",
			ErrStillAtDestination, it.ID, it.Status)
	}
	if del == nil {
		return "", fmt.Errorf("%w: %s is %s (external id %s) and no way to delete it at the destination was given; the row is unchanged",
			ErrStillAtDestination, it.ID, it.Status, it.ExternalID)
	}
	timeout := deleteTimeoutDefault
	if s, ok := del.(interface{ Timeout() time.Duration }); ok {
		timeout = s.Timeout()
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	err := del.Delete(dctx, it.ExternalID)
	cancel()
	if err != nil {
		return "", fmt.Errorf("%w: %s (external id %s) was not deleted: %v; the row is unchanged (%s)",
			ErrStillAtDestination, it.ID, it.ExternalID, err, it.Status)
	}
	if _, err := o.Transition(ctx, it.ID, ledger.CancelDeleted, ledger.Params{ExternalID: it.ExternalID}); err != nil {
		return "", err
	}
	return CancelledDeleted, nil
}

// Cancel cancels an outbox row through the dispatcher's sink, when it can
// delete; see the package-level Cancel.
func (d *Dispatcher) Cancel(ctx context.Context, id string) (CancelOutcome, error) {
	del, _ := d.sink.(Deleter)
	out, err := Cancel(ctx, d.o, del, id)
	if out == CancelledDeleted {
		d.n.deleted.Add(1)
	}
	return out, err
}
