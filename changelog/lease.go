package changelog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/natsconn"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// LeaseBucket is the KV bucket of the partitions' leases, one key per
// partition, each expiring its own TTL after its owner's last renewal.
const LeaseBucket = "JETLEDGER_LEASES"

const (
	leaseStream = "KV_" + LeaseBucket
	// headerLeaseTTL holds the writer's TTL exactly (Nats-TTL is whole
	// seconds), for runs of one partition to compare their timings. A key
	// without it is an earlier version's.
	headerLeaseTTL = "Jetledger-Lease-TTL"
	// metaMadeAgain marks a bucket made by a run that had it open: the one
	// before was deleted under its holders, who may still hold their leases.
	metaMadeAgain = "jetledger-made-again"
	// kvOperation is the header of nats.go's KV delete markers.
	kvOperation = "KV-Operation"
	// codeMsgTTLDisabled: nats-server's JSMessageTTLDisabledErr, a bucket
	// made (again) by a run that has not yet turned per-key TTLs on.
	codeMsgTTLDisabled jetstream.ErrorCode = 10166
)

// Lease is a partition's ownership: a key in LeaseBucket created by the
// owner and updated only with the revision it last wrote, so two
// processes can never both believe a renewal succeeded. Each write sets
// the key's own TTL (nats-server 2.11's per-message TTL), which lets it go
// once its owner stops renewing: partitions of different timings share
// the bucket, whose MaxAge is kept at least as long as any of them.
type Lease struct {
	js       jetstream.JetStream
	key      string
	subject  string // the key's, as read
	put      string // the key's subject as written (behind a domain's API prefix)
	owner    string
	ttl      time.Duration
	replicas int
	log      *slog.Logger

	mu      sync.Mutex
	rev     uint64    // the revision this owner wrote last; 0: not held
	renewed time.Time // when the last successful write was sent
	heldIn  time.Time // the creation of the bucket rev was written in
	stream  jetstream.Stream
	created time.Time // the bucket's, telling it from one made again

	// retain: the next release leaves the key as it is, at kept (Retain);
	// resumed: the last Acquire wrote right after kept, so nobody wrote
	// the key between (Resumed).
	retain  bool
	kept    uint64
	resumed bool
	// doubt: a take's write ended without an answer (a stop cut it short,
	// a timeout): it may have landed, so a release reads the key.
	doubt bool
	// releases counts release calls: a renewal sent before one does not
	// hold the lease again after it (renewedAfter).
	releases uint64
}

// LeaseOption sets an optional part of a Lease.
type LeaseOption func(*Lease)

// LeaseLogger is where the lease says what it did about its bucket (made
// again after it was deleted). Default slog.Default().
func LeaseLogger(log *slog.Logger) LeaseOption {
	return func(l *Lease) { l.log = cmp.Or(log, l.log) }
}

// OpenLease opens (creating the bucket if it is missing) the lease of the
// partition durable of stream, for owner, with ttl. The partition's holder
// having another TTL is refused (a TimingError, ErrInvalidConfig): runs of
// one partition share its timing. Other partitions may have other TTLs.
// With a TimingError the lease is returned too, for a run that waits for
// the holder to go: polled with Holder, the same lease knows the bucket it
// opened, so a bucket made again meanwhile is waited out (Acquire).
func OpenLease(ctx context.Context, js jetstream.JetStream, stream, durable, owner string, ttl time.Duration, replicas int, opts ...LeaseOption) (*Lease, error) {
	if owner == "" || ttl < time.Second {
		return nil, fmt.Errorf("%w: a lease needs an owner and a TTL of 1s or more (have %q, %v)", ErrInvalidConfig, owner, ttl)
	}
	key := nameSafe.Replace(stream) + "." + nameSafe.Replace(durable)
	subject := "$KV." + LeaseBucket + "." + key
	l := &Lease{js: js, key: key, subject: subject, put: natsconn.APIPrefix(js) + subject,
		owner: owner, ttl: ttl, replicas: max(replicas, 1), log: slog.Default()}
	for _, o := range opts {
		o(l)
	}
	if _, err := l.ensure(ctx); err != nil {
		return nil, err
	}
	if _, err := l.Holder(ctx); err != nil {
		var te *TimingError
		if errors.As(err, &te) {
			return l, err
		}
		return nil, err
	}
	return l, nil
}

