package main

import (
	"time"

	"github.com/jetledger/jetledger/service"
)

// effectsFlags send run's effects to a JetStream subject instead of a
// webhook: the NATS sink of the outbox.
type effectsFlags struct {
	Subject string        `name:"effects-subject" placeholder:"SUBJECT" help:"publish each applied message's payload through the outbox to this subject (JetStream sink: Nats-Msg-Id = the outbox row id; an acknowledgement, a duplicate's included, means sent). A stream must capture the subject: see --effects-stream. Sends with an unknown outcome are re-sent with the same id while the stream's duplicate window covers them, else they go to review"`
	Stream  string        `name:"effects-stream" placeholder:"NAME" help:"with --effects-subject: create this stream for the subject if no stream captures it, its duplicate window long enough for the outbox's retries (with --hub-url: the local stream the hub sources, so effects reach the hub when the link is up)"`
	Timeout time.Duration `name:"effects-timeout" default:"5s" help:"with --effects-subject: how long one publish waits for the stream's acknowledgement"`
}

// effects is the service's NATS sink, or nil without its flags.
func (f effectsFlags) effects() *service.Effects {
	if f.Subject == "" && f.Stream == "" {
		return nil
	}
	return &service.Effects{Subject: f.Subject, Stream: f.Stream, Timeout: f.Timeout}
}
