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
//	sink, err := natssink.New(ctx, js, nc, natssink.Config{Subject: "effects.site1"})
//	d, err := outbox.New(store, outbox.Config{Sink: sink})
package natssink

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// ErrInvalidConfig: a Config field is missing or malformed.
var ErrInvalidConfig = errors.New("natssink: invalid configuration")

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
	// which a lookup measures how far the server's clock is off. Default
	// time.Now.
	Now func() time.Time
	// Logger reports New waiting for a cluster that cannot answer yet.
	// Default slog.Default().
	Logger *slog.Logger
}

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
// clock, a lookup starts reading: the ledger stamps rows with this host's
// clock, and the two clocks may differ by more than the skew measured.
const lookupSlack = time.Minute

var (
	_ outbox.Sink      = (*Sink)(nil)
	_ outbox.Looker    = (*Sink)(nil)
	_ outbox.Windowed  = (*Sink)(nil)
	_ outbox.Readiness = (*Sink)(nil)
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

// Lookup reads the stream for a message with the item's id, from a minute
// before the row was created (on the server's clock) to the stream's last
// message now, on every subject. "Not found"
// is an answer only when nothing published since then can have left the
// stream: a limits stream whose oldest message is older than the row and
// that has no deleted messages. Otherwise the stream cannot say, and the
// error says why.
func (s *Sink) Lookup(ctx context.Context, it ledger.OutboxItem) (string, bool, error) {
	st, err := s.js.Stream(ctx, s.stream)
	if err != nil {
		return "", false, fmt.Errorf("natssink: look up stream %s: %w", s.stream, err)
	}
	info := st.CachedInfo()
	// The row's creation on the server's clock (the info carries its time),
	// less a slack for what that measure misses.
	from := it.CreatedAt.Add(-lookupSlack)
	if !info.TimeStamp.IsZero() {
		from = from.Add(info.TimeStamp.Sub(s.cfg.Now()))
	}
	if info.State.LastSeq == 0 || info.State.LastTime.Before(from) {
		return s.notFound(info, from)
	}
	// Every subject: the stream's dedupe is stream-wide, and the row may
	// have been published on a subject the sink no longer uses.
	oc, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &from, HeadersOnly: true,
	})
	if err != nil {
		return "", false, fmt.Errorf("natssink: read stream %s: %w", s.stream, err)
	}
	last := info.State.LastSeq
	for {
		// NoWait: a lookup must not wait for messages that are not there.
		// Every batch is read to its end, so no fetch is left running.
		batch, err := oc.FetchNoWait(256)
		if err != nil {
			return "", false, fmt.Errorf("natssink: read stream %s: %w", s.stream, err)
		}
		var ext string
		n, end := 0, false
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				continue
			}
			if m.Headers().Get(jetstream.MsgIDHeader) == it.ID && ext == "" {
				ext = externalID(s.stream, md.Sequence.Stream)
			}
			end = end || md.Sequence.Stream >= last || md.NumPending == 0
		}
		switch err := batch.Error(); {
		case ext != "":
			return ext, true, nil
		case err != nil:
			return "", false, fmt.Errorf("natssink: read stream %s: %w", s.stream, err)
		case end || n == 0:
			return s.notFound(info, from)
		}
	}
}

// notFound answers "never seen" only when the stream still holds everything
// published since from.
func (s *Sink) notFound(info *jetstream.StreamInfo, from time.Time) (string, bool, error) {
	switch {
	case info.Config.Retention != jetstream.LimitsPolicy:
		return "", false, fmt.Errorf("natssink: stream %s removes acknowledged messages (%s retention), so it cannot prove an item never arrived", s.stream, info.Config.Retention)
	case info.State.NumDeleted > 0:
		return "", false, fmt.Errorf("natssink: stream %s has %d deleted messages, so it cannot prove an item never arrived", s.stream, info.State.NumDeleted)
	case info.State.FirstSeq > 1 && removedSince(info.State, from):
		return "", false, fmt.Errorf("natssink: stream %s no longer holds every message since %s (its limits removed some), so it cannot prove an item never arrived",
			s.stream, from.Format(time.RFC3339))
	}
	return "", false, nil
}

// removedSince reports whether the stream's limits may have removed a
// message stored at or after from.
func removedSince(st jetstream.StreamState, from time.Time) bool {
	if st.Msgs == 0 {
		return !st.LastTime.Before(from)
	}
	return st.FirstTime.After(from)
}
