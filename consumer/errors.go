package consumer

import (
	"errors"
	"fmt"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/internal/say"
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

// PlanError is a durable that the timing plan refuses where changing the
// durable or shrinking the plan fixes it: a wait too short (Err an
// *ackwait.TooShortError) or a MaxAckPending below the batch (Err wrapping
// ackwait.ErrMaxAckPending). Its message says the nats CLI command that
// fixes the durable and the plan's settings, named as Names says.
type PlanError struct {
	Stream, Durable string
	BatchSize       int               // the plan's
	Err             error             // ackwait.Plan.Validate's refusal
	Names           map[string]string // Config.Names: "Plan.Deadline" to the caller's name
}

// PlanRefusal is err, ackwait.Plan.Validate's refusal of durable on
// stream with a plan of batch messages, as a *PlanError when it is one
// (names: Config.Names); any other error is returned as it is.
func PlanRefusal(stream, durable string, batch int, err error, names map[string]string) error {
	if errors.As(err, new(*ackwait.TooShortError)) || errors.Is(err, ackwait.ErrMaxAckPending) {
		return &PlanError{Stream: stream, Durable: durable, BatchSize: batch, Err: err, Names: names}
	}
	return err
}

func (e *PlanError) Error() string {
	n := func(path string) string { return say.Name(e.Names, path) }
	shrink := fmt.Sprintf("shrink the plan: lower %s or %s (or %s, %s, %s)",
		n("Plan.Deadline"), n("Plan.BatchSize"), n("Plan.BufferWait"), n("Plan.CommitMargin"), n("Plan.AckMargin"))
	var short *ackwait.TooShortError
	switch {
	case errors.As(e.Err, &short) && short.Field == "AckWait":
		return fmt.Sprintf("consumer %s/%s: AckWait is %s but the plan needs at least %s (%s); raise it: nats consumer edit %s %s --wait %s; or %s",
			e.Stream, e.Durable, short.Have, short.Need, short.Plan, e.Stream, e.Durable, short.Need, shrink)
	case short != nil:
		return fmt.Sprintf("consumer %s/%s: %s is %s but the plan needs at least %s (%s), as every redelivery waits that long; "+
			"recreate the consumer with BackOff steps of %s or more; or %s",
			e.Stream, e.Durable, short.Field, short.Have, short.Need, short.Plan, short.Need, shrink)
	}
	return fmt.Sprintf("consumer %s/%s: its MaxAckPending is below %s %d; raise it: nats consumer edit %s %s --max-pending %d; or lower %s",
		e.Stream, e.Durable, n("Plan.BatchSize"), e.BatchSize, e.Stream, e.Durable, e.BatchSize, n("Plan.BatchSize"))
}

func (e *PlanError) Unwrap() error { return e.Err }
