package outbox

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

// Outbox is what the dispatcher needs of the store: due rows, and the
// guarded transitions of ledger.Transition.
type Outbox interface {
	Due(ctx context.Context, sink string, limit int) ([]string, error)
	Get(ctx context.Context, id string) (ledger.OutboxItem, error)
	Transition(ctx context.Context, id string, c ledger.Change, p ledger.Params) (ledger.OutboxItem, error)
	ExpireLeases(ctx context.Context, sink string, requeue bool) (ledger.Expired, error)
	Reviewable(ctx context.Context, sink string, limit int) ([]ledger.OutboxItem, error)
	LastSent(ctx context.Context, sink string) (ledger.OutboxItem, bool, error)
	LastSentExcept(ctx context.Context, sink, except string) (ledger.OutboxItem, bool, error)
}

var _ Outbox = (*ledger.Store)(nil)

// Defaults for Config fields left at zero.
const (
	WorkersDefault      = 4
	MaxAttemptsDefault  = 5
	PollIntervalDefault = 250 * time.Millisecond
	LookupEveryDefault  = time.Minute
	BackoffBaseDefault  = time.Second
	BackoffMaxDefault   = time.Minute
)

// Config configures a Dispatcher.
type Config struct {
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
	// Backoff spaces the retries of a row. Default 1s doubling to 1m.
	Backoff ackwait.Backoff
	// PollInterval is how often queued rows and expired leases are looked
	// for when nothing calls Notify. Default 250ms.
	PollInterval time.Duration
	// LookupEvery is how often a row in review is looked up again at the
	// destination, when the sink can (a Looker) and the destination could
	// not answer. Default 1m.
	LookupEvery time.Duration
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// Dispatcher sends outbox rows through a sink: claim, send, write back.
type Dispatcher struct {
	o      Outbox
	sink   Sink
	cfg    Config
	log    *slog.Logger
	id     string
	claims atomic.Uint64
	wake   chan struct{}
	n      struct{ sent, failed, retried, review, deleted, found, unseen, lookupOff atomic.Uint64 }
	lookup lookupState // only the Run goroutine reads and writes it
	// deleteProven: the sink's delete has deleted an item (a 2xx), so its
	// "no such item" is believed (see deleteItem).
	deleteProven atomic.Bool
	// idempotent: unknown outcomes may be sent again (see idempotence).
	idempotent bool
	unready    atomic.Bool // the sink said its destination is unreachable
	unplaced   bool        // the sink's Position failed last round; only Run reads and writes it
}

// New validates cfg; the lease must outlast the sink's timeout.
func New(o Outbox, cfg Config) (*Dispatcher, error) {
	if cfg.Sink == nil {
		return nil, fmt.Errorf("%w: Sink is required", ErrInvalidConfig)
	}
	if cfg.Workers < 0 || cfg.MaxAttempts < 0 || cfg.Lease < 0 || cfg.Backoff.Base < 0 || cfg.Backoff.Max < 0 || cfg.PollInterval < 0 || cfg.LookupEvery < 0 {
		return nil, fmt.Errorf("%w: dispatcher settings must not be negative", ErrInvalidConfig)
	}
	cfg.Workers = cmp.Or(cfg.Workers, WorkersDefault)
	cfg.MaxAttempts = cmp.Or(cfg.MaxAttempts, MaxAttemptsDefault)
	cfg.Lease = cmp.Or(cfg.Lease, ackwait.ClaimLease(cfg.Sink.Timeout(), 0))
	cfg.Backoff.Base = cmp.Or(cfg.Backoff.Base, BackoffBaseDefault)
	cfg.Backoff.Max = cmp.Or(cfg.Backoff.Max, BackoffMaxDefault)
	cfg.PollInterval = cmp.Or(cfg.PollInterval, PollIntervalDefault)
	cfg.LookupEvery = cmp.Or(cfg.LookupEvery, LookupEveryDefault)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := ackwait.ValidateLease(cfg.Lease, cfg.Sink.Timeout()); err != nil {
		return nil, err
	}
	idem, warning := idempotence(cfg.Sink, cfg)
	if warning != "" {
		cfg.Logger.Warn("outbox: "+warning, "sink", cfg.Sink.Name())
	}
	host, _ := os.Hostname()
	b := make([]byte, 4)
	rand.Read(b) //nolint:errcheck // crypto/rand does not fail
	return &Dispatcher{o: o, sink: cfg.Sink, cfg: cfg, log: cfg.Logger,
		id: fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b)), wake: make(chan struct{}, 1), idempotent: idem}, nil
}

