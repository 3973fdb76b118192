package changelog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// LeaseBucket is the KV bucket of the partitions' leases, one key per
// partition, each expiring TTL after its owner's last renewal.
const LeaseBucket = "JETLEDGER_LEASES"

// Lease is a partition's ownership: a key in LeaseBucket created by the
// owner and updated only with the revision it last wrote, so two
// processes can never both believe a renewal succeeded. The bucket's TTL
// lets the key go once its owner stops renewing.
type Lease struct {
	kv    jetstream.KeyValue
	key   string
	owner string
	ttl   time.Duration

	mu      sync.Mutex
	rev     uint64    // the revision this owner wrote last; 0: not held
	renewed time.Time // when the last successful write was sent
}

// OpenLease opens (creating the bucket if it is missing) the lease of the
// partition durable of stream, for owner, with ttl. A bucket made before
// keeps its TTL; one that differs from ttl is refused.
func OpenLease(ctx context.Context, js jetstream.JetStream, stream, durable, owner string, ttl time.Duration, replicas int) (*Lease, error) {
	if owner == "" || ttl < time.Second {
		return nil, fmt.Errorf("%w: a lease needs an owner and a TTL of 1s or more (have %q, %v)", ErrInvalidConfig, owner, ttl)
	}
	kv, err := js.KeyValue(ctx, LeaseBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: LeaseBucket, TTL: ttl, History: 1, Replicas: max(replicas, 1),
			Description: "jetledger: who owns each partition"})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, LeaseBucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("changelog: lease bucket %s: %w", LeaseBucket, err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("changelog: lease bucket %s: %w", LeaseBucket, err)
	}
	if st.TTL() != ttl {
		return nil, fmt.Errorf("%w: the lease bucket %s expires keys after %v, this run's lease is %v: give every run of the stream the same timing, or delete the bucket while no run is up",
			ErrInvalidConfig, LeaseBucket, st.TTL(), ttl)
	}
	key := nameSafe.Replace(stream) + "." + nameSafe.Replace(durable)
	return &Lease{kv: kv, key: key, owner: owner, ttl: ttl}, nil
}

// Holder says who holds the lease now ("" when nobody does).
func (l *Lease) Holder(ctx context.Context) (string, error) {
	e, err := l.kv.Get(ctx, l.key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("changelog: read lease %s: %w", l.key, err)
	}
	return string(e.Value()), nil
}

// Acquire takes the lease if nobody holds it; held by another, the error
// wraps ErrLeaseHeld and names the holder.
func (l *Lease) Acquire(ctx context.Context) error {
	sent := time.Now()
	rev, err := l.kv.Create(ctx, l.key, []byte(l.owner))
	if errors.Is(err, jetstream.ErrKeyExists) {
		holder, _ := l.Holder(ctx)
		return fmt.Errorf("%w: %s holds %s", ErrLeaseHeld, holder, l.key)
	}
	if err != nil {
		return fmt.Errorf("changelog: take lease %s: %w", l.key, err)
	}
	l.mu.Lock()
	l.rev, l.renewed = rev, sent
	l.mu.Unlock()
	return nil
}

// Renew writes the lease again with the revision last written: if anyone
// else wrote it since, or it expired, the lease is lost (ErrLeaseLost).
func (l *Lease) Renew(ctx context.Context) error {
	l.mu.Lock()
	rev := l.rev
	l.mu.Unlock()
	if rev == 0 {
		return fmt.Errorf("%w: not held", ErrLeaseLost)
	}
	sent := time.Now()
	next, err := l.kv.Update(ctx, l.key, []byte(l.owner), rev)
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || errors.Is(err, jetstream.ErrKeyNotFound) {
		l.mu.Lock()
		l.rev = 0
		l.mu.Unlock()
		return fmt.Errorf("%w: %s was written by another, or expired: %v", ErrLeaseLost, l.key, err)
	}
	if err != nil {
		return fmt.Errorf("changelog: renew lease %s: %w", l.key, err)
	}
	l.mu.Lock()
	l.rev, l.renewed = next, sent
	l.mu.Unlock()
	return nil
}

// Held says whether the owner may still act: a quarter of the TTL before
// the server could let the key go, counted from when the last successful
// write was sent (the server's clock starts later).
func (l *Lease) Held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rev != 0 && time.Since(l.renewed) < l.ttl-l.ttl/4
}

// Keep renews the lease every quarter TTL until ctx ends, and returns
// ErrLeaseLost once the lease is lost or can no longer be held (renewals
// failing until Held ends). On return with ctx ended it releases the
// lease, so a standby need not wait for the TTL.
func (l *Lease) Keep(ctx context.Context) error {
	t := time.NewTicker(l.ttl / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			l.release()
			return nil
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, l.ttl/4)
		err := l.Renew(rctx)
		cancel()
		if errors.Is(err, ErrLeaseLost) {
			return err
		}
		if !l.Held() {
			return fmt.Errorf("%w: not renewed for %v (%v)", ErrLeaseLost, l.ttl-l.ttl/4, err)
		}
	}
}

// release deletes the key if it is still this owner's.
func (l *Lease) release() {
	l.mu.Lock()
	rev := l.rev
	l.rev = 0
	l.mu.Unlock()
	if rev == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = l.kv.Delete(ctx, l.key, jetstream.LastRevision(rev)) // lost: the TTL lets it go
}

// Owned is the log as its owner's ledger writes it
// (ledger.Config.Changelog): an entry is published only while the lease
// is held, and one whose publish ends after the lease did is reported
// failed, so its transaction is rolled back, not committed. An owner
// paused past its lease (SIGSTOP, a long GC or VM pause) that wakes with a
// batch in hand therefore commits and acknowledges none of it: the stream
// refuses the entry if another owner wrote since, and this check catches
// the one that landed first, which the next owner applies from the log.
func (l *Log) Owned(lease *Lease) ledger.Changelog { return ownedLog{l, lease} }

type ownedLog struct {
	ledger.Changelog
	lease *Lease
}

func (o ownedLog) Append(ctx context.Context, after uint64, parts [][]byte) error {
	if !o.lease.Held() {
		return fmt.Errorf("%w: not renewed in time; entry %d not published", ErrLeaseLost, after+1)
	}
	if err := o.Changelog.Append(ctx, after, parts); err != nil {
		return err
	}
	if !o.lease.Held() {
		return fmt.Errorf("%w: it ended while entry %d was published: the transaction is rolled back, the log keeps the entry for the next owner", ErrLeaseLost, after+1)
	}
	return nil
}
