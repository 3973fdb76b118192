package natssink

import "errors"

var (
	// ErrInvalidConfig: a Config field is missing or malformed.
	ErrInvalidConfig = errors.New("natssink: invalid configuration")
	// ErrCannotProve: a lookup did not find the item and cannot prove it
	// never arrived (the stream instance its sends went to is gone or
	// unknown, or no longer holds every message since); the row stays in
	// review.
	ErrCannotProve = errors.New("natssink: the stream cannot prove the item never arrived")
)
