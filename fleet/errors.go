package fleet

import "errors"

var (
	// ErrEphemeralSource: the hub's effects stream sources a site's
	// effects without a durable consumer (made by hand or an earlier
	// release); AddSite does not switch it, as that copies the site's
	// effects again from the consumer's start.
	ErrEphemeralSource = errors.New("fleet: the effects stream sources the site without a durable consumer")
	// ErrInvalidConfig: a ListConfig out of range.
	ErrInvalidConfig = errors.New("fleet: invalid config")
	// ErrInvalidSite: a Site without a valid domain or stream name, or a
	// Reporter whose Site is no JetStream domain.
	ErrInvalidSite = errors.New("fleet: invalid site")
)
