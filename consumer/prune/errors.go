package prune

import (
	"errors"
	"fmt"
	"time"

	"github.com/jetledger/jetledger/internal/say"
)

var (
	// ErrRetentionShort: the retention is shorter than the stream's
	// duplicate window, so a republished id could be applied twice.
	ErrRetentionShort = errors.New("the retention is shorter than the stream's duplicate window")
	// ErrInvalidConfig: a Pruner is refused before any I/O.
	ErrInvalidConfig = errors.New("invalid pruner config")
)

// RetentionError is ErrRetentionShort with the bounds compared, said with
// the caller's name for Retention (Pruner.Names).
type RetentionError struct {
	Stream          string
	Retention       time.Duration // as the Pruner was given it (0: ledger.RetentionDefault)
	DuplicateWindow time.Duration // the stream's
	Names           map[string]string
}

func (e *RetentionError) Error() string {
	return fmt.Sprintf("%s %s is shorter than stream %s's duplicate window %s: a republished id could be applied twice",
		say.Name(e.Names, "Retention"), e.Retention, e.Stream, e.DuplicateWindow)
}

// Unwrap makes errors.Is(err, ErrRetentionShort) hold.
func (e *RetentionError) Unwrap() error { return ErrRetentionShort }

// Refusal is the refusal of Retention in Names' words: its Error.
func (e *RetentionError) Refusal() string { return e.Error() }
