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

// CancelDeadlines bound what an outbox worker does with a row cancelled
// while its send was in flight, so that all of it happens inside the claim
// lease that began at claimed (DESIGN.md rule 4): the delete at the
// destination and the lookups that confirm a "no such item" end by
// destination, which leaves the lease's margin over the sink timeout for
// the write-back; that ends by writeBack, the lease's end. A row whose
// cancel is not settled by then is expired to review with its cancel kept.
func CancelDeadlines(claimed time.Time, lease, sinkTimeout time.Duration) (destination, writeBack time.Time) {
	writeBack = claimed.Add(lease)
	return writeBack.Add(sinkTimeout - lease), writeBack
}
