package prune

import "errors"

var (
	// ErrRetentionShort: the retention is shorter than the stream's
	// duplicate window, so a republished id could be applied twice.
	ErrRetentionShort = errors.New("the retention is shorter than the stream's duplicate window")
	// ErrInvalidConfig: a Pruner is refused before any I/O.
	ErrInvalidConfig = errors.New("invalid pruner config")
)
