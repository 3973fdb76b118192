package health

import "errors"

var (
	// ErrNotConnected: the NATS client is not connected (it is
	// reconnecting, or closed). Reported as StateNotConnected.
	ErrNotConnected = errors.New("health: not connected to NATS")
	// ErrConsumerUnavailable: the consumer's info could not be read from
	// the server. Reported as StateUnavailable.
	ErrConsumerUnavailable = errors.New("health: consumer info unavailable")
	// ErrWriteFailed: a JetStream store failed a write and keeps the
	// failure until its server restarts. Reported as StateWriteFailed.
	ErrWriteFailed = errors.New("health: the JetStream server cannot write its store")
	// ErrInvalidConfig: a Config field is out of range, or a probe has no
	// name or check, or two probes share a name.
	ErrInvalidConfig = errors.New("health: invalid config")
)
