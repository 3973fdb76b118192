package ackwait

import (
	"cmp"
	"fmt"
	"time"
)

// Defaults for Plan fields left at zero.
const (
	DeadlineDefault     = 10 * time.Second
	BatchSizeDefault    = 100
	BufferWaitDefault   = 2 * time.Second
	CommitMarginDefault = 5 * time.Second
	PerMessageDefault   = time.Millisecond
	AckMarginDefault    = 2 * time.Second
)

// Plan is the timing budget of one batch. The zero value is the default plan.
type Plan struct {
	// Deadline bounds the work of one batch: the wait for the single SQLite
	// writer and the handlers. A handler still running then is cancelled and
	// rolled back. Default 10s.
	Deadline time.Duration
	// BatchSize is the most messages fetched and committed together. Default 100.
	BatchSize int
	// BufferWait is the longest a fetched message may wait on the client
	// before its batch starts. Default 2s.
	BufferWait time.Duration
	// CommitMargin covers the COMMIT's fsync on slow storage. Default 5s.
	CommitMargin time.Duration
	// PerMessage is added per message of a full batch for its ledger write
	// and ack. Default 1ms.
	PerMessage time.Duration
	// AckMargin covers the ack's trip to the server and clock skew. Default 2s.
	AckMargin time.Duration
}

// WithDefaults returns p with zero fields set to their defaults.
func (p Plan) WithDefaults() Plan {
	p.Deadline = cmp.Or(p.Deadline, DeadlineDefault)
	p.BatchSize = cmp.Or(p.BatchSize, BatchSizeDefault)
	p.BufferWait = cmp.Or(p.BufferWait, BufferWaitDefault)
	p.CommitMargin = cmp.Or(p.CommitMargin, CommitMarginDefault)
	p.PerMessage = cmp.Or(p.PerMessage, PerMessageDefault)
	p.AckMargin = cmp.Or(p.AckMargin, AckMarginDefault)
	return p
}

// Check reports a plan with negative or absurd fields.
func (p Plan) Check() error {
	p = p.WithDefaults()
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"deadline", p.Deadline}, {"buffer wait", p.BufferWait}, {"commit margin", p.CommitMargin},
		{"per-message time", p.PerMessage}, {"ack margin", p.AckMargin}} {
		// Bounded so that their sum, AckWait, cannot overflow: a day is far
		// past any AckWait a server keeps a message for.
		if d.v < 0 || d.v > MaxDuration {
			return fmt.Errorf("%w: %s %s: want 0 to %s", ErrInvalidPlan, d.name, d.v, MaxDuration)
		}
	}
	if p.BatchSize < 0 || p.BatchSize > MaxBatchSize {
		return fmt.Errorf("%w: batch size %d: want 1 to %d", ErrInvalidPlan, p.BatchSize, MaxBatchSize)
	}
	return nil
}

// Bounds of a Plan's fields.
const (
	MaxDuration  = 24 * time.Hour
	MaxBatchSize = 100_000
)

// AckWait is the shortest AckWait that covers the worst case of one message:
// it waits in the buffer, its batch waits for the writer and runs its
// handlers to the deadline, commits and is acked.
func (p Plan) AckWait() time.Duration {
	p = p.WithDefaults()
	return p.BufferWait + p.Deadline + p.CommitTimeout() + p.AckMargin
}

// CommitTimeout bounds a batch's COMMIT, which starts when its work ends (by
// the deadline at the latest): the commit margin plus the per-message cost.
// The ledger is given this bound for every batch.
func (p Plan) CommitTimeout() time.Duration {
	p = p.WithDefaults()
	return p.CommitMargin + time.Duration(p.BatchSize)*p.PerMessage
}

// WriterHold is the longest one batch holds the single SQLite writer: its
// work and its commit. Anything else that needs the writer (an outbox claim
// or write-back, another process's batch) may wait this long for it.
func (p Plan) WriterHold() time.Duration {
	p = p.WithDefaults()
	return p.Deadline + p.CommitTimeout()
}

