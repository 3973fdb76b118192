package main

import (
	"github.com/jetledger/jetledger/consumer/replay"
	"github.com/jetledger/jetledger/service"
)

// replayNames are what a replay's refusals call what fixes them.
var replayNames = map[string]string{"Consumer": "run", "Durable": "--durable", "ToSeq": "--to-seq",
	"Sink": "--webhook or --effects-subject", "Decided": "--no-effects",
	"FromSeq": "--from-seq", "Since": "--since", "HaveSink": "--webhook (or --effects-subject)", "NoEffects": "--no-effects"}

// replayAdvice says a replay's refusals (replay.Start.From's, and
// service.Service.Replay's: no durable to bound it, effects left
// undecided) as usage errors, in the flags' terms (replay.Say).
func (c *replayCmd) replayAdvice(err error) error {
	if reason, ok := replay.Say(err, replayNames); ok {
		return usageError{reworded{err, reason}}
	}
	if st, ok := err.(*service.StepError); ok && st.Step == service.StepBounds { //nolint:errorlint // the service's own
		return c.explain(err, c.DB)
	}
	return err
}
