package partition

import "errors"

var (
	// ErrNoInverse: a stored subject that a stream's subject transform
	// cannot be traced back through.
	ErrNoInverse = errors.New("cannot tell which subject the stream's subject transform stored as this one")
	// ErrInvalidConfig: a Config of Run names no partition, one twice or a
	// negative one, or has no Start.
	ErrInvalidConfig = errors.New("partition: invalid config")
)