// ReadHolder says who holds the lease of stream's partition durable now:
// "" when nobody does, or the bucket is not there. It only reads (a
// status must not make the bucket).
func ReadHolder(ctx context.Context, js jetstream.JetStream, stream, durable string) (string, error) {
	s, err := js.Stream(ctx, leaseStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return "", nil
	}
	var m *jetstream.RawStreamMsg
	if err == nil {
		m, err = s.GetLastMsgForSubject(ctx, "$KV."+LeaseBucket+"."+nameSafe.Replace(stream)+"."+nameSafe.Replace(durable))
	}
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("changelog: read the lease of %s/%s: %w", stream, durable, err)
	}
	return keyHolder(m), nil
}

// ensure opens the bucket, making it if it is missing (marked as made
// again when this lease knew one before), and has it keep this lease's
// keys: per-key TTLs on, MaxAge never shorter than the TTL (an earlier
// version's bucket has one TTL for all keys, its MaxAge: it is only ever
// lengthened, so that no key goes before its own TTL).
func (l *Lease) ensure(ctx context.Context) (*jetstream.StreamInfo, error) {
	l.mu.Lock()
	known := l.created
	l.mu.Unlock()
	s, err := l.js.Stream(ctx, leaseStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		s, err = l.create(ctx, !known.IsZero())
	}
	if err != nil {
		return nil, fmt.Errorf("changelog: lease bucket %s: %w", LeaseBucket, err)
	}
	info := s.CachedInfo()
	if cfg := info.Config; !cfg.AllowMsgTTL || cfg.MaxAge > 0 && cfg.MaxAge < l.ttl {
		cfg.AllowMsgTTL = true
		if cfg.MaxAge > 0 {
			cfg.MaxAge = max(cfg.MaxAge, l.ttl)
		}
		if s, err = l.js.UpdateStream(ctx, cfg); err != nil {
			return nil, fmt.Errorf("changelog: lease bucket %s: keep keys of TTL %v: %w", LeaseBucket, l.ttl, err)
		}
		info = s.CachedInfo()
	}
	l.mu.Lock()
	changed := !l.created.IsZero() && !l.created.Equal(info.Created) // said once, by the look that saw it first
	l.stream, l.created = s, info.Created
	l.mu.Unlock()
	if changed {
		l.log.WarnContext(ctx, "changelog: the lease bucket was deleted and is made again: each owner takes its key back; no lease in it is taken for a TTL",
			"bucket", LeaseBucket, "key", l.key, "owner", l.owner)
	}
	return info, nil
}

// create makes the bucket, as a KV bucket whose MaxAge is this lease's
// TTL (which a run of an earlier version, of that TTL, accepts).
func (l *Lease) create(ctx context.Context, again bool) (jetstream.Stream, error) {
	var meta map[string]string
	if again {
		meta = map[string]string{metaMadeAgain: "true"}
	}
	_, err := l.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: LeaseBucket, TTL: l.ttl, History: 1, Replicas: l.replicas,
		Description: "jetledger: who owns each partition", Metadata: meta})
	if err != nil && !errors.Is(err, jetstream.ErrBucketExists) { // made by another meanwhile
		return nil, err
	}
	s, err := l.js.Stream(ctx, leaseStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		// Just made, and not known yet where the look went (a fresh
		// cluster): the server's trouble, tried again (jsretry).
		err = fmt.Errorf("%w: the bucket was just made: %w", jetstream.ErrNoStreamResponse, err)
	}
	return s, err
}

// record is the lease's key as last written.
type record struct {
	holder string        // "" when nobody holds it
	rev    uint64        // the key's last revision (a delete marker's too); 0: never written
	ttl    time.Duration // the holder's TTL; 0 for an earlier version's key
}

