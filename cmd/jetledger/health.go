package main

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jetledger/jetledger/health"
)

// healthCmd is `jetledger health`: the container's health check.
type healthCmd struct {
	URL   string `name:"url" default:"http://127.0.0.1:9464/healthz" help:"the running process's /healthz (run --metrics)"`
	TLSCA string `name:"tls-ca" placeholder:"FILE" help:"CA certificate (PEM) of an https --url (run --metrics-tls-cert)"`
	jsonFlag
}

func (c *healthCmd) Run(inv *invocation) error {
	client, err := health.NewClient(c.TLSCA, 10*time.Second)
	if err != nil {
		return usagef("--tls-ca: %v", err)
	}
	rep, err := health.Ask(inv.ctx, client, c.URL)
	if err != nil {
		return err
	}
	if c.JSON {
		err = printJSON(inv.stdout, rep)
	} else {
		for _, name := range slices.Sorted(maps.Keys(rep.Checks)) {
			fmt.Fprintf(inv.stdout, "%-10s %s\n", name, rep.Checks[name])
		}
	}
	if err == nil && !rep.Healthy {
		err = errors.New("unhealthy")
	}
	return err
}
