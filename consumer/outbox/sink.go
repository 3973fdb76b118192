package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

// Sink is a destination for outbox items: a webhook, an email API, a
// payment provider. Send must pass item.ID downstream as the idempotency key.
type Sink interface {
	// Name is the sink's name in the outbox's sink column.
	Name() string
	// Send delivers the item and returns the destination's id for it. Its
	// error should be a *SendError saying whether the item may have arrived.
	Send(ctx context.Context, item ledger.OutboxItem) (externalID string, err error)
	// Idempotent reports that the destination honours idempotency keys, so a
	// send whose outcome is unknown may be repeated with the same key.
	Idempotent() bool
	// Timeout bounds one Send or Delete.
	Timeout() time.Duration
}

// Deleter is a sink that can remove a delivered item at the destination by
// its id there, so a row cancelled after its send can be deleted. It returns
// nil only when the destination said it deleted the item. A destination
// that says it holds no such item (an HTTP 404) is an error wrapping
// ErrNoSuchItem: the item may be gone, or the delete may not reach it (a
// URL with no route), so the outbox believes it only once proved (see
// Cancel). An error that provably removed nothing wraps ErrNotDeleted;
// any other may have removed the item (ErrDeleteOutcomeUnknown).
// errors.ErrUnsupported says this sink cannot delete (not configured).
type Deleter interface {
	Delete(ctx context.Context, externalID string) error
}

// Looker is a sink that can ask the destination whether it holds an item,
// by its idempotency key (the row id), so that rows in review settle
// themselves: found means sent (with the destination's id for it, when it
// gives one); not found means the destination never saw it, so it is sent
// again with the same key. An error means the destination cannot say now
// (or, for a Positioner, cannot prove it for this row: the instance in
// item.SentTo is gone, or nothing was recorded); errors.ErrUnsupported,
// that this sink cannot look up (not configured).
type Looker interface {
	Lookup(ctx context.Context, item ledger.OutboxItem) (externalID string, found bool, err error)
}

// Positioner is a sink whose destination has instances and positions, as a
// stream has (its name and creation time; its last sequence). The
// dispatcher asks it just before it claims rows and records the answer with
// each claim, so before the send leaves (ledger.OutboxItem.SentTo): its
// Looker can then read the instance the row's sends went to, from before the
// first of them, and need trust no clock, nor any other instance, to say
// "never seen". While Position fails nothing is claimed.
type Positioner interface {
	Position(ctx context.Context) (ledger.Destination, error)
}

// What a failed send means for the item. A *SendError wraps one of these.
var (
	// ErrRejected: the destination refused the item (a 4xx); it is not
	// there and sending it again will not help. The row is failed.
	ErrRejected = errors.New("outbox: send rejected by the destination")
	// ErrRetryable: the item provably did not arrive: connection refused, or
	// a status the destination documents as "not processed" (429, say).
	// Retried with backoff, then failed.
	ErrRetryable = errors.New("outbox: send failed, retryable")
	// ErrAmbiguous: the item may or may not have arrived (a timeout, reset or
	// 5xx after the request left). Re-sent only to an idempotent destination,
	// with the same key; otherwise the row goes to review.
	ErrAmbiguous = errors.New("outbox: send outcome unknown")
	// ErrStillAtDestination: a cancel could not delete the sent item at the
	// destination; the row is unchanged.
	ErrStillAtDestination = errors.New("outbox: item is still at the destination")
)

// SendError is a failed send with what is known about it.
type SendError struct {
	Kind   error  // ErrRejected, ErrRetryable or ErrAmbiguous
	Status int    // HTTP status or similar; 0 when there was no response
	Detail string // an excerpt of the response, or the transport error
}

func (e *SendError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("status %d: %s", e.Status, e.Detail)
	}
	return e.Detail
}

func (e *SendError) Unwrap() error { return e.Kind }

// Retainer is a Positioner that can say whether its destination is still
// the instance recorded (else ErrOtherInstance) and still holds everything
// stored after a position (else ErrNotHeld). A destination that
// deduplicates by key from what it holds (a stream's duplicate window is
// rebuilt from its messages when the server restarts) may forget a key
// whose copy was removed (a purge): a same-key re-send is then safe only
// while nothing since the row's first send was removed.
type Retainer interface {
	HoldsSince(ctx context.Context, since ledger.Destination) error
}
