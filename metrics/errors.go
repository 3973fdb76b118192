package metrics

import "errors"

var (
	// ErrNoConsumer: Config.Consumer is nil; every counter reads it.
	ErrNoConsumer = errors.New("metrics: Config.Consumer is required")
	// ErrInvalidConfig: a Config field is out of range.
	ErrInvalidConfig = errors.New("metrics: invalid config")
)
