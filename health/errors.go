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
	// ErrLinkDown: an edge's leaf link to its hub is down. Reported as
	// StateLinkDown, and degrades the report (Report.Degraded) without
	// making it unhealthy: the edge processes what it holds.
	ErrLinkDown = errors.New("health: the link to the hub is down")
	// ErrAttention: something needs a person (an *AttentionError says
	// what). Reported as StateAttention and in Report.Attention, without
	// making the report unhealthy: a decision waiting is not a dead process.
	ErrAttention = errors.New("health: needs a person")
	// ErrInvalidConfig: a Config field is out of range, or a probe has no
	// name or check, or two probes share a name.
	ErrInvalidConfig = errors.New("health: invalid config")
)
