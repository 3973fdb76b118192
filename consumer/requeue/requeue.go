package requeue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jetledger/jetledger/consumer/partition"
	"github.com/jetledger/jetledger/internal/say"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/publisher"
	"github.com/nats-io/nats.go/jetstream"
)

// WaitDefault is Config.Wait left at zero.
const WaitDefault = 30 * time.Second

// Ledger is what Requeue needs of the ledger that keeps the dead letters:
// to delete one once its copy is proven.
type Ledger interface {
	// CheckMayWrite returns the refusal a write would meet (an owned
	// partition's copy: ledger.ErrChangelogCopy), writing nothing.
	CheckMayWrite(ctx context.Context) error
	// RequeuedDeadLetterAs deletes dead letter id, recorded as a
	// person's action when a is set (Config.Audit).
	RequeuedDeadLetterAs(ctx context.Context, id int64, a *ledger.Audit) error
}

var _ Ledger = (*ledger.Store)(nil)

// Config configures Requeue. The zero value is valid.
type Config struct {
	// Wait is how long Requeue waits at an edge for the copy to be sourced
	// from the hub into the dead letter's stream before it keeps the dead
	// letter (ErrNotArrived). Default WaitDefault (30s); negative is
	// invalid.
	Wait time.Duration
	// Logger is the publisher's. Default slog.Default().
	Logger *slog.Logger
	// Names are what the refusals call the settings, by their field names
	// ("Wait"): a command line gives its flags. Default: the field names.
	Names map[string]string
	// Explicit says the caller sets Wait itself, as a command line whose
	// flag has a default does: a zero Wait is refused, not taken as the
	// default. Default false.
	Explicit bool
	// Audit, when set, records the requeue as a person's action in the
	// transaction that deletes the dead letter.
	Audit *ledger.Audit
}

// Validate refuses (*ConfigError) a negative Wait, and with Explicit a
// zero one, naming it as Names says. Requeue validates its Config.
func (c Config) Validate() error {
	if c.Wait < 0 || c.Explicit && c.Wait == 0 {
		return &ConfigError{Reason: fmt.Sprintf("%s %s: want a positive duration (how long to wait at an edge for the copy to be sourced from the hub)",
			say.Name(c.Names, "Wait"), c.Wait)}
	}
	return nil
}

// Result is where a requeue's copy is: in the dead letter's stream at Seq
// (after the dead letter's), stored by the publish Via (at an edge, into
// the hub's stream), or by an Earlier requeue whose copy arrived late, when
// nothing was published.
type Result struct {
	Seq     uint64
	Via     publisher.Ack
	Earlier bool
}

// Check refuses (ErrNoMsgID) a dead letter Requeue cannot requeue whatever
// the server: one without a Nats-Msg-Id, whose copy could not be
// deduplicated. It does no I/O.
func Check(d ledger.DeadLetter) error {
	if d.MessageID == "" {
		return fmt.Errorf("requeue: dead letter %d: %w", d.ID, ErrNoMsgID)
	}
	return nil
}

// Requeue publishes dead letter d's payload and headers with its original
// Nats-Msg-Id into the stream it came from, and only there, through js
// (the server its consumer reads from), then deletes it from l once the
// copy is proven to be in that stream. Any error but the delete's keeps
// the dead letter; a failed delete comes with the Result of the requeue
// that happened.
func Requeue(ctx context.Context, js jetstream.JetStream, l Ledger, d ledger.DeadLetter, cfg Config) (Result, error) {
	if err := cmp.Or(cfg.Validate(), Check(d)); err != nil {
		return Result{}, err
	}
	if l == nil || js == nil {
		return Result{}, fmt.Errorf("%w: no ledger or no JetStream", ErrInvalidConfig)
	}
	cfg.Wait = cmp.Or(cfg.Wait, WaitDefault)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	p, err := publisher.New(js, publisher.Config{Logger: cfg.Logger})
	if err != nil {
		return Result{}, fmt.Errorf("requeue: %w", err)
	}
	// The dead letter is removed once the copy is in: a ledger that would
	// refuse that (an owned partition's copy) is refused first, or its
	// copy would be applied and the dead letter kept, and requeued again.
	if err := l.CheckMayWrite(ctx); err != nil {
		return Result{}, fmt.Errorf("requeue: dead letter %d is kept and nothing was published: %w", d.ID, err)
	}
	r := &requeuer{js: js, wait: cfg.Wait, pub: p, names: cfg.Names}
	res, err := r.republish(ctx, d)
	if err != nil {
		return res, err
	}
	if err := l.RequeuedDeadLetterAs(ctx, d.ID, cfg.Audit); err != nil {
		return res, fmt.Errorf("%w: its copy is in %s seq %d with its original id and will be applied once; discard dead letter %d (another requeue would publish a second copy): %w",
			ErrNotDiscarded, d.Stream, res.Seq, d.ID, err)
	}
	return res, nil
}

// requeuer is one Requeue's parts.
type requeuer struct {
	js    jetstream.JetStream
	wait  time.Duration
	pub   *publisher.Publisher
	names map[string]string // Config.Names
}

// target is where a copy of a dead letter is published: on subject, into
// the stream into (the dead letter's stream s, or at an edge the hub's it
// sources), s's config and its message at the dead letter's sequence (held,
// nil when gone).
type target struct {
	s       jetstream.Stream
	cfg     jetstream.StreamConfig
	held    *jetstream.RawStreamMsg
	subject string
	into    string
}

