package publisher

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
)

// Message is one message to publish.
type Message struct {
	Subject string
	Data    []byte
	// ID becomes Nats-Msg-Id. Empty: a new ULID.
	ID string
	// Header holds extra headers; Nats-Msg-Id in it is overwritten by ID.
	Header nats.Header
	// ExpectStream, if set, is the stream that must store the message: the
	// server refuses it when another stream captures the subject, and an
	// ack from another stream is an error too (ErrWrongStream). Without
	// it, whichever stream captures the subject on the server reached
	// stores it.
	ExpectStream string
	// Line is the input line it was read from (ScanLines), from 1, so that
	// a failure names it; it is not sent. Default 0: not read from lines.
	Line int
}

// Ack is the stream's answer to a publish.
type Ack struct {
	ID        string `json:"id"`
	Stream    string `json:"stream"`
	Sequence  uint64 `json:"seq"`
	Duplicate bool   `json:"duplicate"` // the stream already had this id
}

// Publisher publishes messages with stable ids. Safe for concurrent use.
type Publisher struct {
	js  jetstream.Publisher
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	entropy io.Reader
}

// New returns a Publisher over js.
func New(js jetstream.Publisher, cfg Config) (*Publisher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Publisher{js: js, cfg: cfg, log: cfg.Logger, entropy: ulid.Monotonic(rand.Reader, 0)}, nil
}

// NewID returns a new ULID, greater than every id this Publisher made before.
func (p *Publisher) NewID() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return ulid.MustNew(ulid.Timestamp(time.Now()), p.entropy).String()
}

// backoff spaces the attempts: RetryWait, doubling.
func (c Config) backoff() ackwait.Backoff { return ackwait.Backoff{Base: c.withDefaults().RetryWait} }

// RetryHorizon is the longest time from the first attempt of a publish to
// its last; the stream's duplicate window must be at least this long.
func (c Config) RetryHorizon() time.Duration {
	c = c.withDefaults()
	h := time.Duration(c.Attempts) * c.Timeout
	for i := 1; i < c.Attempts; i++ {
		h += c.backoff().Delay(i)
	}
	return h
}

// CheckDuplicateWindow returns ErrDuplicateWindowTooShort, with both
// durations, when a stream's duplicate window is shorter than RetryHorizon:
// a retried publish could then be stored twice.
func (c Config) CheckDuplicateWindow(window time.Duration) error {
	if h := c.RetryHorizon(); window < h {
		return fmt.Errorf("%w: duplicate window %s < retry horizon %s; raise the stream's duplicate window or lower the publisher's attempts/timeout",
			ErrDuplicateWindowTooShort, window, h)
	}
	return nil
}

// RetryHorizon is the Config's RetryHorizon.
func (p *Publisher) RetryHorizon() time.Duration { return p.cfg.RetryHorizon() }

// CheckDuplicateWindow is the Config's CheckDuplicateWindow.
func (p *Publisher) CheckDuplicateWindow(window time.Duration) error {
	return p.cfg.CheckDuplicateWindow(window)
}

func (p *Publisher) natsMsg(m Message) (*nats.Msg, string, error) {
	if m.Subject == "" {
		return nil, "", ErrNoSubject
	}
	id := m.ID
	if id == "" {
		id = p.NewID()
	}
	h := nats.Header{}
	for k, v := range m.Header {
		h[k] = append([]string(nil), v...)
	}
	h.Set(jetstream.MsgIDHeader, id)
	if m.ExpectStream != "" {
		h.Set(jetstream.ExpectedStreamHeader, m.ExpectStream)
	}
	return &nats.Msg{Subject: m.Subject, Data: m.Data, Header: h}, id, nil
}

// retryable reports errors after which the message may or may not be stored:
// retrying with the same id is safe and the only way to know.
func retryable(err error) bool {
	return errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse)
}

// refusal reports errors after which the message is known not to be
// stored: the client would not send it, or the stream answered with an
// error. After any other (a timeout, a lost connection, a cancel while
// the ack was awaited) it may be.
func refusal(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) || errors.Is(err, nats.ErrMaxPayload) ||
		errors.Is(err, nats.ErrBadSubject) || errors.Is(err, ErrNoSubject)
}

// Publish publishes m and waits for the stream's ack, retrying timeouts and
// no-responders with the same id up to Config.Attempts.
func (p *Publisher) Publish(ctx context.Context, m Message) (Ack, error) {
	msg, id, err := p.natsMsg(m)
	if err != nil {
		return Ack{}, err
	}
	return p.publish(ctx, msg, id)
}

func (p *Publisher) publish(ctx context.Context, msg *nats.Msg, id string) (Ack, error) {
	var last error
	for attempt := 1; attempt <= p.cfg.Attempts; attempt++ {
		actx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
		// nats.go would retry no-responders by itself; this loop is the one
		// retry, so Attempts counts requests.
		pa, err := p.js.PublishMsg(actx, msg, jetstream.WithRetryAttempts(0))
		cancel()
		if err == nil {
			return checkStream(msg, Ack{ID: id, Stream: pa.Stream, Sequence: pa.Sequence, Duplicate: pa.Duplicate})
		}
		if wrongStream(err) {
			return Ack{}, refusedStream(msg, id, err)
		}
		if ctx.Err() != nil {
			return Ack{}, fmt.Errorf("publisher: publish %s to %s: %w", id, msg.Subject, ctx.Err())
		}
		if !retryable(err) {
			return Ack{}, fmt.Errorf("publisher: publish %s to %s: %w", id, msg.Subject, err)
		}
		last = err
		if attempt == p.cfg.Attempts {
			break
		}
		p.log.WarnContext(ctx, "publish failed, retrying with the same id",
			"msg_id", id, "subject", msg.Subject, "attempt", attempt, "err", err)
		if !p.cfg.backoff().Wait(ctx, attempt) {
			return Ack{}, fmt.Errorf("publisher: publish %s to %s: %w", id, msg.Subject, ctx.Err())
		}
	}
	return Ack{}, fmt.Errorf("publisher: publish %s to %s: gave up after %d attempts: %w", id, msg.Subject, p.cfg.Attempts, last)
}

