package main

import (
	"errors"

	"github.com/jetledger/jetledger/consumer/replay"
	"github.com/jetledger/jetledger/service"
)

// replayNames are what a replay's refusals call what fixes them.
var replayNames = map[string]string{"Consumer": "run", "Durable": "--durable", "ToSeq": "--to-seq",
	"Sink": "--webhook or --effects-subject", "Decided": "--no-effects"}

// replayAdvice says a replay's refusals (service.Service.Replay: no durable
// to bound it, effects left undecided) as usage errors, in the flags'
// terms (replay.NoDurableError.Say, replay.UndecidedError.Say).
func (c *replayCmd) replayAdvice(err error) error {
	var none *replay.NoDurableError
	var undecided *replay.UndecidedError
	switch {
	case errors.As(err, &none):
		return usageError{reworded{err, none.Say(replayNames)}}
	case errors.As(err, &undecided):
		return usageError{reworded{err, undecided.Say(replayNames)}}
	}
	if st, ok := err.(*service.StepError); ok && st.Step == service.StepBounds { //nolint:errorlint // the service's own
		return c.explain(err, c.DB)
	}
	return err
}
