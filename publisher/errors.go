package publisher

import (
	"errors"
	"fmt"
)

var (
	// ErrDuplicateWindowTooShort: the stream forgets ids sooner than the
	// publisher may still retry, so a late retry would be stored twice.
	ErrDuplicateWindowTooShort = errors.New("publisher: stream duplicate window is shorter than the retry horizon")
	// ErrInvalidConfig: a Config field is out of range.
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
	Line int   // the line's number, from 1, empty lines counted
	Err  error // ErrNotJSON, or an *IDError
}

func (e *LineError) Error() string { return fmt.Sprintf("publisher: line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

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
