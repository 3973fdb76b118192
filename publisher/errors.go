package publisher

import (
	"errors"
	"fmt"

	"github.com/jetledger/jetledger/internal/say"
	"github.com/nats-io/nats.go"
)

var (
	// ErrDuplicateWindowTooShort: the stream forgets ids sooner than the
	// publisher may still retry, so a late retry would be stored twice.
	ErrDuplicateWindowTooShort = errors.New("publisher: stream duplicate window is shorter than the retry horizon")
	// ErrInvalidConfig: a Config field is out of range, or an Input cannot
	// be published (*ConfigError).
	ErrInvalidConfig = errors.New("publisher: invalid configuration")
	// ErrNoSubject: a Message without a subject.
	ErrNoSubject = errors.New("publisher: message has no subject")
	// ErrWrongStream: a Message with ExpectStream reached a server whose
	// stream for its subject is another one, which stored nothing.
	ErrWrongStream = errors.New("publisher: the subject is captured by another stream than the expected one")

	// ErrNotJSON: a line ReadLines read is not valid JSON.
	ErrNotJSON = errors.New("publisher: not valid JSON")
	// ErrNotObject: FieldID was given something else than a JSON object.
	ErrNotObject = errors.New("publisher: id field: not a JSON object")
	// ErrNoIDField: the JSON object has no field of FieldID's name.
	ErrNoIDField = errors.New("publisher: id field: missing")
	// ErrBadIDField: the id field is neither a non-empty string nor a
	// number.
	ErrBadIDField = errors.New("publisher: id field: not a non-empty string or a number")
	// ErrIDTooLong: an id longer than MaxIDLen, which a consumer would
	// dead-letter.
	ErrIDTooLong = errors.New("publisher: id longer than a consumer takes")
)

// LineError is a line ReadLines refused; nothing of its input should be
// published.
type LineError struct {
	Line      int   // the line's number, from 1, empty lines counted
	Err       error // ErrNotJSON, or an *IDError
	Published int   // messages published before it (Input.Stream); 0: none
}

func (e *LineError) Error() string { return fmt.Sprintf("publisher: line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// PublishError is the message PublishSeq stopped at. The Published
// messages before it are stored and nothing after it was sent, so that,
// unless MaybeStored, publishing again from it stores each message once.
type PublishError struct {
	Published int    // messages acked before it
	Line      int    // its Message.Line; 0: not read from lines
	ID        string // its Nats-Msg-Id
	Size      int    // its Data, in bytes
	// MaybeStored: the publish may have reached the stream (a timeout, a
	// lost connection, a cancel while its ack was awaited). False: the
	// client or the server refused it, and the stream does not have it.
	MaybeStored bool
	Err         error
}

func (e *PublishError) Error() string {
	return fmt.Sprintf("publisher: %s (id %s): %v", e.place(), e.ID, e.Err)
}

func (e *PublishError) Unwrap() error { return e.Err }

// place is its line, or its place among the messages when it has none.
func (e *PublishError) place() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d", e.Line)
	}
	return fmt.Sprintf("message %d", e.Published+1)
}

// Say is the failure in names' words ("Lines": what the lines were read
// from): what is stored, and where to publish again from.
func (e *PublishError) Say(names map[string]string) string {
	what := e.place()
	if e.Line > 0 {
		what = say.Name(names, "Lines") + " " + what
	}
	done := fmt.Sprintf("published %d messages", e.Published)
	if e.Published > 0 {
		done += ", those before it,"
	}
	done += " and sent none after it"
	if e.MaybeStored {
		return fmt.Sprintf("%s (id %s) may or may not be stored: %v; %s; look for id %s in the stream, then publish again from %s, or from the one after it if it is there",
			what, e.ID, e.Err, done, e.ID, e.place())
	}
	detail, fix := "", "fix it"
	switch {
	case errors.Is(e.Err, nats.ErrMaxPayload):
		detail = fmt.Sprintf(" (%d bytes of data, plus headers)", e.Size)
		fix = fmt.Sprintf("shorten %s or raise the server's max_payload", e.place())
	case errors.Is(e.Err, ErrWrongStream):
		fix = "send it to a server where the expected stream captures its subject"
	}
	return fmt.Sprintf("%s was not published: %v%s; %s; %s, then publish again from %s", what, e.Err, detail, done, fix, e.place())
}

// IDError is an id FieldID or CheckID refused.
type IDError struct {
	Field string // the JSON field read; "" for an id given as it is
	Len   int    // the id's length in bytes, for ErrIDTooLong
	Err   error  // ErrNotObject, ErrNoIDField, ErrBadIDField or ErrIDTooLong
	Cause error  // the JSON decoder's error, for ErrNotObject
}

func (e *IDError) Error() string {
	switch {
	case e.Err == ErrIDTooLong:
		return fmt.Sprintf("%v: %d bytes, at most %d", e.Err, e.Len, MaxIDLen)
	case e.Cause != nil:
		return fmt.Sprintf("%v: field %q: %v", e.Err, e.Field, e.Cause)
	default:
		return fmt.Sprintf("%v: field %q", e.Err, e.Field)
	}
}

func (e *IDError) Unwrap() error { return e.Err }

// Say is the refusal in names' words: names maps "IDField" (the field
// FieldID read) to the caller's name for it.
func (e *IDError) Say(names map[string]string) string {
	if e.Err == ErrIDTooLong {
		return e.reason(names) + ", so nothing was published"
	}
	return e.reason(names)
}

// reason is Say without what became of the publish.
func (e *IDError) reason(names map[string]string) string {
	switch e.Err {
	case ErrNotObject:
		return fmt.Sprintf("%s needs a JSON object: %v", say.Name(names, "IDField"), e.Cause)
	case ErrNoIDField:
		return fmt.Sprintf("no field %q for the id", e.Field)
	case ErrBadIDField:
		return fmt.Sprintf("field %q must be a non-empty string or a number", e.Field)
	}
	return fmt.Sprintf("the id is %d bytes; a consumer dead-letters a Nats-Msg-Id over %d bytes", e.Len, MaxIDLen)
}

// Say is the refusal in names' words: names maps "Lines" (what the lines
// were read from) and "IDField" to the caller's names for them.
func (e *LineError) Say(names map[string]string) string {
	done := "nothing was published"
	if e.Published > 0 {
		done = fmt.Sprintf("the %d messages before it were published", e.Published)
	}
	var ie *IDError
	if errors.As(e.Err, &ie) {
		return fmt.Sprintf("%s line %d: %s; %s", say.Name(names, "Lines"), e.Line, ie.reason(names), done)
	}
	return fmt.Sprintf("%s line %d is not valid JSON; %s", say.Name(names, "Lines"), e.Line, done)
}

// ConfigError is a Config or an Input refused: Reason says what is wrong,
// naming the fields as their Names say, so that a caller prints it as it
// is. It is ErrInvalidConfig for errors.Is, and Err, the refusal it says
// (an *IDError, a *LineError, ErrNotJSON, ErrNoSubject), if any.
type ConfigError struct {
	Reason string
	Err    error
}

func (e *ConfigError) Error() string { return ErrInvalidConfig.Error() + ": " + e.Reason }

// Refusal is Reason.
func (e *ConfigError) Refusal() string { return e.Reason }

// Unwrap gives ErrInvalidConfig and Err.
func (e *ConfigError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalidConfig}
	}
	return []error{ErrInvalidConfig, e.Err}
}
