package jsretry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The timings of Call.
var (
	// backoff spaces the tries: an election takes seconds, a server's
	// restart a few more, so the wait grows to a few seconds and stays.
	backoff = ackwait.Backoff{Base: 250 * time.Millisecond, Max: 5 * time.Second}
	// tryTimeout bounds one try: the servers that are not a leader stay
	// silent, so a try during an election ends here, and the next one
	// starts at once. An answer takes milliseconds, a consumer's creation
	// on a busy cluster a second or so.
	tryTimeout = 3 * time.Second
	// reportEvery is how often a wait is logged again after its first try.
	reportEvery = 15 * time.Second
)

// Keys of the log records, so that a reader can select them.
const (
	// KeyWaitingFor names the call still waited for (warn).
	KeyWaitingFor = "waiting_for"
	// KeyAnswered names the call answered after a wait (info).
	KeyAnswered = "answered"
	// KeyTries counts the tries so far.
	KeyTries = "tries"
	// KeyWaited is how long the call has been waited for.
	KeyWaited = "waited"
)

// Error codes of nats-server (its errors.json) that say "not now" rather
// than "no": nats.go has no names for them.
const (
	codeClusterNotAvailable jetstream.ErrorCode = 10008 // JSClusterNotAvailErr: JetStream system temporarily unavailable (no meta leader)
	codeClusterNotLeader    jetstream.ErrorCode = 10009 // JSClusterNotLeaderErr: JetStream cluster can not handle request
	codeStreamOffline       jetstream.ErrorCode = 10118 // JSStreamOfflineErr: every peer of the stream is offline
	codeConsumerOffline     jetstream.ErrorCode = 10119 // JSConsumerOfflineErr: every peer of the consumer is offline
)

// Transient reports whether err means that nobody could answer the call
// now, so that the same call may get an answer later: a try's timeout
// (the servers that are not a leader stay silent while one is elected),
// no responders (to a request, or to a publish: no response from stream),
// a connection reconnecting, and the server's "temporarily
// unavailable", "not leader" and "offline" errors. Anything else is an
// answer: not found, a refused configuration, a permission.
func Transient(err error) bool {
	var api *jetstream.APIError
	switch {
	case err == nil:
		return false
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrConnectionReconnecting):
		return true
	case errors.As(err, &api):
		switch api.ErrorCode {
		case codeClusterNotAvailable, codeClusterNotLeader, codeStreamOffline, codeConsumerOffline:
			return true
		}
	}
	var t interface{ Transient() bool }
	return errors.As(err, &t) && t.Transient()
}

// Do is Call for a call without a result.
func Do(ctx context.Context, log *slog.Logger, what string, try func(context.Context) error) error {
	_, err := Call(ctx, log, what, func(ctx context.Context) (struct{}, error) { return struct{}{}, try(ctx) })
	return err
}

// Call runs try, each time under its own timeout, until it succeeds, fails
// with an error that is not Transient, or ctx ends; what names the call in
// the log and in the error ("look up stream ORDERS"). The first transient
// failure is logged at warn and then one every so often, not one per try;
// an answer after a wait is logged at info. The error is what: the try's
// error, or what: ctx's error with the count of tries and the last failure.
func Call[T any](ctx context.Context, log *slog.Logger, what string, try func(context.Context) (T, error)) (T, error) {
	if log == nil {
		log = slog.Default()
	}
	var zero T
	started := time.Now()
	var reported time.Time
	for n := 1; ; n++ {
		began := time.Now()
		tctx, cancel := context.WithTimeout(ctx, tryTimeout)
		v, err := try(tctx)
		cancel()
		waited := time.Since(started).Round(time.Millisecond)
		switch {
		case err == nil:
			if n > 1 {
				log.InfoContext(ctx, "JetStream answered", KeyAnswered, what, KeyTries, n, KeyWaited, waited)
			}
			return v, nil
		case ctx.Err() != nil:
			return zero, stopped(ctx, what, n, waited, err)
		case !Transient(err):
			return zero, fmt.Errorf("%s: %w", what, err)
		}
		if n == 1 || time.Since(reported) >= reportEvery {
			log.WarnContext(ctx, "JetStream cannot answer yet (a leader being elected, a server restarting?); trying again until it does",
				KeyWaitingFor, what, KeyTries, n, KeyWaited, waited, "err", err)
			reported = time.Now()
		}
		// The backoff spaces the starts of tries: a try that timed out
		// has waited its share already.
		if !ackwait.Sleep(ctx, backoff.Delay(n)-time.Since(began)) {
			return zero, stopped(ctx, what, n, time.Since(started).Round(time.Millisecond), err)
		}
	}
}

// stopped is the error of a call whose ctx ended while it was waited for:
// it wraps ctx's cause, so that a caller tells a stop from a failure.
func stopped(ctx context.Context, what string, tries int, waited time.Duration, last error) error {
	return fmt.Errorf("%s: %w after %d tries in %s (the last: %v)", what, context.Cause(ctx), tries, waited, last)
}

// CreateStream creates the stream, trying again a few times when the
// server fails to make its store: nats-server v2.15.2 removes a deleted
// stream's files in the background, and a stream of that name created at
// once could meet them (error 10049, seen in tests that delete a copy and
// make it again).
func CreateStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	for try := 1; ; try++ {
		s, err := js.CreateStream(ctx, cfg)
		var api *jetstream.APIError
		if try == 5 || !errors.As(err, &api) || api.ErrorCode != 10049 || !strings.Contains(api.Description, "creating store") {
			return s, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(time.Duration(try) * 100 * time.Millisecond):
		}
	}
}
