package ackwait

import (
	"context"
	"time"
)

// Backoff spaces the retries of one thing: a message naked after a failed
// delivery, an outbox send, a fetch, a publish. The n-th retry waits
// Base·2^(n−1), capped at Max. It is the one backoff jetledger uses.
type Backoff struct {
	Base time.Duration // the wait before the first retry
	Max  time.Duration // the longest wait; 0: no cap
}

// Delay is the wait before retry n (1 for the first); n < 1 counts as 1.
func (b Backoff) Delay(n int) time.Duration {
	d := b.Base
	for i := 1; i < n && (b.Max == 0 || d < b.Max); i++ {
		if d > time.Duration(1<<62)/2 {
			break // doubling would overflow
		}
		d *= 2
	}
	if b.Max > 0 {
		d = min(d, b.Max)
	}
	return d
}

// Wait waits Delay(n), or until ctx ends; it reports whether ctx is still
// live.
func (b Backoff) Wait(ctx context.Context, n int) bool { return Sleep(ctx, b.Delay(n)) }

// Sleep waits d (nothing if d is not positive), or until ctx ends; it
// reports whether ctx is still live.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
