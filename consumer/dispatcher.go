package consumer

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/ledger"
)

// Outbox is what the dispatcher needs of the store: the guarded transitions.
type Outbox interface {
	Due(ctx context.Context, sink string, limit int) ([]string, error)
	Get(ctx context.Context, id string) (ledger.OutboxItem, error)
	Claim(ctx context.Context, id, worker string, lease time.Duration) (ledger.OutboxItem, error)
	MarkSent(ctx context.Context, id, worker, externalID string) error
	MarkFailed(ctx context.Context, id, worker, reason string, retryAfter time.Duration, maybeArrived bool) error
	MarkReview(ctx context.Context, id, worker, reason, externalID string) error
	FinishCancel(ctx context.Context, id, worker, externalID string) error
	ExpireLeases(ctx context.Context, sink string, requeue bool) (ledger.Expired, error)
	CancelQueued(ctx context.Context, id string) error
	CancelSending(ctx context.Context, id string) error
	CancelDeleted(ctx context.Context, id string, from ledger.Status, externalID string) error
	CancelFailed(ctx context.Context, id string) error
}

var _ Outbox = (*ledger.Store)(nil)

// Defaults for DispatcherConfig fields left at zero.
const (
	WorkersDefault      = 4
	MaxAttemptsDefault  = 5
	PollIntervalDefault = 250 * time.Millisecond
)

// DispatcherConfig configures a Dispatcher.
type DispatcherConfig struct {
	// Sink receives the items. Required.
	Sink Sink
	// Workers is how many sends run at once. Default 4.
	Workers int
	// Lease is how long a claimed row is held. Default
	// ackwait.ClaimLease(Sink.Timeout(), 0); it must exceed the sink timeout.
	// A dispatcher sharing its Store with a consumer should use the
	// consumer's Plan.ClaimLease: its write-backs can wait behind a batch.
	Lease time.Duration
	// MaxAttempts is how many sends a row gets on retryable failures before
	// it is failed. Default 5.
	MaxAttempts int
	// BackoffBase and BackoffMax space retries: base·2^(attempt-1), capped.
	// Defaults 1s and 1m.
	BackoffBase, BackoffMax time.Duration
	// PollInterval is how often queued rows and expired leases are looked
	// for when nothing calls Notify. Default 250ms.
	PollInterval time.Duration
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// Dispatcher sends outbox rows through a sink: claim, send, write back.
type Dispatcher struct {
	o      Outbox
	sink   Sink
	cfg    DispatcherConfig
	log    *slog.Logger
	id     string
	claims atomic.Uint64
	wake   chan struct{}
	n      struct{ sent, failed, retried, review, deleted atomic.Uint64 }
}

// NewDispatcher validates cfg; the lease must outlast the sink's timeout.
func NewDispatcher(o Outbox, cfg DispatcherConfig) (*Dispatcher, error) {
	if cfg.Sink == nil {
		return nil, fmt.Errorf("%w: Sink is required", ErrInvalidConfig)
	}
	if cfg.Workers < 0 || cfg.MaxAttempts < 0 || cfg.Lease < 0 || cfg.BackoffBase < 0 || cfg.BackoffMax < 0 || cfg.PollInterval < 0 {
		return nil, fmt.Errorf("%w: dispatcher settings must not be negative", ErrInvalidConfig)
	}
	cfg.Workers = cmp.Or(cfg.Workers, WorkersDefault)
	cfg.MaxAttempts = cmp.Or(cfg.MaxAttempts, MaxAttemptsDefault)
	cfg.Lease = cmp.Or(cfg.Lease, ackwait.ClaimLease(cfg.Sink.Timeout(), 0))
	cfg.BackoffBase = cmp.Or(cfg.BackoffBase, BackoffBaseDefault)
	cfg.BackoffMax = cmp.Or(cfg.BackoffMax, BackoffMaxDefault)
	cfg.PollInterval = cmp.Or(cfg.PollInterval, PollIntervalDefault)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := ackwait.ValidateLease(cfg.Lease, cfg.Sink.Timeout()); err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	b := make([]byte, 4)
	rand.Read(b) //nolint:errcheck // crypto/rand does not fail
	return &Dispatcher{o: o, sink: cfg.Sink, cfg: cfg, log: cfg.Logger,
		id: fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b)), wake: make(chan struct{}, 1)}, nil
}

