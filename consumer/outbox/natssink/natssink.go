// Package natssink is the JetStream sink of jetledger's outbox: it publishes
// each item to a subject with the outbox id as Nats-Msg-Id and counts it
// sent when the stream acknowledges it, a duplicate included.
//
// JetStream drops a repeated Nats-Msg-Id only inside the target stream's
// duplicate window, which the sink reports (KeyWindow). The dispatcher
// treats it as idempotent only when that window outlasts the time over which
// one row's sends can spread, and even then sends a row whose earlier send
// may have landed again only while the row is younger than the window; a
// window too short sends unknown outcomes to review, with a warning.
//
// The sink does not send while its connection is down (Ready), so a row
// waits queued through an outage instead of using up its attempts.
//
// Rows in review are looked up in the stream (Lookup). Before each claim the
// dispatcher records on the row the stream instance (name and creation
// time) and its last sequence (Position); the lookup reads that instance
// from there, and says "never seen" only when that very instance still holds
// every message since. A stream deleted and created again, another stream
// on a moved subject, or a clock that was wrong proves nothing.
//
// A stream restored from an older copy of its store keeps its name and
// creation time, and sequences written since the restore hide what it lost.
// So "never seen" also needs a witness from the ledger (Config.Ledger): a
// row sent into that instance whose claim began after the looked-up row's
// lease ended, so stored after any copy of it, still at its sequence with
// its id; every such row found must be. Until one is sent the row waits in
// review, looked up again later.
//
//	sink, err := natssink.New(ctx, js, nc, natssink.Config{Subject: "effects.site1", Ledger: store})
//	d, err := outbox.New(store, outbox.Config{Sink: sink})
package natssink

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jetledger/jetledger/consumer/jsretry"
	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Defaults for Config fields left at zero.
const (
	NameDefault    = "nats"
	TimeoutDefault = 5 * time.Second
)

// HeaderMessageID carries the id of the message whose handler enqueued the
// item, as the webhook sink does.
const HeaderMessageID = "Jetledger-Message-Id"

// Config configures a Sink.
type Config struct {
	// Name is the sink's name in the outbox. Default "nats".
	Name string
	// Subject receives each item's payload. A stream must capture it.
	// Required.
	Subject string
	// Timeout bounds one publish, from the request to the stream's
	// acknowledgement. Default 5s.
	Timeout time.Duration
	// Now is the clock that stamped the outbox rows (the ledger's), by
	// which a lookup of a row with no usable record of its stream measures
	// how far the server's clock is off; such a lookup can only find.
	// Default time.Now.
	Now func() time.Time
	// Logger reports New waiting for a cluster that cannot answer yet.
	// Default slog.Default().
	Logger *slog.Logger
	// Ledger is the ledger whose outbox the sink sends, read to check a
	// stream instance before a lookup says an item never arrived there.
	// Without it a lookup can find items but never prove one absent.
	Ledger Ledger
}

// Ledger is what the sink reads of the ledger: the rows it sent into a
// stream instance (see ledger.Store.SentInto).
type Ledger interface {
	SentInto(ctx context.Context, sink, instance string, after time.Time, limit int) ([]ledger.OutboxItem, error)
}

var _ Ledger = (*ledger.Store)(nil)

// witnessLimit is how many later sends a lookup checks the stream against.
const witnessLimit = 64

// Sink publishes outbox items to JetStream.
type Sink struct {
	js     jetstream.JetStream
	nc     *nats.Conn
	cfg    Config
	stream string

	mu       sync.Mutex
	window   time.Duration
	windowAt time.Time // when window was read
}

// windowRefresh is how long a read of the stream's duplicate window is
// trusted: someone may shorten it while run runs.
var windowRefresh = 30 * time.Second

// lookupSlack is how much earlier than the row's creation, on the server's
// clock, a lookup of a row with no usable record of where it was sent starts
// reading: the ledger stamps rows with this host's clock, and the two clocks
// may differ by more than the skew measured. Such a read can only find.
const lookupSlack = time.Minute

var (
	_ outbox.Sink       = (*Sink)(nil)
	_ outbox.Looker     = (*Sink)(nil)
	_ outbox.Windowed   = (*Sink)(nil)
	_ outbox.Readiness  = (*Sink)(nil)
	_ outbox.Positioner = (*Sink)(nil)
	_ outbox.Retainer   = (*Sink)(nil)
)

