package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/jetledger/jetledger/service"
	"github.com/jetledger/jetledger/stream"
)

// effectsFlags send run's effects to a JetStream subject instead of a
// webhook: the NATS sink of the outbox.
type effectsFlags struct {
	Subject string        `name:"effects-subject" placeholder:"SUBJECT" help:"publish each applied message's payload through the outbox to this subject (JetStream sink: Nats-Msg-Id = the outbox row id; an acknowledgement, a duplicate's included, means sent). A stream must capture the subject: see --effects-stream. Sends with an unknown outcome are re-sent with the same id while the stream's duplicate window covers them, else they go to review"`
	Stream  string        `name:"effects-stream" placeholder:"NAME" help:"with --effects-subject: create this stream for the subject if no stream captures it, its duplicate window long enough for the outbox's retries (with --hub-url: the local stream the hub sources, so effects reach the hub when the link is up)"`
	Timeout time.Duration `name:"effects-timeout" default:"5s" help:"with --effects-subject: how long one publish waits for the stream's acknowledgement"`
}

func (f effectsFlags) validate(webhookURL string) error {
	switch {
	case f.Subject == "" && f.Stream != "":
		return usagef("--effects-stream goes with --effects-subject")
	case f.Subject == "":
		return nil
	case webhookURL != "":
		return usagef("--effects-subject and --webhook both name the sink of run's effects; give one")
	case !stream.LiteralSubject(f.Subject):
		return usagef("--effects-subject %q: want one subject without wildcards, such as effects.site1", f.Subject)
	case f.Timeout <= 0:
		return usagef("--effects-timeout %s: must be positive", f.Timeout)
	}
	return nil
}

// advise says the NATS sink's refusals (service.StepEffects) in the flags'
// terms.
func (f effectsFlags) advise(err error) error {
	if taken := (*stream.SubjectTakenError)(nil); errors.As(err, &taken) {
		return fmt.Errorf("--effects-subject %s is captured by stream %s, not --effects-stream %s", f.Subject, taken.By, f.Stream)
	}
	if errors.Is(err, service.ErrNoEffectsStream) {
		return fmt.Errorf("no stream captures --effects-subject %s: create one, or pass --effects-stream NAME to have run create it", f.Subject)
	}
	return err
}
