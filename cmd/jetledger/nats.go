package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/jetledger/jetledger/service"
	"log/slog"

	"github.com/jetledger/jetledger/natsconn"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// defaultNATS is where the embedded server of `run` listens, and so where
// the other commands look for a server by default.
const defaultNATS = "nats://127.0.0.1:4222"

// natsFlags are the connection flags of the commands that talk to a server,
// named as the nats CLI users know them. The default URL and its help are
// the variables nats_url and nats_help, which run and replay set to empty:
// without --nats they start an embedded server. What jetledger's own
// settings leave unset comes from the nats CLI's variables and context
// (natscontext.go); --context has a default, empty, so that kong calls its
// hook on every parse.
type natsFlags struct {
	URL      string      `name:"nats" short:"s" default:"${nats_url}" placeholder:"URL" help:"${nats_help}"`
	Context  natsContext `name:"context" default:"" placeholder:"NAME" help:"nats CLI context: a name (a file in $XDG_CONFIG_HOME/nats/context, default ~/.config/nats/context) or a .json file; else $NATS_CONTEXT, else the one 'nats context select' chose (but not for run and replay). Flags, JETLEDGER_* and --config win over $NATS_URL, $NATS_CREDS and the nats CLI's other NATS_* variables, and those over the context"`
	Creds    string      `name:"nats-creds" placeholder:"FILE" help:"NATS user credentials file (JWT and seed)"`
	NKey     string      `name:"nats-nkey" placeholder:"FILE" help:"NATS user NKey seed file"`
	User     string      `name:"nats-user" help:"NATS user name"`
	Password string      `name:"nats-password" help:"NATS password: better --nats-password-file, or the environment; a command line is seen by every local user"`
	PassFile string      `name:"nats-password-file" secret:"nats-password" placeholder:"FILE" help:"read --nats-password from this file (default under systemd: $CREDENTIALS_DIRECTORY/nats-password, if there)"`
	Token    string      `name:"nats-token" help:"NATS authentication token: better --nats-token-file, or the environment"`
	TokFile  string      `name:"nats-token-file" secret:"nats-token" placeholder:"FILE" help:"read --nats-token from this file (default under systemd: $CREDENTIALS_DIRECTORY/nats-token, if there)"`
	TLSCA    string      `name:"tls-ca" placeholder:"FILE" help:"CA certificate file to verify the NATS server"`
	TLSCert  string      `name:"tls-cert" placeholder:"FILE" help:"client certificate file for NATS TLS"`
	TLSKey   string      `name:"tls-key" placeholder:"FILE" help:"client key file for NATS TLS"`
	Inbox    string      `name:"inbox-prefix" placeholder:"PREFIX" help:"prefix of reply subjects (default _INBOX); a publisher of run's embedded server gives _INBOX.publishers, the only replies it may read"`
}

// config maps the flags, and what Resolve found that has no flag, to the
// library's connection config.
func (n natsFlags) config(log *slog.Logger) natsconn.Config {
	c := n.Context
	return natsconn.Config{URL: n.URL, Creds: n.Creds, NKey: n.NKey, User: n.User, Password: n.Password, Token: n.Token,
		TLSCA: n.TLSCA, TLSCert: n.TLSCert, TLSKey: n.TLSKey, Logger: log,
		Domain: c.domain, APIPrefix: c.apiPrefix, InboxPrefix: cmp.Or(c.inboxPrefix, n.Inbox), TLSFirst: c.tlsFirst}
}

// dial builds the command's logger and connects with it.
func dial(inv *invocation, n natsFlags, l logFlags) (*nats.Conn, jetstream.JetStream, *slog.Logger, error) {
	log, err := l.logger(inv.stderr)
	if err != nil {
		return nil, nil, nil, err
	}
	nc, js, err := connect(inv.ctx, n, log)
	return nc, js, log, err
}

// connect dials the server with reconnects forever: a restarting broker is a
// pause, not an exit.
func connect(ctx context.Context, n natsFlags, log *slog.Logger) (*nats.Conn, jetstream.JetStream, error) {
	cfg := n.config(log)
	// Refused before the log line below, as a usage error naming the flag.
	if err := cfg.Check(natsNames); err != nil {
		return nil, nil, configUsage(err)
	}
	url := n.URL
	hint := "is a server running there? 'jetledger run' without --nats starts one"
	switch o := n.Context.origin; {
	case o.URL != "":
		hint = "the URL is from " + o.URL
		log.InfoContext(ctx, "NATS server from the nats CLI's settings", "url", natsconn.RedactURL(url), "from", o.URL)
	case o.Context != "":
		hint = "with the settings of " + o.Context
	}
	nc, js, err := natsconn.Connect(ctx, cfg)
	var ce *natsconn.ConnectError
	switch {
	case err == nil:
		return nc, js, nil
	case errors.As(err, &ce) && ce.Op == "jetstream":
		return nil, nil, fmt.Errorf("jetstream: %w", ce.Err)
	case errors.As(err, &ce):
		return nil, nil, fmt.Errorf("connect to NATS at %s: %w (%s)", natsconn.RedactURL(url), ce.Err, hint)
	}
	return nil, nil, err // Check refused what Connect would
}

// orRecorded makes an empty --nats the server the ledger at db records
// for w's consumer (service.RecordedServer), else defaultNATS: commands
// that pair the ledger with a server ask the one its run used.
func (n *natsFlags) orRecorded(ctx context.Context, db string, w service.Want) {
	if n.URL == "" {
		n.URL = cmp.Or(service.RecordedServer(ctx, db, w), defaultNATS)
	}
}