// PruneHold is the longest a prune holds the writer in one step: about one
// batch's commit (25 ms), and never more than a tenth of the deadline,
// since the wait for the writer counts against a batch's deadline and its
// commit latency.
func (p Plan) PruneHold() time.Duration {
	return min(p.WithDefaults().Deadline/10, 25*time.Millisecond)
}

// InProgressInterval is how often a batch still running (its work or its
// commit) tells the server it is working on its messages, resetting their
// AckWait: three times per AckWait, so one lost InProgress does not cost the
// message.
func (p Plan) InProgressInterval() time.Duration {
	return p.AckWait() / 3
}

// Admission says what to do with a buffered message about to be processed.
type Admission uint8

const (
	// Process it: the plan's budget still holds.
	Process Admission = iota + 1
	// Refresh it with InProgress first: it waited longer than BufferWait but
	// its AckWait has not run out, so resetting the timer restores the budget.
	Refresh
	// Skip it: its AckWait has (nearly) run out and the server may already
	// have redelivered it. Leave it to redelivery instead of processing blind.
	Skip
)

// Admit decides by how long a message has been on the client (since it was
// received) whether it may be processed now (see nats.go issue 1929).
func (p Plan) Admit(age time.Duration) Admission {
	p = p.WithDefaults()
	switch {
	case age <= p.BufferWait:
		return Process
	case age < p.AckWait()-p.AckMargin:
		return Refresh
	default:
		return Skip
	}
}

// String spells out how AckWait is made up, for error messages and `check`.
func (p Plan) String() string {
	p = p.WithDefaults()
	return fmt.Sprintf("buffer %s + deadline %s + commit %s + ack %s = %s",
		p.BufferWait, p.Deadline, p.CommitTimeout(), p.AckMargin, p.AckWait())
}

// TooShortError is returned by Validate when a wait is below the plan. It
// wraps ErrAckWaitTooShort.
type TooShortError struct {
	Field string        // "AckWait" or "BackOff[i]"
	Have  time.Duration // the consumer's value
	Need  time.Duration // the plan's AckWait
	Plan  Plan
}

func (e *TooShortError) Error() string {
	return fmt.Sprintf("ackwait: consumer %s is %s but the plan needs at least %s (%s); "+
		"raise the consumer's AckWait to %s or more, or shorten the plan's deadline or batch",
		e.Field, e.Have, e.Need, e.Plan, e.Need)
}

func (e *TooShortError) Unwrap() error { return ErrAckWaitTooShort }

// Durable is what the plan checks of a live consumer, in its own terms (the
// consumer package reads it off a JetStream consumer's configuration).
type Durable struct {
	Name          string
	ExplicitAck   bool            // acks are per message: the only way to ack after each commit
	AckPolicy     string          // the policy's name, for the error when it is not explicit
	AckWait       time.Duration   // how long the server waits for an ack before redelivering
	BackOff       []time.Duration // redelivery waits, each replacing AckWait for its delivery
	MaxAckPending int             // 0 or less: no limit
}

// Validate checks a live consumer against the plan: explicit acks, an
// AckWait (and every BackOff step, which replaces AckWait on redeliveries)
// at least the plan's AckWait, and room for a whole batch.
func (p Plan) Validate(d Durable) error {
	if err := p.Check(); err != nil {
		return err
	}
	p = p.WithDefaults()
	if !d.ExplicitAck {
		return fmt.Errorf("%w: consumer %q has ack policy %s; recreate it with explicit acks", ErrAckPolicy, d.Name, d.AckPolicy)
	}
	need := p.AckWait()
	if d.AckWait < need {
		return &TooShortError{Field: "AckWait", Have: d.AckWait, Need: need, Plan: p}
	}
	for i, b := range d.BackOff {
		if b < need {
			return &TooShortError{Field: fmt.Sprintf("BackOff[%d]", i), Have: b, Need: need, Plan: p}
		}
	}
	if d.MaxAckPending > 0 && d.MaxAckPending < p.BatchSize {
		return fmt.Errorf("%w: consumer %q has MaxAckPending %d, batch size is %d; raise MaxAckPending or shorten the batch",
			ErrMaxAckPending, d.Name, d.MaxAckPending, p.BatchSize)
	}
	return nil
}
