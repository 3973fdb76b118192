package requeue

import (
	"errors"
	"fmt"
	"time"

	"github.com/jetledger/jetledger/internal/say"
	"github.com/jetledger/jetledger/publisher"
)

var (
	// ErrInvalidConfig: a Config with a negative Wait (*ConfigError), or
	// Requeue called without a Ledger or a JetStream.
	ErrInvalidConfig = errors.New("requeue: invalid config")
	// ErrNotDiscarded: the copy was published, but removing the dead
	// letter failed; the error says where the copy is. Discard the dead
	// letter; requeuing it again would publish a second copy.
	ErrNotDiscarded = errors.New("requeue: requeued, but the dead letter was not removed")
	// ErrNoMsgID: the dead letter has no Nats-Msg-Id, so a copy could not
	// be deduplicated; it is kept.
	ErrNoMsgID = errors.New("requeue: the dead letter has no Nats-Msg-Id")
	// ErrStillInWindow: the stream's duplicate window still holds the dead
	// letter's id, so it would drop (or dropped) the copy; see *WindowError.
	ErrStillInWindow = errors.New("the stream's duplicate window still holds this id, so it dropped the copy")
	// ErrWrongStream: the server reached has a stream that is not the one
	// the dead letter came from, and nothing was published there.
	ErrWrongStream = errors.New("not the dead letter's stream")
	// ErrNotArrived: a stream stored the copy, but it did not reach the
	// dead letter's stream (in time, or as the subject it was consumed on).
	ErrNotArrived = errors.New("the copy has not reached the dead letter's stream")
	// ErrNoOrigin: the dead letter's stream neither captures its subject
	// nor sources it from exactly one stream.
	ErrNoOrigin = errors.New("cannot tell which stream a copy must be published into to reach the dead letter's stream")
)

// WindowError is ErrStillInWindow naming the stream whose duplicate window
// holds the id and, when known, when it no longer will.
type WindowError struct {
	Stream string
	Until  time.Time // zero: not known
}

func (e *WindowError) Error() string {
	if e.Until.IsZero() {
		return fmt.Sprintf("stream %s: %v", e.Stream, ErrStillInWindow)
	}
	return fmt.Sprintf("stream %s: %v until about %s", e.Stream, ErrStillInWindow, e.Until.Format(time.RFC3339))
}

// Unwrap makes errors.Is(err, ErrStillInWindow) hold.
func (e *WindowError) Unwrap() error { return ErrStillInWindow }

// Remedy is what the caller of a refused Requeue can do about it that the
// library cannot, for the caller to put in its own words (a CLI names its
// flags). The dead letter is kept whatever the remedy.
type Remedy int

const (
	// RemedyNone: nothing beyond what the error says.
	RemedyNone Remedy = iota
	// RemedyOtherServer: the server reached is not the one the dead
	// letter's consumer reads from; requeue through that one.
	RemedyOtherServer
	// RemedyPublishBySubject: no subject can be worked out that Stream
	// stores as the dead letter's; publish its payload with its id by hand
	// to the subject it was first published to, then discard it.
	RemedyPublishBySubject
	// RemedyPublishAtHub is RemedyPublishBySubject at the hub, into the
	// hub's stream Stream that the dead letter's stream sources.
	RemedyPublishAtHub
	// RemedyPublishIntoOrigin: no single stream to publish into can be
	// told; publish the payload with its id by hand into the stream it came
	// from, then discard it.
	RemedyPublishIntoOrigin
	// RemedyHubLink: the hub's stream could not be read; try again once
	// the link to the hub is up.
	RemedyHubLink
)

// Error is a Requeue that did not happen, the dead letter kept, with what
// the caller may do about it. Errors.Is and errors.As see through it to the
// cause (ErrWrongStream, ErrNoOrigin, partition.ErrNoInverse, ...).
type Error struct {
	Remedy Remedy
	Stream string // for RemedyPublishBySubject, RemedyPublishAtHub: the stream to publish into
	Err    error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Say is the remedy, in names' words: names maps "JetStream" (how the
// caller reaches the server Requeue was given) and "Consumer" (the program
// that consumes the dead letter's stream) to the caller's. "" for
// RemedyNone. A caller that publishes by hand in its own way (a command
// line's publish command) says the Publish remedies itself.
func (e *Error) Say(names map[string]string) string {
	switch e.Remedy {
	case RemedyOtherServer:
		return fmt.Sprintf("point %s at the server %s consumes from", say.Name(names, "JetStream"), say.Name(names, "Consumer"))
	case RemedyPublishBySubject, RemedyPublishAtHub:
		return fmt.Sprintf("publish its payload with its Nats-Msg-Id into stream %s, to the subject it was first published to, then discard it", e.Stream)
	case RemedyPublishIntoOrigin:
		return "publish its payload with its Nats-Msg-Id into the stream it came from, then discard it"
	case RemedyHubLink:
		return "try again once the link to the hub is up"
	}
	return ""
}

// SayCommand is Say with the jetledger command that publishes by hand
// for the Publish remedies, the dead letter's id being msgID.
func (e *Error) SayCommand(names map[string]string, msgID string) string {
	switch e.Remedy {
	case RemedyPublishBySubject:
		return fmt.Sprintf("publish its payload with 'jetledger publish --stream %s --id %s' to the subject it was first published to, then discard it", e.Stream, msgID)
	case RemedyPublishAtHub:
		return fmt.Sprintf("publish its payload with 'jetledger publish --stream %s --id %s' at the hub to the subject it was first published to, then discard it", e.Stream, msgID)
	case RemedyPublishIntoOrigin:
		return fmt.Sprintf("publish its payload with 'jetledger publish --stream STREAM --id %s' into the stream it came from, then discard it", msgID)
	}
	return e.Say(names)
}

// refused is an *Error with remedy r, its text format's.
func refused(r Remedy, stream, format string, a ...any) error {
	return &Error{Remedy: r, Stream: stream, Err: fmt.Errorf(format, a...)}
}

// NotArrivedError is ErrNotArrived at an edge: the hub's stream stored the
// copy (Via) but the dead letter's stream has not sourced it within Wait.
// Why says what that stream knows of its source; Behind is how many
// messages it is behind it, 0 when it is not (or that is not known).
type NotArrivedError struct {
	ID        int64  // the dead letter
	MessageID string // its id
	Via       publisher.Ack
	Stream    string // the dead letter's stream
	Wait      time.Duration
	Why       string
	Behind    uint64
	Names     map[string]string // Config.Names: what Error calls Wait
}

func (e *NotArrivedError) Error() string {
	return fmt.Sprintf("requeue dead letter %d (id %s): %v: %s stored it as seq %d, but %s has not sourced it within %s %s; it is kept: %s",
		e.ID, e.MessageID, ErrNotArrived, e.Via.Stream, e.Via.Sequence, e.Stream, say.Name(e.Names, "Wait"), e.Wait, e.Why)
}

// Unwrap makes errors.Is(err, ErrNotArrived) hold.
func (e *NotArrivedError) Unwrap() error { return ErrNotArrived }

// ConfigError is a Config refused: Reason says what is wrong, naming the
// fields as Config.Names says, so that a caller prints it as it is. It is
// ErrInvalidConfig for errors.Is.
type ConfigError struct{ Reason string }

func (e *ConfigError) Error() string { return ErrInvalidConfig.Error() + ": " + e.Reason }

// Unwrap gives ErrInvalidConfig.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

// Refusal is Reason.
func (e *ConfigError) Refusal() string { return e.Reason }
