package ackwait

import "errors"

var (
	// ErrAckWaitTooShort: the consumer's AckWait (or one of its BackOff
	// steps) does not cover the plan's worst case, so a message could be
	// redelivered while it is still being processed.
	ErrAckWaitTooShort = errors.New("ackwait: consumer AckWait is shorter than the plan requires")
	// ErrAckPolicy: the consumer does not use explicit acks, so jetledger
	// cannot ack each message only after its own commit.
	ErrAckPolicy = errors.New("ackwait: consumer must use the explicit ack policy")
	// ErrMaxAckPending: the consumer's MaxAckPending is below the batch size,
	// so a batch can never be fetched whole.
	ErrMaxAckPending = errors.New("ackwait: consumer MaxAckPending is below the batch size")
	// ErrInvalidPlan: a Plan field is out of range.
	ErrInvalidPlan = errors.New("ackwait: invalid plan")
)

// ErrLeaseTooShort: an outbox claim lease that the sink's timeout can outlast,
// so a slow send could be declared abandoned while it is still in flight.
var ErrLeaseTooShort = errors.New("ackwait: outbox claim lease is not longer than the sink timeout")

// ErrInvalidDuration: a string ParseDuration cannot read as a duration.
var ErrInvalidDuration = errors.New("ackwait: invalid duration")