// New finds the stream that captures cfg.Subject and reads its duplicate
// window.
func New(ctx context.Context, js jetstream.JetStream, nc *nats.Conn, cfg Config) (*Sink, error) {
	if cfg.Subject == "" || strings.ContainsAny(cfg.Subject, "*> \t") {
		return nil, fmt.Errorf("%w: Subject %q: want one subject without wildcards", ErrInvalidConfig, cfg.Subject)
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("%w: Timeout must not be negative", ErrInvalidConfig)
	}
	cfg.Name = cmp.Or(cfg.Name, NameDefault)
	cfg.Timeout = cmp.Or(cfg.Timeout, TimeoutDefault)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	// A cluster electing a leader is waited for, as the consumer's own
	// lookups are; no stream capturing the subject is an answer.
	name, err := jsretry.Call(ctx, cfg.Logger, "find the stream for subject "+cfg.Subject, func(ctx context.Context) (string, error) {
		return js.StreamNameBySubject(ctx, cfg.Subject)
	})
	if err != nil {
		return nil, fmt.Errorf("natssink: %w", err)
	}
	st, err := jsretry.Call(ctx, cfg.Logger, "look up stream "+name, func(ctx context.Context) (jetstream.Stream, error) {
		return js.Stream(ctx, name)
	})
	if err != nil {
		return nil, fmt.Errorf("natssink: %w", err)
	}
	return &Sink{js: js, nc: nc, cfg: cfg, stream: name, window: st.CachedInfo().Config.Duplicates, windowAt: time.Now()}, nil
}

// Name is the sink's name in the outbox.
func (s *Sink) Name() string { return s.cfg.Name }

// Timeout bounds one publish.
func (s *Sink) Timeout() time.Duration { return s.cfg.Timeout }

// Idempotent: the stream drops a repeated id, inside its window.
func (s *Sink) Idempotent() bool { return s.KeyWindow() > 0 }

// KeyWindow is how long the stream remembers an id: its duplicate window,
// read again when the last read is older than windowRefresh. A failed read
// keeps the last value.
func (s *Sink) KeyWindow() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if time.Since(s.windowAt) >= windowRefresh {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
		defer cancel()
		if st, err := s.js.Stream(ctx, s.stream); err == nil {
			s.window, s.windowAt = st.CachedInfo().Config.Duplicates, time.Now()
		}
	}
	return s.window
}

// Stream is the stream that captures the subject.
func (s *Sink) Stream() string { return s.stream }

// Ready reports whether a publish can reach the server now. While the
// connection is down nothing is sent: a row would only use up its attempts.
func (s *Sink) Ready() error {
	if st := s.nc.Status(); st != nats.CONNECTED {
		return fmt.Errorf("natssink: connection to NATS is %s", strings.ToLower(st.String()))
	}
	return nil
}

// Send publishes the item with Nats-Msg-Id = the outbox id and waits for the
// stream's acknowledgement. The external id is "<stream>:<sequence>"; a
// duplicate is sent, with the sequence of the copy the stream holds.
func (s *Sink) Send(ctx context.Context, it ledger.OutboxItem) (string, error) {
	if err := s.Ready(); err != nil {
		// Checked before the request leaves: nats.go would buffer it and
		// send it on reconnect, after our timeout, making the outcome unknown.
		return "", &outbox.SendError{Kind: outbox.ErrRetryable, Detail: err.Error()}
	}
	if mp := s.nc.MaxPayload(); int64(len(it.Payload)) > mp {
		return "", &outbox.SendError{Kind: outbox.ErrRejected, Detail: fmt.Sprintf("payload of %d bytes is over the server's max_payload %d", len(it.Payload), mp)}
	}
	msg := &nats.Msg{Subject: s.cfg.Subject, Data: it.Payload, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, it.ID)
	if it.MessageID != "" {
		msg.Header.Set(HeaderMessageID, it.MessageID)
	}
	// No retries inside nats.go: the dispatcher owns the retry policy.
	ack, err := s.js.PublishMsg(ctx, msg, jetstream.WithExpectStream(s.stream), jetstream.WithRetryAttempts(0))
	if err != nil {
		return "", classify(err)
	}
	return externalID(ack.Stream, ack.Sequence), nil
}