// jsErrStreamNotMatch is the server's answer to a publish whose expected
// stream is not the one capturing its subject (JSStreamNotMatchErr).
const jsErrStreamNotMatch jetstream.ErrorCode = 10060

func wrongStream(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrStreamNotMatch
}

// refusedStream is the error of a publish the server refused because
// another stream than the expected one captures its subject.
func refusedStream(msg *nats.Msg, id string, err error) error {
	return fmt.Errorf("publisher: publish %s to %s: expected stream %s: %w (%w)", id, msg.Subject,
		msg.Header.Get(jetstream.ExpectedStreamHeader), ErrWrongStream, err)
}

// checkStream refuses an ack from another stream than the one msg expects:
// the server checks the expectation, and this keeps a caller from counting
// an ack that did not come from that check.
func checkStream(msg *nats.Msg, a Ack) (Ack, error) {
	if want := msg.Header.Get(jetstream.ExpectedStreamHeader); want != "" && a.Stream != want {
		return Ack{}, fmt.Errorf("publisher: publish %s to %s: expected stream %s: %w: acknowledged by stream %s seq %d", a.ID, msg.Subject, want, ErrWrongStream, a.Stream, a.Sequence)
	}
	return a, nil
}

type ackState int

const (
	ackOK ackState = iota
	ackFailed
	ackLate
	ackStopped
)

// awaitAck waits for an async publish's answer until late fires; once the
// wait has expired it only takes an answer that is already there.
func awaitAck(ctx context.Context, f jetstream.PubAckFuture, late <-chan time.Time, expired bool) (*jetstream.PubAck, ackState, error) {
	if expired {
		select {
		case pa := <-f.Ok():
			return pa, ackOK, nil
		case err := <-f.Err():
			return nil, ackFailed, err
		default:
			return nil, ackLate, nil
		}
	}
	select {
	case pa := <-f.Ok():
		return pa, ackOK, nil
	case err := <-f.Err():
		return nil, ackFailed, err
	case <-late:
		return nil, ackLate, nil
	case <-ctx.Done():
		return nil, ackStopped, nil
	}
}

// PublishBatch publishes msgs asynchronously, Config.Window at a time, and
// returns their acks in order. A message whose asynchronous publish fails is
// retried synchronously with the same id. On error the acks of the messages
// before the failing one are returned with it; the messages after it in its
// window were sent already and may be stored too, without an ack returned.
// PublishSeq sends one message at a time, for callers that must know
// exactly what is stored after a failure.
func (p *Publisher) PublishBatch(ctx context.Context, msgs []Message) ([]Ack, error) {
	acks := make([]Ack, 0, len(msgs))
	for start := 0; start < len(msgs); start += p.cfg.Window {
		chunk := msgs[start:min(start+p.cfg.Window, len(msgs))]
		natsMsgs := make([]*nats.Msg, len(chunk))
		ids := make([]string, len(chunk))
		futures := make([]jetstream.PubAckFuture, len(chunk))
		for i, m := range chunk {
			nm, id, err := p.natsMsg(m)
			if err != nil {
				return acks, fmt.Errorf("publisher: message %d: %w", start+i, err)
			}
			natsMsgs[i], ids[i] = nm, id
			// A failed async publish (stalled, say) falls back to a sync one below.
			futures[i], _ = p.js.PublishMsgAsync(nm, jetstream.WithRetryAttempts(0))
		}
		// An ack lost with a server that died is never answered, and nats.go
		// gives async publishes no timeout of their own: past Timeout the
		// rest of the chunk is taken only as far as its acks are there, and
		// the others are published again with the same ids (the stream drops
		// what it already has), each synchronously.
		late := time.NewTimer(p.cfg.Timeout)
		expired := false
		for i, f := range futures {
			if f != nil {
				var wait <-chan time.Time
				if !expired {
					wait = late.C
				}
				pa, state, err := awaitAck(ctx, f, wait, expired)
				switch state {
				case ackOK:
					ack, err := checkStream(natsMsgs[i], Ack{ID: ids[i], Stream: pa.Stream, Sequence: pa.Sequence, Duplicate: pa.Duplicate})
					if err != nil {
						late.Stop()
						return acks, err
					}
					acks = append(acks, p.acked(ack))
					continue
				case ackFailed:
					if wrongStream(err) {
						late.Stop()
						return acks, refusedStream(natsMsgs[i], ids[i], err)
					}
					if !retryable(err) {
						late.Stop()
						return acks, fmt.Errorf("publisher: publish %s to %s: %w", ids[i], natsMsgs[i].Subject, err)
					}
				case ackLate:
					expired = true
				case ackStopped:
					late.Stop()
					return acks, fmt.Errorf("publisher: publish batch: %w", ctx.Err())
				}
			}
			ack, err := p.publish(ctx, natsMsgs[i], ids[i])
			if err != nil {
				return acks, err
			}
			acks = append(acks, p.acked(ack))
		}
	}
	return acks, nil
}

// acked tells OnAck of a confirmed ack.
func (p *Publisher) acked(a Ack) Ack {
	if p.cfg.OnAck != nil {
		p.cfg.OnAck(a)
	}
	return a
}
