package group

import "errors"

var (
	// ErrInvalidConfig: a Config out of range (a group name that is no
	// key token, no partitions, a TTL under three heartbeats).
	ErrInvalidConfig = errors.New("group: invalid config")
)