// resolve finds the dead letter's stream, proves it is the instance the
// dead letter came from as far as it can, and works out target.
func (r *requeuer) resolve(ctx context.Context, d ledger.DeadLetter) (target, error) {
	s, err := r.js.Stream(ctx, d.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return target{}, refused(RemedyOtherServer, "", "requeue dead letter %d: %w: the server reached has no stream %s; it is kept", d.ID, ErrWrongStream, d.Stream)
	}
	if err != nil {
		return target{}, fmt.Errorf("requeue dead letter %d: stream %s: %w; it is kept", d.ID, d.Stream, err)
	}
	t := target{s: s, cfg: s.CachedInfo().Config}
	if t.held, err = sameInstance(ctx, s, d); err != nil {
		return target{}, refused(RemedyOtherServer, "", "requeue dead letter %d: %w; it is kept", d.ID, err)
	}
	if t.subject, err = partition.PublishSubject(t.cfg, d.Subject); err != nil {
		return target{}, refused(RemedyPublishBySubject, d.Stream, "requeue dead letter %d: %w; it is kept", d.ID, err)
	}
	into, src, err := originStream(t.cfg, t.subject)
	if err != nil {
		return target{}, refused(RemedyPublishIntoOrigin, "", "requeue dead letter %d: %w; it is kept", d.ID, err)
	}
	t.into = into
	if src == nil {
		return t, nil
	}
	// The edge's stream stores what the hub's stored, so the hub's mapping
	// (a partitioned hub's) decides what to publish.
	hub, err := sourceConfig(ctx, r.js, src)
	if err != nil {
		return target{}, refused(RemedyHubLink, "", "requeue dead letter %d: the stream %s it sources (domain %q): %w; it is kept", d.ID, src.Name, src.Domain, err)
	}
	if t.subject, err = partition.PublishSubject(hub, t.subject); err != nil {
		return target{}, refused(RemedyPublishAtHub, src.Name, "requeue dead letter %d: %w; it is kept", d.ID, err)
	}
	return t, nil
}

// republish publishes the copy of d and returns once it is in the dead
// letter's stream: a copy a stream dropped as a duplicate, or one that does
// not reach it, is an error and the dead letter is kept.
func (r *requeuer) republish(ctx context.Context, d ledger.DeadLetter) (Result, error) {
	t, err := r.resolve(ctx, d)
	if err != nil {
		return Result{}, err
	}
	copies := &arrivals{s: t.s, d: d, next: d.Sequence + 1}
	if t.into != d.Stream {
		// The copy reaches d.Stream only through its source, which
		// deduplicates with d.Stream's own window: a copy of an earlier
		// requeue may be there already, and the window may still hold the id.
		seq, err := copies.find(ctx)
		if err != nil {
			return Result{}, fmt.Errorf("requeue dead letter %d: looking for an earlier copy: %w; it is kept", d.ID, err)
		}
		if seq > 0 {
			return Result{Seq: seq, Earlier: true}, nil
		}
		if until := windowUntil(t.cfg, t.held, d); time.Now().Before(until) {
			return Result{}, fmt.Errorf("requeue dead letter %d (id %s): %w: the hub's stream %s would store the copy and %s would drop it; it is kept: try again after %s",
				d.ID, d.MessageID, &WindowError{Stream: d.Stream, Until: until}, t.into, d.Stream, until.Format(time.RFC3339))
		}
	}
	ack, err := r.pub.Publish(ctx, publisher.Message{Subject: t.subject, Data: d.Payload, ID: d.MessageID, Header: Headers(d.Headers), ExpectStream: t.into})
	if errors.Is(err, publisher.ErrWrongStream) {
		return Result{}, refused(RemedyOtherServer, "", "requeue dead letter %d: %w: %w; it is kept", d.ID, ErrWrongStream, err)
	}
	if err != nil {
		return Result{}, fmt.Errorf("requeue dead letter %d: %w; it is kept", d.ID, err)
	}
	if ack.Duplicate {
		return Result{}, fmt.Errorf("requeue dead letter %d (id %s): %w; it is kept: try again once the window has passed", d.ID, d.MessageID, &WindowError{Stream: ack.Stream})
	}
	if t.into == d.Stream {
		return Result{Seq: ack.Sequence, Via: ack}, storedAs(ctx, t.s, d, ack)
	}
	return r.sourced(ctx, t, d, copies, ack)
}

// sourced waits, up to Config.Wait, for the copy the hub's stream stored
// (ack) to be sourced into the dead letter's stream.
func (r *requeuer) sourced(ctx context.Context, t target, d ledger.DeadLetter, copies *arrivals, ack publisher.Ack) (Result, error) {
	wctx, cancel := context.WithTimeout(ctx, r.wait)
	defer cancel()
	seq, err := copies.await(wctx)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		why, behind := whyNotSourced(ctx, t.s, t.into, say.Name(r.names, "Wait"))
		return Result{}, &NotArrivedError{ID: d.ID, MessageID: d.MessageID, Via: ack, Stream: d.Stream, Wait: r.wait, Why: why, Behind: behind, Names: r.names}
	}
	if err != nil {
		return Result{}, fmt.Errorf("requeue dead letter %d: %s stored the copy as seq %d; waiting for %s to source it: %w; it is kept", d.ID, ack.Stream, ack.Sequence, d.Stream, err)
	}
	return Result{Seq: seq, Via: ack}, nil
}
