package main

import "github.com/jetledger/jetledger/internal/demo"

// demoCmd is `jetledger demo` (package demo tells the story).
type demoCmd struct {
	Events int  `name:"events" default:"500" help:"distinct payment events to publish"`
	Resend int  `name:"resend" default:"50" help:"events published a second time with the same id"`
	Keep   bool `name:"keep" help:"keep the temporary directory (database and stream store) and print its path"`
}

func (demoCmd) Help() string { return demo.Help }

func (c *demoCmd) Run(inv *invocation) error {
	o := demo.Options{Events: c.Events, Resend: c.Resend, Keep: c.Keep}
	if err := o.Check(); err != nil {
		return usagef("%v", err)
	}
	return demo.Run(inv.ctx, o, inv.stdout, inv.stderr)
}

// demoConsumerCmd is consumer #1 of the demo, this binary run again by
// the demo (demo.CrashingConsumer).
type demoConsumerCmd struct {
	dbFlag
	NATS natsFlags `embed:""`
}

func (c *demoConsumerCmd) Run(inv *invocation) error {
	nc, js, err := connect(inv.ctx, c.NATS, quiet)
	if err != nil {
		return err
	}
	defer nc.Close()
	return demo.CrashingConsumer(inv.ctx, nc, js, c.DB, inv.stdout)
}
