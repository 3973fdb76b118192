package consumer

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrInvalidConfig: a Config field is missing or out of range.
	ErrInvalidConfig = errors.New("consumer: invalid configuration")
	// ErrMissingMsgID: a message arrived without a Nats-Msg-Id header and
	// Config.AllowSequenceIDs is off. It is dead-lettered.
	ErrMissingMsgID = errors.New("consumer: message has no Nats-Msg-Id header")
	// ErrBadMsgID: a Nats-Msg-Id the ledger will not store (too long). The
	// message is dead-lettered.
	ErrBadMsgID = errors.New("consumer: unusable Nats-Msg-Id")
	// ErrPushConsumer: the durable exists but is a push consumer.
	ErrPushConsumer = errors.New("consumer: durable is a push consumer; jetledger needs a pull consumer")
	// ErrConsumerGone: the durable or its stream was deleted while running.
	ErrConsumerGone = errors.New("consumer: durable consumer or stream was deleted")
	// ErrFilterMismatch: the durable exists with other subject filters than
	// Config.FilterSubjects: it would feed this ledger another share of the
	// stream (another partition's, or all of them).
	ErrFilterMismatch = errors.New("consumer: the durable's subject filter is not the one asked for")
)

// TermError marks a handler error as permanent: the message is recorded as
// a dead letter and terminated, never retried. Make one with Term.
type TermError struct{ Err error }

// Term wraps err so that the consumer dead-letters the message at once.
func Term(err error) error { return &TermError{Err: err} }

func (e *TermError) Error() string { return fmt.Sprintf("permanent failure: %v", e.Err) }
func (e *TermError) Unwrap() error { return e.Err }

// RetryError asks for redelivery after Delay instead of the default backoff.
// Make one with RetryAfter.
type RetryError struct {
	Delay time.Duration
	Err   error
}

// RetryAfter wraps err so that the message is redelivered after d.
func RetryAfter(d time.Duration, err error) error { return &RetryError{Delay: d, Err: err} }

func (e *RetryError) Error() string { return fmt.Sprintf("retry after %s: %v", e.Delay, e.Err) }
func (e *RetryError) Unwrap() error { return e.Err }