// classify says what a failed publish means for the item.
func classify(err error) error {
	var api *jetstream.APIError
	switch {
	case errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders):
		// Nobody was subscribed to store it: it provably did not land.
		return &outbox.SendError{Kind: outbox.ErrRetryable, Detail: err.Error()}
	case errors.Is(err, nats.ErrMaxPayload), errors.Is(err, nats.ErrBadSubject):
		return &outbox.SendError{Kind: outbox.ErrRejected, Detail: err.Error()}
	case errors.As(err, &api) && api.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum:
		return &outbox.SendError{Kind: outbox.ErrRejected, Status: int(api.ErrorCode), Detail: err.Error()}
	case errors.As(err, &api):
		// The stream answered with an error (its limits, or another stream
		// now captures the subject): it did not store the item.
		return &outbox.SendError{Kind: outbox.ErrRetryable, Status: int(api.ErrorCode), Detail: err.Error()}
	}
	// A timeout or a connection lost after the request left: it may have
	// been stored.
	return &outbox.SendError{Kind: outbox.ErrAmbiguous, Detail: err.Error()}
}

func externalID(stream string, seq uint64) string { return stream + ":" + strconv.FormatUint(seq, 10) }

// parseExternalID splits what externalID made.
func parseExternalID(ext string) (stream string, seq uint64, ok bool) {
	i := strings.LastIndexByte(ext, ':')
	if i <= 0 {
		return "", 0, false
	}
	seq, err := strconv.ParseUint(ext[i+1:], 10, 64)
	return ext[:i], seq, err == nil
}

// Position is the stream's instance, its name and creation time, and its
// last sequence now: read before a claim, so whatever the claimed send
// stores lies after it.
func (s *Sink) Position(ctx context.Context) (ledger.Destination, error) {
	st, err := s.js.Stream(ctx, s.stream)
	if err != nil {
		return ledger.Destination{}, fmt.Errorf("natssink: read stream %s: %w", s.stream, err)
	}
	info := st.CachedInfo()
	return ledger.Destination{Instance: instance(s.stream, info.Created), Position: info.State.LastSeq}, nil
}

// HoldsSince reports, as outbox.Retainer, whether the stream is still the
// instance since names and holds every message after its position: no
// purge, limit or delete removed any since. The stream's duplicate window
// is rebuilt from the messages it holds when the server restarts, so an id
// whose copy was removed may be forgotten.
func (s *Sink) HoldsSince(ctx context.Context, since ledger.Destination) error {
	st, err := s.js.Stream(ctx, s.stream)
	if err != nil {
		return fmt.Errorf("natssink: read stream %s: %w", s.stream, err)
	}
	info := st.CachedInfo()
	if got := instance(s.stream, info.Created); got != since.Instance {
		return fmt.Errorf("natssink: %s is not the instance %s: %w", got, since.Instance, outbox.ErrOtherInstance)
	}
	if info.State.FirstSeq > since.Position+1 || info.State.NumDeleted > 0 {
		return fmt.Errorf("natssink: %s starts at %d with %d deleted, after position %d: %w",
			s.stream, info.State.FirstSeq, info.State.NumDeleted, since.Position, outbox.ErrNotHeld)
	}
	return nil
}

// instance names a stream instance: a stream deleted and created again under
// the same name is another one (DESIGN.md rule 13).
func instance(name string, created time.Time) string {
	return name + "@" + strconv.FormatInt(created.UnixNano(), 10)
}

// parseInstance splits what instance made.
func parseInstance(s string) (name string, created time.Time, ok bool) {
	i := strings.LastIndexByte(s, '@')
	if i <= 0 {
		return "", time.Time{}, false
	}
	ns, err := strconv.ParseInt(s[i+1:], 10, 64)
	if err != nil {
		return "", time.Time{}, false
	}
	return s[:i], time.Unix(0, ns), true
}

// Lookup looks for a message with the item's id in the stream instance the
// row's sends went to (item.SentTo), from the position before the first of
// them to the last message now, on every subject. "Not found" is an answer
// only from that instance, a limits stream that still holds every message
// since that position; otherwise the error wraps ErrCannotProve and says
// why. A row with no usable record (claimed before one was kept, its
// instance gone) is looked for in the sink's stream from about its creation
// time, which can find it but never prove it absent.
func (s *Sink) Lookup(ctx context.Context, it ledger.OutboxItem) (string, bool, error) {
	st, err := s.sentTo(ctx, it)
	switch {
	case err == nil:
		return s.lookupFrom(ctx, st, it)
	case !errors.Is(err, ErrCannotProve):
		return "", false, err
	}
	ext, found, ferr := s.findSince(ctx, it)
	if ferr != nil || found {
		return ext, found, ferr
	}
	return "", false, err
}