// read reads the key; a bucket gone is made again first.
func (l *Lease) read(ctx context.Context) (record, error) {
	var rec record
	err := l.retrying(ctx, func(ctx context.Context) error {
		l.mu.Lock()
		s := l.stream
		l.mu.Unlock()
		m, err := s.GetLastMsgForSubject(ctx, l.subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			rec = record{}
			return nil
		}
		if err != nil {
			return err
		}
		rec = record{rev: m.Sequence, holder: keyHolder(m)}
		if rec.holder != "" {
			rec.ttl, _ = time.ParseDuration(m.Header.Get(headerLeaseTTL))
		}
		return nil
	})
	if err != nil {
		return record{}, fmt.Errorf("changelog: read lease %s: %w", l.key, err)
	}
	return rec, l.agrees(rec)
}

// keyHolder is who the key's last message names: "" for a delete marker
// or one the server wrote as the key expired.
func keyHolder(m *jetstream.RawStreamMsg) string {
	if m.Header.Get(kvOperation) != "" || m.Header.Get(jetstream.MarkerReasonHeader) != "" {
		return ""
	}
	return string(m.Data)
}

// agrees refuses a holder of this partition with another TTL.
func (l *Lease) agrees(rec record) error {
	if rec.holder == "" || rec.ttl == 0 || rec.ttl == l.ttl {
		return nil
	}
	return &TimingError{Holder: rec.holder, Key: l.key, HolderTTL: rec.ttl, TTL: l.ttl}
}

// TimingError: the lease is held by a run of another TTL (another
// --deadline or --batch): runs of one partition must share its timing.
// It is an ErrInvalidConfig; a run that may wait for the holder to stop
// (a plain run restarted with new flags) reads HolderTTL.
type TimingError struct {
	Holder, Key    string
	HolderTTL, TTL time.Duration
}

func (e *TimingError) Error() string {
	return fmt.Sprintf("%v: %s holds the partition's lease %s with a TTL of %v, this run's is %v: runs of one partition must share its timing (the lease's TTL is the consumer's AckWait plus 1s): give this run the holder's, or change it once every run of the partition has stopped and its lease has expired (%v after the last renewal)",
		ErrInvalidConfig, e.Holder, e.Key, e.HolderTTL, e.TTL, e.HolderTTL)
}

func (e *TimingError) Unwrap() error { return ErrInvalidConfig }

// write writes the key after revision after (0: none), with its TTL.
func (l *Lease) write(ctx context.Context, after uint64) (uint64, error) {
	m := nats.NewMsg(l.put)
	m.Data = []byte(l.owner)
	m.Header.Set(headerLeaseTTL, l.ttl.String())
	ack, err := l.js.PublishMsg(ctx, m, jetstream.WithExpectStream(leaseStream), jetstream.WithExpectLastSequencePerSubject(after),
		jetstream.WithMsgTTL(natsconn.KeyTTL(l.ttl)), jetstream.WithRetryAttempts(0))
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// retrying runs op, and once more after the bucket is made again if op
// found it gone.
func (l *Lease) retrying(ctx context.Context, op func(context.Context) error) error {
	err := op(ctx)
	if !bucketGone(err) {
		return err
	}
	l.mu.Lock()
	known := l.created
	l.mu.Unlock()
	info, rerr := l.ensure(ctx)
	if rerr != nil {
		return errors.Join(err, rerr)
	}
	if info.Created.Equal(known) && !ttlDisabled(err) {
		// The bucket is there: the server did not answer in time, or a
		// stream just made is not known yet where the read went (a fresh
		// cluster). Either passes: said as the server's trouble, retried.
		return fmt.Errorf("%w: %w", jetstream.ErrNoStreamResponse, err)
	}
	return op(ctx)
}

// bucketGone says whether err may mean that the bucket is gone: a write
// finds no stream to answer, a read no responders or no stream (whether
// it is gone, ensure asks), or a bucket made again has no per-key TTLs yet.
func bucketGone(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrBucketNotFound) ||
		errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamNotFound || ttlDisabled(err)
}

