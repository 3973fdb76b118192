package ackwait

import (
	"cmp"
	"fmt"
	"time"
)

// LeaseMarginDefault is the time a claim lease allows beyond the sink
// timeout for the write-back of the result.
const LeaseMarginDefault = 5 * time.Second

// ClaimLease is how long an outbox worker holds a claimed row: the sink's
// timeout plus margin (default LeaseMarginDefault) for writing the result
// back. A row still sending after its lease is treated as abandoned.
func ClaimLease(sinkTimeout, margin time.Duration) time.Duration {
	return sinkTimeout + cmp.Or(margin, LeaseMarginDefault)
}

// ClaimLease is the lease for an outbox dispatcher that shares its ledger with
// a consumer following this plan: a claim and its write-back can wait behind a
// whole batch holding the writer, so that wait is in the lease too.
func (p Plan) ClaimLease(sinkTimeout time.Duration) time.Duration {
	return ClaimLease(sinkTimeout, p.WriterHold()+LeaseMarginDefault)
}

// ValidateLease refuses a lease that does not outlast the sink timeout by
// at least a second: the send could still be in flight when the lease ran out.
func ValidateLease(lease, sinkTimeout time.Duration) error {
	if sinkTimeout <= 0 {
		return fmt.Errorf("%w: sink timeout %s must be positive", ErrInvalidPlan, sinkTimeout)
	}
	if lease < sinkTimeout+time.Second {
		return fmt.Errorf("%w: lease %s, sink timeout %s; the lease must exceed the timeout by at least 1s (use %s)",
			ErrLeaseTooShort, lease, sinkTimeout, ClaimLease(sinkTimeout, 0))
	}
	return nil
}
