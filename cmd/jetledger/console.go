package main

import (
	"time"

	"github.com/jetledger/jetledger/console"
	"github.com/jetledger/jetledger/fleet"
)

const consoleHelp = `
A web page over the admin API of every run the NATS connection reaches (at a
hub, every site, with their records in ` + fleet.Bucket + `): sites worst first, the
attention queue, a row with its payload hidden until asked for, graphs. A
signed-in operator acts on a row or a filter after a confirmation that counts
the rows; a row changed since shown is left and reported; each action is the
owner's, audited. --users-file: "name role secret" per line (role viewer or
operator; secret as is or sha256:<hex>), not readable by others; without it
every visitor is an operator, on loopback only.`

// consoleCmd is `jetledger console`: console.Serve.
type consoleCmd struct {
	NATS      natsFlags     `embed:"" group:"nats"`
	Listen    string        `name:"listen" default:"127.0.0.1:8080" placeholder:"ADDR" help:"serve the console on this address; one that is not loopback needs --users-file"`
	Users     string        `name:"users-file" type:"existingfile" placeholder:"FILE" help:"who may sign in: \"name role secret\" per line, role viewer or operator"`
	HTTPSCert string        `name:"https-cert" type:"existingfile" placeholder:"FILE" help:"serve HTTPS with this PEM certificate (and --https-key); the session cookie is then Secure"`
	HTTPSKey  string        `name:"https-key" type:"existingfile" placeholder:"FILE" help:"the PEM key of --https-cert"`
	Prefix    string        `name:"prefix" default:"/" placeholder:"PATH" help:"serve under this path (as a reverse proxy forwards it)"`
	Refresh   time.Duration `name:"refresh" default:"10s" help:"read the sites and the queue again this often"`
	Stale     time.Duration `name:"stale" default:"1m" help:"a site whose last record is older than this is offline"`
	Log       logFlags      `embed:""`
}

func (c *consoleCmd) Run(inv *invocation) error {
	log, err := c.Log.logger(inv.stderr)
	if err != nil {
		return err
	}
	cfg := console.ServeConfig{Listen: c.Listen, TLSCert: c.HTTPSCert, TLSKey: c.HTTPSKey,
		Options: console.Options{Prefix: c.Prefix, Refresh: c.Refresh, Fleet: fleet.ListConfig{Stale: c.Stale}, Logger: log}}
	if c.Users != "" {
		if cfg.Users, err = console.LoadUsers(c.Users); err != nil {
			return usagef("--users-file: %v", err)
		}
	}
	if err := cfg.Check(); err != nil { // before connecting
		return usagef("--listen, --https-cert, --https-key: %v", err)
	}
	nc, js, err := connect(inv.ctx, c.NATS, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	cfg.Conn, cfg.JetStream = nc, js
	return console.Serve(inv.ctx, cfg)
}

func (consoleCmd) Help() string { return consoleHelp }
