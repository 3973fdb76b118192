package replay

import (
	"errors"
	"fmt"

	"github.com/jetledger/jetledger/internal/say"
)

var (
	// ErrNoDurable: the stream has no such durable and no bound is given,
	// so which messages the durable's consumer has yet to handle is
	// unknown.
	ErrNoDurable = errors.New("the stream has no such durable, and no bound is given")
	// ErrEffectsUndecided: the replay would apply messages the durable has
	// not handled (past its ack floor, or dead-lettered) without a sink for
	// their effects, nor being told there are none. UndecidedError says
	// which.
	ErrEffectsUndecided = errors.New("the replay applies messages whose effects nobody records")
	// ErrInvalidConfig: a Start whose fields contradict each other or
	// cannot be read (*ConfigError).
	ErrInvalidConfig = errors.New("replay: invalid configuration")
)

// The refusals' Say names what fixes them in the caller's words: names maps
// "Durable" (the durable's name), "ToSeq" (the bound ReadBounds is given),
// "Sink" (the durable consumer's sink for effects), "Decided" (it has
// none) and "Consumer" (the program that runs the durable's consumer) to
// the caller's. A name not in it is said as itself.

// NoDurableError is ErrNoDurable: Stream has no durable Durable, and
// ReadBounds was given no bound.
type NoDurableError struct {
	Stream, Durable string
}

func (e *NoDurableError) Error() string {
	return fmt.Sprintf("replay: bounds: stream %s, durable %s: %v", e.Stream, e.Durable, ErrNoDurable)
}

// Unwrap makes errors.Is(err, ErrNoDurable) hold.
func (e *NoDurableError) Unwrap() error { return ErrNoDurable }

// Say is the refusal with what fixes it, in names' words.
func (e *NoDurableError) Say(names map[string]string) string {
	c := say.Name(names, "Consumer")
	return fmt.Sprintf("stream %s has no durable %q, so replay cannot tell which messages %s has yet to handle; "+
		"name %s's durable with %s, or give %s N: messages up to N then count as handled elsewhere and their effects are suppressed",
		e.Stream, e.Durable, c, c, say.Name(names, "Durable"), say.Name(names, "ToSeq"))
}

// UndecidedError is ErrEffectsUndecided with where: past the ack floor
// (DeadLetter 0), or at a dead letter.
type UndecidedError struct {
	Floor, UpTo uint64 // the bounds of the replay
	DeadLetter  int64  // the dead letter reached, 0 when none
	Sequence    uint64 // its stream sequence
}

func (e *UndecidedError) Error() string {
	if e.DeadLetter != 0 {
		return fmt.Sprintf("replay: %v: dead letter %d (seq %d)", ErrEffectsUndecided, e.DeadLetter, e.Sequence)
	}
	return fmt.Sprintf("replay: %v: past the ack floor (seq %d, up to %d)", ErrEffectsUndecided, e.Floor, e.UpTo)
}

// Is makes errors.Is(err, ErrEffectsUndecided) hold.
func (e *UndecidedError) Is(target error) bool { return target == ErrEffectsUndecided }

// Say is the refusal with what fixes it, in names' words.
func (e *UndecidedError) Say(names map[string]string) string {
	c, sink, decided := say.Name(names, "Consumer"), say.Name(names, "Sink"), say.Name(names, "Decided")
	if e.DeadLetter != 0 {
		return fmt.Sprintf("the replay reaches dead letter %d (seq %d), which %s never applied: give it %s's %s so its effect is recorded, or %s if %s has none",
			e.DeadLetter, e.Sequence, c, c, sink, decided, c)
	}
	return fmt.Sprintf("the replay goes past %s's ack floor (seq %d, up to %d): give it %s's %s so their effects are recorded, or %s if %s has none",
		c, e.Floor, e.UpTo, c, sink, decided, c)
}

// ConfigError is a Start refused: Reason says what is wrong, naming the
// fields as Start.Names says, so that a caller prints it as it is. It is
// ErrInvalidConfig for errors.Is.
type ConfigError struct{ Reason string }

func (e *ConfigError) Error() string { return ErrInvalidConfig.Error() + ": " + e.Reason }

// Refusal is Reason.
func (e *ConfigError) Refusal() string { return e.Reason }

// Unwrap gives ErrInvalidConfig.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

func refuse(format string, a ...any) error {
	return &ConfigError{Reason: fmt.Sprintf(format, a...)}
}

// Say is err, when it is a refusal of this package (*NoDurableError,
// *UndecidedError, *ConfigError), said with what fixes it in names' words
// (a ConfigError's Reason, in its Start's), and whether it is one.
func Say(err error, names map[string]string) (string, bool) {
	var none *NoDurableError
	var undecided *UndecidedError
	var ce *ConfigError
	switch {
	case errors.As(err, &none):
		return none.Say(names), true
	case errors.As(err, &undecided):
		return undecided.Say(names), true
	case errors.As(err, &ce):
		return ce.Reason, true
	}
	return "", false
}