// sentTo opens the stream instance the row's sends went to. The error wraps
// ErrCannotProve when no instance is recorded or it no longer exists.
func (s *Sink) sentTo(ctx context.Context, it ledger.OutboxItem) (jetstream.Stream, error) {
	name, created, ok := parseInstance(it.SentTo.Instance)
	if !ok {
		return nil, fmt.Errorf("%w: row %s has no record of the stream its sends went to (claimed before jetledger kept one, or its sends may have gone to more than one stream): look for Nats-Msg-Id %s there, then resolve the row",
			ErrCannotProve, it.ID, it.ID)
	}
	st, err := s.js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("%w: row %s was sent to stream %s created %s, which no longer exists: look for Nats-Msg-Id %s where its messages went, then resolve the row",
			ErrCannotProve, it.ID, name, created.UTC().Format(time.RFC3339Nano), it.ID)
	}
	if err != nil {
		return nil, fmt.Errorf("natssink: look up stream %s: %w", name, err)
	}
	if now := st.CachedInfo().Created; !now.Equal(created) {
		return nil, fmt.Errorf("%w: row %s was sent to stream %s created %s; the stream of that name now was created %s and proves nothing about the first: look for Nats-Msg-Id %s where its messages went, then resolve the row",
			ErrCannotProve, it.ID, name, created.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano), it.ID)
	}
	return st, nil
}

// lookupFrom reads st, the instance the row's sends went to, from just after
// the recorded position.
func (s *Sink) lookupFrom(ctx context.Context, st jetstream.Stream, it ledger.OutboxItem) (string, bool, error) {
	info := st.CachedInfo()
	name, after, last := info.Config.Name, it.SentTo.Position, info.State.LastSeq
	want, unvouched, err := s.witnesses(ctx, it, name, after, last)
	if err != nil {
		return "", false, err
	}
	complete := true
	if last > after {
		ext, whole, err := scan(ctx, st, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: after + 1}, after+1, last, it.ID, want)
		if err != nil || ext != "" {
			return ext, ext != "", err
		}
		complete = whole
	}
	switch {
	case info.Config.Retention != jetstream.LimitsPolicy:
		return "", false, fmt.Errorf("%w: stream %s removes acknowledged messages (%s retention)", ErrCannotProve, name, info.Config.Retention)
	case last < after:
		// Sequences only grow: the instance was restored from an older copy.
		return "", false, fmt.Errorf("%w: stream %s's last sequence is %d, below %d when row %s was sent: it was rolled back",
			ErrCannotProve, name, last, after, it.ID)
	case !complete:
		return "", false, fmt.Errorf("%w: stream %s no longer holds every message after sequence %d, when row %s was sent (its limits, a purge or a delete removed some)",
			ErrCannotProve, name, after, it.ID)
	case unvouched != nil:
		return "", false, unvouched
	case len(want) > 0:
		seq := slices.Min(slices.Collect(maps.Keys(want)))
		return "", false, fmt.Errorf("%w: stream %s does not hold sent row %s at sequence %d, where it was stored: it was restored from an older copy, or the message was replaced",
			ErrCannotProve, name, want[seq], seq)
	}
	// The read went through the name: the instance must not have changed under it.
	again, err := s.js.Stream(ctx, name)
	if err != nil {
		return "", false, fmt.Errorf("natssink: look up stream %s: %w", name, err)
	}
	if !again.CachedInfo().Created.Equal(info.Created) {
		return "", false, fmt.Errorf("%w: stream %s was created again during the lookup of row %s", ErrCannotProve, name, it.ID)
	}
	return "", false, nil
}

