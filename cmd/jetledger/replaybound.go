package main

import (
	"errors"

	"github.com/jetledger/jetledger/consumer/replay"
	"github.com/jetledger/jetledger/service"
)

// replayAdvice says a replay's refusals (service.Service.Replay) in the
// flags' terms: no durable to bound it, or effects left undecided.
func (c *replayCmd) replayAdvice(err error) error {
	var u *replay.UndecidedError
	switch {
	case errors.Is(err, replay.ErrNoDurable):
		return usagef("stream %s has no durable %q, so replay cannot tell which messages run has yet to handle; "+
			"name run's durable with --durable, or give --to-seq N: messages up to N then count as handled elsewhere and their effects are suppressed",
			c.Stream, c.Durable)
	case errors.As(err, &u) && u.DeadLetter != 0:
		return usagef("the replay reaches dead letter %d (seq %d), which run never applied: give it run's --webhook or --effects-subject so its effect is recorded, or --no-effects if run has none",
			u.DeadLetter, u.Sequence)
	case errors.As(err, &u):
		return usagef("the replay goes past run's ack floor (seq %d, up to %d): give it run's --webhook or --effects-subject so their effects are recorded, or --no-effects if run has none",
			u.Floor, u.UpTo)
	}
	if st, ok := err.(*service.StepError); ok && st.Step == service.StepBounds { //nolint:errorlint // the service's own
		return c.explain(err, c.DB)
	}
	return err
}
