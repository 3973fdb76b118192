package group

import "errors"

var (
	// ErrInvalidConfig: a Config out of range (a group name that is no
	// key token, no partitions, a TTL under three heartbeats).
	ErrInvalidConfig = errors.New("group: invalid config")
	// ErrShape: this member's partitions or standbys are not the group's,
	// which members still run.
	ErrShape = errors.New("group: another shape than the group's")
)