// witnesses are the rows sent into the row's instance after its lease ended
// (so stored after any copy of it), by the sequence each must be found at
// with its id. unvouched, when not nil, is why "never seen" cannot be said
// even if the read finds none missing: no such row, or one the stream
// cannot hold where it was stored. err is a ledger that cannot be read now.
func (s *Sink) witnesses(ctx context.Context, it ledger.OutboxItem, name string, after, last uint64) (want map[uint64]string, unvouched, err error) {
	if s.cfg.Ledger == nil {
		return nil, fmt.Errorf("%w: the sink was given no ledger to check stream %s against (Config.Ledger), so it cannot tell the stream was not restored from an older copy: look for Nats-Msg-Id %s there, then resolve row %s",
			ErrCannotProve, name, it.ID, it.ID), nil
	}
	if it.LeaseUntil.IsZero() {
		return nil, fmt.Errorf("%w: row %s has no lease, so no later send can vouch for stream %s", ErrCannotProve, it.ID, name), nil
	}
	rows, err := s.cfg.Ledger.SentInto(ctx, s.cfg.Name, it.SentTo.Instance, it.LeaseUntil, witnessLimit)
	if err != nil {
		return nil, nil, fmt.Errorf("natssink: read the rows sent into stream %s: %w", name, err)
	}
	want = map[uint64]string{}
	for _, r := range rows {
		stream, seq, ok := parseExternalID(r.ExternalID)
		switch {
		case !ok || stream != name:
			continue // not one this sink's sends name
		case seq <= after || seq > last:
			// Stored after the row's send, it must lie past the row's
			// position and within the stream: sequences only grow.
			return nil, fmt.Errorf("%w: sent row %s was stored in stream %s at sequence %d, which the stream (now %d after %d) cannot hold: it was restored from an older copy or rolled back",
				ErrCannotProve, r.ID, name, seq, last, after), nil
		}
		want[seq] = r.ID
	}
	if len(want) == 0 {
		return nil, fmt.Errorf("%w: no row was sent into stream %s after row %s's last send could land, to vouch that the stream still holds what was stored then (a stream restored from an older copy keeps its name and creation time); it is looked up again later",
			ErrCannotProve, name, it.ID), nil
	}
	return want, nil, nil
}

// findSince looks for the row in the sink's stream from a minute before the
// row was created, on the server's clock (the info carries its time). Clocks
// can be wrong, so this only ever finds.
func (s *Sink) findSince(ctx context.Context, it ledger.OutboxItem) (string, bool, error) {
	st, err := s.js.Stream(ctx, s.stream)
	if err != nil {
		return "", false, fmt.Errorf("natssink: look up stream %s: %w", s.stream, err)
	}
	info := st.CachedInfo()
	from := it.CreatedAt.Add(-lookupSlack)
	if !info.TimeStamp.IsZero() {
		from = from.Add(info.TimeStamp.Sub(s.cfg.Now()))
	}
	if info.State.LastSeq == 0 || info.State.LastTime.Before(from) {
		return "", false, nil
	}
	ext, _, err := scan(ctx, st, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &from}, 0, info.State.LastSeq, it.ID, nil)
	return ext, ext != "", err
}

// scan reads the headers of st's messages, on every subject (the stream's
// dedupe is stream-wide, and the row may have been published on a subject
// the sink no longer uses), from cfg's start to sequence last, looking for
// a Nats-Msg-Id of id. whole reports that it read every sequence from first
// to last: none was missing. Each sequence of want found holding the id it
// names is deleted from want.
func scan(ctx context.Context, st jetstream.Stream, cfg jetstream.OrderedConsumerConfig, first, last uint64, id string, want map[uint64]string) (ext string, whole bool, err error) {
	name := st.CachedInfo().Config.Name
	cfg.HeadersOnly = true
	oc, err := st.OrderedConsumer(ctx, cfg)
	if err != nil {
		return "", false, fmt.Errorf("natssink: read stream %s: %w", name, err)
	}
	next, gap := first, false
	for {
		// NoWait: a lookup must not wait for messages that are not there.
		// Every batch is read to its end, so no fetch is left running.
		batch, err := oc.FetchNoWait(256)
		if err != nil {
			return "", false, fmt.Errorf("natssink: read stream %s: %w", name, err)
		}
		n, end := 0, false
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				gap = true // a message not read is one not known to be absent
				continue
			}
			seq := md.Sequence.Stream
			switch {
			case seq > last:
			case seq == next:
				next++
			case seq > next:
				gap, next = true, seq+1
			}
			msgID := m.Headers().Get(jetstream.MsgIDHeader)
			if ext == "" && msgID == id {
				ext = externalID(name, seq)
			}
			if w, ok := want[seq]; ok && w == msgID {
				delete(want, seq)
			}
			end = end || seq >= last || md.NumPending == 0
		}
		switch err := batch.Error(); {
		case ext != "":
			return ext, true, nil
		case err != nil:
			return "", false, fmt.Errorf("natssink: read stream %s: %w", name, err)
		case end || n == 0:
			return "", !gap && next == last+1, nil
		}
	}
}
