package publisher

import "errors"

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
)