func ttlDisabled(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == codeMsgTTLDisabled
}

// wrongRevision says whether a write was refused for the key's revision.
func wrongRevision(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// Holder says who holds the lease now ("" when nobody does).
func (l *Lease) Holder(ctx context.Context) (string, error) {
	rec, err := l.read(ctx)
	return rec.holder, err
}

// Acquire takes the lease if nobody holds it; held by another, the error
// wraps ErrLeaseHeld and names the holder. In a bucket made again after a
// deletion it takes none for a TTL: their holders may hold them still.
func (l *Lease) Acquire(ctx context.Context) error {
	rec, err := l.read(ctx)
	if err != nil {
		return err
	}
	// A key naming this owner was written by an earlier try of its own
	// whose answer was lost: taken as a free one, after its revision.
	if rec.holder != "" && rec.holder != l.owner {
		return fmt.Errorf("%w: %s holds %s", ErrLeaseHeld, rec.holder, l.key)
	}
	// After the read, which may have made the bucket again; and MaxAge
	// again: a run of a shorter TTL may have shortened it meanwhile.
	info, err := l.ensure(ctx)
	if err != nil {
		return err
	}
	if age := bucketAge(info); info.Config.Metadata[metaMadeAgain] != "" && age < l.ttl && rec.holder != l.owner {
		return fmt.Errorf("%w: the lease bucket %s was deleted and made again %v ago: whoever held %s may hold it for %v more",
			ErrLeaseHeld, LeaseBucket, age.Round(time.Millisecond), l.key, (l.ttl - age).Round(time.Millisecond))
	}
	sent := time.Now()
	rev, err := l.write(ctx, rec.rev)
	l.mu.Lock()
	l.resumed = err == nil && l.kept != 0 && rec.holder == l.owner && rec.rev == l.kept
	// A new holding (or another's): a Retain of the last one (its Keep
	// ended on a loss) is not this one's, and a stop's release frees the
	// key. A write without an answer keeps the revision retained, for a
	// retry's Resumed and that release.
	l.retain = false
	if err == nil || wrongRevision(err) {
		l.kept = 0
	}
	l.mu.Unlock()
	if wrongRevision(err) {
		// Something was written after what the read saw: another's take,
		// ours whose answer was lost (an election), or nothing new, read
		// from a replica behind (the bucket allows direct gets).
		sent = time.Now()
		rev, err = l.writeAfterRead(ctx, true)
	}
	if errors.Is(err, ErrLeaseHeld) {
		return err
	}
	if err != nil {
		l.mu.Lock()
		l.doubt = true
		l.mu.Unlock()
		return fmt.Errorf("changelog: take lease %s: %w", l.key, err)
	}
	l.hold(rev, sent)
	return nil
}

// takeTries is how often a write that met a newer revision reads the key
// again and, if it is still this owner's (or free, for a take), writes
// after that.
const takeTries = 3

// bucketAge is how long ago the bucket was made, by the server's clock.
func bucketAge(info *jetstream.StreamInfo) time.Duration {
	if info.TimeStamp.IsZero() {
		return time.Since(info.Created)
	}
	return info.TimeStamp.Sub(info.Created)
}

// Renew writes the lease again with the revision last written: if anyone
// else wrote it since, or it expired, the lease is lost (ErrLeaseLost).
// The bucket deleted (so the key with it) while the lease is held, it
// makes the bucket again if need be and takes the key back, which no
// other run takes in a bucket made again before its TTL has passed.
func (l *Lease) Renew(ctx context.Context) error {
	l.mu.Lock()
	rev, heldIn, releases := l.rev, l.heldIn, l.releases
	l.mu.Unlock()
	if rev == 0 {
		return fmt.Errorf("%w: not held", ErrLeaseLost)
	}
	sent := time.Now()
	next, err := l.write(ctx, rev)
	if bucketGone(err) || wrongRevision(err) {
		info, ierr := l.ensure(ctx)
		switch {
		case ierr != nil:
			err = errors.Join(err, ierr)
		case info.Created.Equal(heldIn) && bucketGone(err): // the server did not answer in time
		case info.Created.Equal(heldIn):
			if next, err = l.rewrite(ctx); err != nil {
				l.lose()
				return fmt.Errorf("%w: %s was written by another, or expired: %v", ErrLeaseLost, l.key, err)
			}
		case !l.Held():
			l.lose()
			return fmt.Errorf("%w: the lease bucket %s was made again after this owner's hold of %s had ended", ErrLeaseLost, LeaseBucket, l.key)
		default: // the bucket made again: the key went with the one before
			next, err = l.write(ctx, 0)
			if wrongRevision(err) {
				l.lose()
				return fmt.Errorf("%w: %s was taken in the lease bucket made again: %v", ErrLeaseLost, l.key, err)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("changelog: renew lease %s: %w", l.key, err)
	}
	if !l.renewedAfter(releases, next, sent) {
		return fmt.Errorf("%w: %s was released while its renewal was on its way", ErrLeaseLost, l.key)
	}
	return nil
}

// renewedAfter holds the revision a renewal begun at releases release
// calls wrote, unless a release came since: the owner then believed it
// held a lease whose key the release may have just deleted (helper-18's
// TestAttackAReleaseRacingARenewal, 1 round in 40). The key may still
// name it at rev (the release deleted the one before): the next release
// reads the key, as after a take without an answer.
func (l *Lease) renewedAfter(releases, rev uint64, sent time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.releases != releases {
		l.doubt = true
		return false
	}
	l.held(rev, sent)
	return true
}

// rewrite renews the key after its last revision if that names this
// owner: a renewal whose answer was lost (a timeout) wrote it, and the
// next, sent with the revision before, was refused. Owner names are a
// process's own (host and pid), so nobody else wrote it.
func (l *Lease) rewrite(ctx context.Context) (uint64, error) {
	return l.writeAfterRead(ctx, false)
}

// writeAfterRead reads the key and writes it after the revision read, if
// it names this owner (or nobody, with free): ErrLeaseHeld names another.
// A read may come from a replica behind, so a write refused for a newer
// revision reads again, takeTries times.
func (l *Lease) writeAfterRead(ctx context.Context, free bool) (uint64, error) {
	for try := 0; ; try++ {
		rec, err := l.read(ctx)
		if err != nil {
			return 0, err
		}
		if rec.holder != l.owner && (rec.holder != "" || !free) {
			return 0, fmt.Errorf("%w: %q holds %s", ErrLeaseHeld, rec.holder, l.key)
		}
		rev, err := l.write(ctx, rec.rev)
		if !wrongRevision(err) {
			return rev, err
		}
		if try == takeTries {
			return 0, &behindError{key: l.key, tries: takeTries + 1, err: err}
		}
	}
}

// behindError: each read of the key came from a replica behind the
// stream (an election), so each write after it was refused. It passes
// (jsretry.Transient): the take is tried again, not refused as held.
type behindError struct {
	key   string
	tries int
	err   error
}

func (e *behindError) Error() string {
	return fmt.Sprintf("changelog: the lease key %s was read behind the stream on each of %d tries (a replica behind answers while a leader is elected): %v", e.key, e.tries, e.err)
}

func (e *behindError) Unwrap() error   { return e.err }
func (e *behindError) Transient() bool { return true }

// hold records the revision this owner has just written, sent at sent.
func (l *Lease) hold(rev uint64, sent time.Time) {
	l.mu.Lock()
	l.held(rev, sent)
	l.mu.Unlock()
}

// held is hold with l.mu held.
func (l *Lease) held(rev uint64, sent time.Time) {
	l.rev, l.renewed, l.heldIn, l.doubt = rev, sent, l.created, false
}

func (l *Lease) lose() {
	l.mu.Lock()
	l.rev = 0
	l.mu.Unlock()
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

// Retain has the next release (the end of Keep) leave the key as it is,
// for this owner to take again at once (Acquire, Resumed): an owner whose
// log was deleted begins the new one itself, and proves by the key's
// revision that nobody held the partition between.
func (l *Lease) Retain() {
	l.mu.Lock()
	l.retain = l.rev != 0 // a lease lost has nothing to keep
	l.mu.Unlock()
}

// Resumed says whether the last Acquire took the key right after the
// revision this owner left it at (Retain): nobody wrote it between, so
// nobody owned the partition between.
func (l *Lease) Resumed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.resumed && l.rev != 0
}

// release deletes the key if it is still this owner's, as nats.go's KV
// does (a delete marker), which expires as the key would have. A renewal
// or a take whose answer was lost wrote a revision this owner does not
// know: the delete is refused then (or not tried, for a take: doubt), and
// the key read again is deleted at its own revision if it still names
// this owner (else a run of another timing was refused until the TTL ran
// out after a clean stop).
func (l *Lease) release() {
	l.mu.Lock()
	rev, retain, doubt := l.rev, l.retain, l.doubt
	if rev == 0 {
		rev = l.kept // kept for a take that did not come (a stop): it goes now
	}
	l.rev, l.retain, l.kept, l.resumed, l.doubt = 0, false, 0, false, false
	l.releases++
	if retain {
		l.kept = rev
	}
	l.mu.Unlock()
	if retain || rev == 0 && !doubt {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(2*time.Second, l.ttl))
	defer cancel()
	if rev != 0 {
		if err := l.deleteAt(ctx, rev); err == nil || ctx.Err() != nil {
			return // lost: the TTL lets it go
		}
	}
	l.mu.Lock()
	s := l.stream
	l.mu.Unlock()
	m, err := s.GetLastMsgForSubject(ctx, l.subject)
	if err != nil || keyHolder(m) != l.owner {
		return // gone, deleted, or another's: nothing of this owner's to free
	}
	_ = l.deleteAt(ctx, m.Sequence)
}

// deleteAt writes the key's delete marker after revision rev.
func (l *Lease) deleteAt(ctx context.Context, rev uint64) error {
	m := nats.NewMsg(l.put)
	m.Header.Set(kvOperation, "DEL")
	_, err := l.js.PublishMsg(ctx, m, jetstream.WithExpectStream(leaseStream), jetstream.WithExpectLastSequencePerSubject(rev),
		jetstream.WithMsgTTL(natsconn.KeyTTL(l.ttl)), jetstream.WithRetryAttempts(0))
	return err
}

// Owned is the log as its owner's ledger writes it
// (ledger.Config.Changelog): an entry is published only while the lease
// is held, and one whose publish ends after the lease did is reported
// failed, so its transaction is rolled back, or, a pipelined batch's,
// acknowledged by nothing (the entry kept, the batch is kept too when the
// ledger settles it against the log). An owner
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
	return o.held(after, func() error { return o.Changelog.Append(ctx, after, parts) })
}

// AppendAs is Append with the entry's id chosen by the ledger
// (ledger.EntryAppender): its pipelined batches' entries.
func (o ownedLog) AppendAs(ctx context.Context, after uint64, id string, parts [][]byte) error {
	return o.held(after, func() error { return o.Changelog.(*Log).AppendAs(ctx, after, id, parts) })
}

// held publishes entry after+1 with publish only while the lease is held,
// and fails it if the lease ended meanwhile.
func (o ownedLog) held(after uint64, publish func() error) error {
	if !o.lease.Held() {
		return fmt.Errorf("%w: not renewed in time; entry %d not published", ErrLeaseLost, after+1)
	}
	if err := publish(); err != nil {
		return err
	}
	if !o.lease.Held() {
		return fmt.Errorf("%w: it ended while entry %d was published: this owner acknowledges and sends nothing of its transaction, and the log keeps the entry for the next owner", ErrLeaseLost, after+1)
	}
	return nil
}