// Notify wakes the dispatcher to look for queued rows now, for example
// after a batch that enqueued some has committed.
func (d *Dispatcher) Notify() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// DispatchCounts are running totals of send outcomes.
type DispatchCounts struct {
	Sent, Failed, Retried, Review, Deleted uint64
}

// Counts returns the running totals.
func (d *Dispatcher) Counts() DispatchCounts {
	return DispatchCounts{Sent: d.n.sent.Load(), Failed: d.n.failed.Load(), Retried: d.n.retried.Load(),
		Review: d.n.review.Load(), Deleted: d.n.deleted.Load()}
}

// Run sends until ctx ends, then lets sends in flight finish and write back
// (each bounded by the sink timeout) and returns nil. It returns an error
// only when the outbox cannot be read.
func (d *Dispatcher) Run(ctx context.Context) error {
	slots := make(chan struct{}, d.cfg.Workers)
	var wg sync.WaitGroup
	defer wg.Wait()
	t := time.NewTicker(d.cfg.PollInterval)
	defer t.Stop()
	failures := 0
	for ctx.Err() == nil {
		busy, err := d.round(ctx, slots, &wg)
		if err != nil {
			failures++
			d.log.WarnContext(ctx, "outbox poll failed", "err", err)
			if failures > 20 {
				return fmt.Errorf("consumer: outbox: %w", err)
			}
		} else {
			failures = 0
		}
		if busy {
			continue // there may be more due right away
		}
		select {
		case <-ctx.Done():
		case <-d.wake:
		case <-t.C:
		}
	}
	return nil
}

// round expires leases, then claims as many due rows as there are free
// workers. busy reports that it claimed a full set.
func (d *Dispatcher) round(ctx context.Context, slots chan struct{}, wg *sync.WaitGroup) (busy bool, err error) {
	ex, err := d.o.ExpireLeases(ctx, d.sink.Name(), d.sink.Idempotent())
	for _, id := range ex.Review {
		d.n.review.Add(1)
		d.log.WarnContext(ctx, "outbox row's lease expired mid-send; moved to review, not re-sent", "outbox_id", id)
	}
	for _, id := range ex.Requeued {
		d.log.WarnContext(ctx, "outbox row's lease expired mid-send; re-sending with the same idempotency key", "outbox_id", id)
	}
	if err != nil {
		return false, err
	}
	free := cap(slots) - len(slots)
	if free == 0 {
		slots <- struct{}{} // wait for a worker
		<-slots
		return true, nil
	}
	ids, err := d.o.Due(ctx, d.sink.Name(), free)
	if err != nil {
		return false, err
	}
	for _, id := range ids {
		token := fmt.Sprintf("%s#%d", d.id, d.claims.Add(1)) // unique per claim
		it, err := d.o.Claim(ctx, id, token, d.cfg.Lease)
		if errors.Is(err, ledger.ErrNotClaimed) {
			continue // another dispatcher has it
		}
		if err != nil {
			return false, err
		}
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			d.deliver(ctx, it, token)
		}()
	}
	return len(ids) == free, nil
}

