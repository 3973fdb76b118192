package partition

import (
	"errors"
	"fmt"
)

var (
	// ErrNoInverse: a stored subject that a stream's subject transform
	// cannot be traced back through.
	ErrNoInverse = errors.New("cannot tell which subject the stream's subject transform stored as this one")
	// ErrInvalidConfig: a Config of Run names no partition, one twice or a
	// negative one, or has no Start.
	ErrInvalidConfig = errors.New("partition: invalid config")
	// ErrWildcardNotLast: Transform's subject has a '>' before its last
	// token.
	ErrWildcardNotLast = errors.New("'>' must be the last token")
	// ErrNoKey: Transform's key is none of the subject's '*' tokens
	// (KeyError).
	ErrNoKey = errors.New("the key is none of the subject's '*' tokens")
)

// KeyError is ErrNoKey with the subject and its count of '*' tokens.
type KeyError struct {
	Subject   string
	Key       int // the position asked for, from 1
	Wildcards int // the subject's '*' tokens
}

func (e *KeyError) Error() string {
	return fmt.Sprintf("partition: transform %q: key %d: %s (it has %d)", e.Subject, e.Key, ErrNoKey, e.Wildcards)
}
func (e *KeyError) Unwrap() error { return ErrNoKey }
