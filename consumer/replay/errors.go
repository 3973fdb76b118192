package replay

import (
	"errors"
	"fmt"
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
)

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