// deliver sends one claimed item and writes the result back. It runs to the
// end even when ctx ends: a claimed row must not be left in sending.
func (d *Dispatcher) deliver(ctx context.Context, it ledger.OutboxItem, token string) {
	ctx = context.WithoutCancel(ctx)
	sctx, cancel := context.WithTimeout(ctx, d.sink.Timeout())
	ext, err := d.sink.Send(sctx, it)
	cancel()
	wctx, cancel := context.WithTimeout(ctx, d.cfg.Lease)
	defer cancel()
	if err == nil {
		switch werr := d.writeBack(wctx, func() error { return d.o.MarkSent(wctx, it.ID, token, ext) }); {
		case werr == nil:
			d.n.sent.Add(1)
		case errors.Is(werr, ledger.ErrCancelled):
			d.deleteCancelled(wctx, it, token, ext)
		default:
			// The lease ran out and the row moved on (to review, normally).
			d.log.ErrorContext(ctx, "sent, but the result could not be written back; resolve the row with this external id",
				"outbox_id", it.ID, "external_id", ext, "err", werr)
		}
		return
	}

	// An unknown outcome (timeout after the request left, gateway error):
	// the item may be there. It is re-sent only with the same key to an
	// idempotent destination, and never reported failed or cancelled after.
	ambiguous := !errors.Is(err, ErrRejected) && !errors.Is(err, ErrRetryable)
	maybeThere := ambiguous || it.MaybeSent
	reason := fmt.Sprintf("attempt %d: %v", it.Attempts, err)
	var werr error
	switch {
	case errors.Is(err, ErrRejected) && !it.MaybeSent:
		werr = d.writeBack(wctx, func() error { return d.o.MarkFailed(wctx, it.ID, token, reason, 0, false) })
		d.n.failed.Add(1)
	case (ambiguous && !d.sink.Idempotent()) || (maybeThere && (it.Attempts >= d.cfg.MaxAttempts || errors.Is(err, ErrRejected))):
		why := "send outcome unknown, not re-sent: " + reason
		if !ambiguous {
			why = fmt.Sprintf("an earlier attempt's outcome is unknown and this one failed (%s): the item may be at the destination", reason)
		}
		werr = d.writeBack(wctx, func() error { return d.o.MarkReview(wctx, it.ID, token, why, "") })
		d.n.review.Add(1)
		d.log.WarnContext(ctx, "send outcome unknown; outbox row moved to review", "outbox_id", it.ID, "err", err)
	case it.Attempts >= d.cfg.MaxAttempts:
		werr = d.writeBack(wctx, func() error {
			return d.o.MarkFailed(wctx, it.ID, token, fmt.Sprintf("gave up after %d attempts; last %s", it.Attempts, reason), 0, false)
		})
		d.n.failed.Add(1)
	default:
		werr = d.writeBack(wctx, func() error {
			return d.o.MarkFailed(wctx, it.ID, token, reason, d.backoff(it.Attempts), ambiguous)
		})
		d.n.retried.Add(1)
	}
	switch {
	case werr == nil:
	case errors.Is(werr, ledger.ErrCancelled) && maybeThere:
		// Cancelled meanwhile, and the item may have arrived: a person decides.
		if rerr := d.o.MarkReview(wctx, it.ID, token, "cancelled while sending and the send's outcome is unknown: "+reason, ""); rerr != nil {
			d.log.ErrorContext(ctx, "cannot move outbox row to review", "outbox_id", it.ID, "err", rerr)
		}
	case errors.Is(werr, ledger.ErrCancelled):
		// Cancelled meanwhile and the send did not land: nothing to delete.
		if ferr := d.o.FinishCancel(wctx, it.ID, token, ""); ferr != nil {
			d.log.ErrorContext(ctx, "cannot finish cancellation", "outbox_id", it.ID, "err", ferr)
		}
	default:
		d.log.WarnContext(ctx, "send failed and its result could not be written back", "outbox_id", it.ID, "err", werr)
	}
}

