package outbox

import "errors"

// ErrInvalidConfig: a Config field is missing or out of range.
var ErrInvalidConfig = errors.New("outbox: invalid configuration")

// ErrDeleteUnconfirmed: the destination answered a delete with "no such
// item" (a 404), and nothing proved that answer: the delete URL has not yet
// deleted an item, and no proven lookup confirmed the item is gone. The item
// may still be there; the row is not cancelled. Such an error also wraps
// ErrStillAtDestination.
var ErrDeleteUnconfirmed = errors.New("outbox: the destination's \"no such item\" to a delete is unconfirmed")

// ErrNotDeleted: a Deleter's delete provably removed nothing: the request
// never reached the destination (connection refused), or the destination
// refused it (a 4xx other than 404 and 410). A cancel then puts the row
// back as it was.
var ErrNotDeleted = errors.New("outbox: the delete provably removed nothing")

// ErrDeleteOutcomeUnknown: a delete failed in a way that may have removed
// the item all the same (a timeout, a reset or a 5xx after the request
// left): what a Deleter's error that wraps neither ErrNotDeleted nor
// ErrNoSuchItem means. A cancel then leaves its row in review with the
// cancel pending, for a lookup or a person to settle: put back as sent, it
// could say sent of an item that is gone. Such an error also wraps
// ErrStillAtDestination (the item may be there).
var ErrDeleteOutcomeUnknown = errors.New("outbox: the delete's outcome is unknown")

// ErrNoSuchItem: a Deleter's destination answered that it holds no item by
// that id (an HTTP 404 or 410). It is not yet a delete: see Deleter.
var ErrNoSuchItem = errors.New("outbox: the destination says it holds no such item")

// ErrOtherInstance: the destination is no longer the instance a row's
// sends went to (a stream deleted and made again), which does not remember
// their keys.
var ErrOtherInstance = errors.New("outbox: the destination is another instance than the row's sends went to")

// ErrNotHeld: a Retainer no longer holds everything stored since the row's
// first send; a key whose copy was removed may be forgotten.
var ErrNotHeld = errors.New("outbox: the destination no longer holds everything since the row's first send")