// Notify wakes the dispatcher to look for queued rows now, for example
// after a batch that enqueued some has committed.
func (d *Dispatcher) Notify() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Counts are running totals of send outcomes.
type Counts struct {
	Sent, Failed, Retried, Review, Deleted uint64
	// Found and Unseen count rows in review that a lookup at the
	// destination settled: found there (sent), or never seen (sent again).
	Found, Unseen uint64
	// LookupOff is 1 once the sink's lookup denied an item the destination
	// holds: lookups are off, rows in review wait for a person.
	LookupOff uint64
}

// Counts returns the running totals.
func (d *Dispatcher) Counts() Counts {
	return Counts{Sent: d.n.sent.Load(), Failed: d.n.failed.Load(), Retried: d.n.retried.Load(),
		Review: d.n.review.Load(), Deleted: d.n.deleted.Load(), Found: d.n.found.Load(), Unseen: d.n.unseen.Load(), LookupOff: d.n.lookupOff.Load()}
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
		if err != nil && ctx.Err() != nil {
			break // a read or write cut by the stop: nothing to say
		}
		if err != nil {
			failures++
			d.log.WarnContext(ctx, "outbox poll failed", "err", err)
			if failures > 20 {
				return fmt.Errorf("outbox: %w", err)
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
	ex, err := d.o.ExpireLeases(ctx, d.sink.Name(), d.idempotent)
	for _, id := range ex.Review {
		d.n.review.Add(1)
		d.log.WarnContext(ctx, "outbox row's lease expired mid-send; moved to review, not re-sent", "outbox_id", id, "sink", d.sink.Name())
	}
	for _, id := range ex.Requeued {
		d.log.WarnContext(ctx, "outbox row's lease expired mid-send; re-sending with the same idempotency key", "outbox_id", id, "sink", d.sink.Name())
	}
	if err != nil {
		return false, err
	}
	if !d.ready(ctx) {
		return false, nil
	}
	if err := d.settleReview(ctx); err != nil {
		return false, err
	}
	free := cap(slots) - len(slots)
	if free == 0 {
		slots <- struct{}{} // wait for a worker
		<-slots
		return true, nil
	}
	ids, err := d.o.Due(ctx, d.sink.Name(), free)
	if err != nil || len(ids) == 0 {
		return false, err
	}
	to, ok := d.position(ctx)
	if !ok {
		return false, nil
	}
	for _, id := range ids {
		if ctx.Err() != nil {
			return false, nil // stopping: claim nothing more
		}
		it, token, claimed, err := d.claim(ctx, id, to)
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
			d.deliver(ctx, it, token, claimed)
		}()
	}
	return len(ids) == free, nil
}

// claim claims row id for a send to to. A stop (ctx ending) does not cut
// a claim short: one cut mid-write may have reached the changelog all the
// same, and a copy that takes over would find the row claimed by nobody
// and put it in review. The claim completes, and its send goes out as
// sends in flight do (deliver).
func (d *Dispatcher) claim(ctx context.Context, id string, to ledger.Destination) (it ledger.OutboxItem, token string, claimed time.Time, err error) {
	token = fmt.Sprintf("%s#%d", d.id, d.claims.Add(1)) // unique per claim
	claimed = time.Now()                                // the lease starts later, once the claim holds the writer
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.Lease)
	defer cancel()
	it, err = d.o.Transition(cctx, id, ledger.Claim, ledger.Params{Worker: token, Lease: d.cfg.Lease, SentTo: to})
	return it, token, claimed, err
}

// position asks a Positioner where the sends about to be claimed go, read
// before the claims so that every copy they store lies after it. ok is false
// when it cannot say: nothing is claimed, and the rows wait queued.
func (d *Dispatcher) position(ctx context.Context) (ledger.Destination, bool) {
	p, ok := d.sink.(Positioner)
	if !ok {
		return ledger.Destination{}, true
	}
	pctx, cancel := context.WithTimeout(ctx, d.sink.Timeout())
	to, err := p.Position(pctx)
	cancel()
	switch was := d.unplaced; {
	case err != nil && ctx.Err() != nil:
		return ledger.Destination{}, false
	case err != nil && !was:
		d.log.WarnContext(ctx, "outbox: cannot read where sends would go; rows wait queued until it can", "sink", d.sink.Name(), "err", err)
	case err == nil && was:
		d.log.InfoContext(ctx, "outbox: destination readable again; sending", "sink", d.sink.Name())
	}
	d.unplaced = err != nil
	return to, err == nil
}