// writeBack runs a write-back, retrying what is not a verdict on the row
// (the database busy, say) until ctx, the lease, runs out: giving up early
// would leave a row we own in sending, to be reviewed or re-sent.
func (d *Dispatcher) writeBack(ctx context.Context, f func() error) error {
	for {
		err := f()
		if err == nil || errors.Is(err, ledger.ErrCancelled) || errors.Is(err, ledger.ErrNotOwner) ||
			errors.Is(err, ledger.ErrNotFound) || ctx.Err() != nil {
			return err
		}
		d.log.WarnContext(ctx, "outbox write-back failed; retrying", "err", err)
		t := time.NewTimer(200 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// deleteCancelled deletes an item whose row was cancelled while it was being
// sent. If the delete fails, or the destination gave no id to delete by, the
// row goes to review, never silently to cancelled.
func (d *Dispatcher) deleteCancelled(ctx context.Context, it ledger.OutboxItem, token, ext string) {
	err := errors.New("the destination returned no id for the item, so it cannot be deleted from here")
	if ext != "" {
		dctx, cancel := context.WithTimeout(ctx, d.sink.Timeout())
		err = d.sink.Delete(dctx, ext)
		cancel()
	}
	if err != nil {
		d.n.review.Add(1)
		d.log.ErrorContext(ctx, "outbox row was cancelled while sending and the delete at the destination failed; moved to review",
			"outbox_id", it.ID, "external_id", ext, "err", err)
		if rerr := d.o.MarkReview(ctx, it.ID, token, fmt.Sprintf("cancelled while sending; sent as %q but the delete failed: %v", ext, err), ext); rerr != nil {
			d.log.ErrorContext(ctx, "cannot move outbox row to review", "outbox_id", it.ID, "err", rerr)
		}
		return
	}
	d.n.deleted.Add(1)
	d.log.WarnContext(ctx, "outbox row was cancelled while sending; deleted the item at the destination",
		"outbox_id", it.ID, "external_id", ext)
	if err := d.o.FinishCancel(ctx, it.ID, token, ext); err != nil {
		d.log.ErrorContext(ctx, "cannot finish cancellation", "outbox_id", it.ID, "err", err)
	}
}

func (d *Dispatcher) backoff(attempt int) time.Duration {
	b := d.cfg.BackoffBase
	for i := 1; i < attempt && b < d.cfg.BackoffMax; i++ {
		b *= 2
	}
	return min(b, d.cfg.BackoffMax)
}

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

// Cancel cancels an outbox row. Something already sent is deleted at the
// destination first and cancelled only after that delete succeeded; if it
// fails the error wraps ErrStillAtDestination and the row is unchanged.
func (d *Dispatcher) Cancel(ctx context.Context, id string) (CancelOutcome, error) {
	for range 3 { // the row may change state under us; re-read and retry
		it, err := d.o.Get(ctx, id)
		if err != nil {
			return "", err
		}
		switch it.Status {
		case ledger.StatusQueued, ledger.StatusFailed:
			if it.Status == ledger.StatusQueued {
				err = d.o.CancelQueued(ctx, id)
			} else {
				err = d.o.CancelFailed(ctx, id)
			}
			if errors.Is(err, ledger.ErrTooLate) {
				continue // claimed meanwhile: cancel it in flight
			}
			if errors.Is(err, ledger.ErrMaybeSent) {
				return "", fmt.Errorf("%w: an earlier send of %s timed out, so the item may be there under idempotency key %s; the row is unchanged: check the destination, or let the row be re-sent with the same key (it then has an external id) and cancel again",
					ErrStillAtDestination, id, id)
			}
			if err != nil {
				return "", err
			}
			return CancelledUnsent, nil
		case ledger.StatusSending:
			if err := d.o.CancelSending(ctx, id); errors.Is(err, ledger.ErrIllegalTransition) {
				continue // it finished meanwhile
			} else if err != nil {
				return "", err
			}
			return CancelledInFlight, nil
		case ledger.StatusSent, ledger.StatusReview:
			if it.ExternalID == "" {
				return "", fmt.Errorf("%w: %s is %s with no external id, so it cannot be deleted from here; delete it at the destination, then resolve the row",
					ErrStillAtDestination, id, it.Status)
			}
			dctx, cancel := context.WithTimeout(ctx, d.sink.Timeout())
			err := d.sink.Delete(dctx, it.ExternalID)
			cancel()
			if err != nil {
				return "", fmt.Errorf("%w: %s (external id %s) was not deleted: %v; the row is unchanged (%s)",
					ErrStillAtDestination, id, it.ExternalID, err, it.Status)
			}
			if err := d.o.CancelDeleted(ctx, id, it.Status, it.ExternalID); err != nil {
				return "", err
			}
			d.n.deleted.Add(1)
			return CancelledDeleted, nil
		default:
			return "", fmt.Errorf("%w: %s is already %s", ledger.ErrIllegalTransition, id, it.Status)
		}
	}
	return "", fmt.Errorf("consumer: cancel %s: the row kept changing; try again", id)
}
