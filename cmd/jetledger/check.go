package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jetledger/jetledger/internal/say"
	"github.com/jetledger/jetledger/status"
	"github.com/nats-io/nats.go/jetstream"
)

const checkHelp = `
Check a live consumer against the timing plan that 'run' would use with the
same flags: explicit acks, AckWait (and every BackOff step) at least
buffer-wait + deadline + commit + ack margins, MaxAckPending at least the
batch size. Exit 0 when it holds, 1 with the durations and the fix when not.`

// consumerNames are what the consumer's refusals call the plan's
// settings: the flags (consumer.Config.Names, status.Config.Names).
var consumerNames = say.Under(runNames.Settings, "Consumer")

// checkCmd is `jetledger check`.
type checkCmd struct {
	NATS natsFlags `embed:"" group:"nats"`
	streamFlags
	Plan planFlags `embed:"" group:"timing"`
	Log  logFlags  `embed:"" group:"log"`
}

func (checkCmd) Help() string { return checkHelp }

func (c *checkCmd) Run(inv *invocation) error {
	plan, err := c.Plan.plan()
	if err == nil {
		err = c.streamFlags.validate()
	}
	if err != nil {
		return err
	}
	nc, js, _, err := dial(inv, c.NATS, c.Log)
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(inv.ctx, 10*time.Second)
	defer cancel()
	cons, err := status.Check(ctx, js, status.Config{Stream: c.Stream, Durable: c.Durable, Plan: plan, Names: consumerNames})
	if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("consumer %s/%s does not exist; 'jetledger run' creates it with AckWait %s", c.Stream, c.Durable, plan.AckWait())
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(inv.stdout, "consumer   %s/%s\nack wait   %s\nplan       %s\n", c.Stream, c.Durable, cons.AckWait, plan)
	if !cons.Safe {
		fmt.Fprintln(inv.stdout, "result     UNSAFE")
		return cons.Refusal
	}
	fmt.Fprintln(inv.stdout, "result     ok")
	return nil
}
