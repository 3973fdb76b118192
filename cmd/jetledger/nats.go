package main

import (
	"context"
	"fmt"
	"log/slog"
	neturl "net/url"
	"os"
	"strings"
	"time"

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
	Password string      `name:"nats-password" help:"NATS password"`
	Token    string      `name:"nats-token" help:"NATS authentication token"`
	TLSCA    string      `name:"tls-ca" placeholder:"FILE" help:"CA certificate file to verify the NATS server"`
	TLSCert  string      `name:"tls-cert" placeholder:"FILE" help:"client certificate file for NATS TLS"`
	TLSKey   string      `name:"tls-key" placeholder:"FILE" help:"client key file for NATS TLS"`
}

// options turns the flags into nats.go options, checking that files exist
// so a typo names the flag rather than failing inside the handshake.
func (n natsFlags) options() ([]nats.Option, error) {
	var opts []nats.Option
	for flagName, path := range map[string]string{"--nats-creds": n.Creds, "--nats-nkey": n.NKey, "--tls-ca": n.TLSCA, "--tls-cert": n.TLSCert, "--tls-key": n.TLSKey} {
		if path == "" {
			continue
		}
		if _, err := os.Stat(path); err != nil {
			return nil, usagef("%s: %v", flagName, err)
		}
	}
	if (n.TLSCert == "") != (n.TLSKey == "") {
		return nil, usagef("--tls-cert and --tls-key go together")
	}
	if n.Creds != "" {
		opts = append(opts, nats.UserCredentials(n.Creds))
	}
	if n.NKey != "" {
		o, err := nats.NkeyOptionFromSeed(n.NKey)
		if err != nil {
			return nil, usagef("--nats-nkey %s: %v", n.NKey, err)
		}
		opts = append(opts, o)
	}
	if n.User != "" || n.Password != "" {
		opts = append(opts, nats.UserInfo(n.User, n.Password))
	}
	if n.Token != "" {
		opts = append(opts, nats.Token(n.Token))
	}
	if n.TLSCA != "" {
		opts = append(opts, nats.RootCAs(n.TLSCA))
	}
	if n.TLSCert != "" {
		opts = append(opts, nats.ClientCert(n.TLSCert, n.TLSKey))
	}
	return append(opts, n.Context.options()...), nil
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
	auth, err := n.options()
	if err != nil {
		return nil, nil, err
	}
	url := n.URL
	hint := "is a server running there? 'jetledger run' without --nats starts one"
	switch from := n.Context.from; {
	case from != "":
		hint = "the URL is from " + from
		log.InfoContext(ctx, "NATS server from the nats CLI's settings", "url", redactURL(url), "from", from)
	case n.Context.context != "":
		hint = "with the settings of " + n.Context.context
	}
	nc, err := nats.Connect(url, append(auth,
		nats.Name("jetledger"),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500*time.Millisecond),
		nats.RetryOnFailedConnect(false),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("disconnected from NATS", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("reconnected to NATS", "url", nc.ConnectedUrlRedacted()) }),
	)...)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to NATS at %s: %w (%s)", redactURL(url), err, hint)
	}
	js, err := n.Context.jetStream(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	return nc, js, nil
}

// redactURL hides the user information (a password, or a token in the
// user's place) in a comma-separated list of server URLs: $NATS_URL and
// contexts may carry it.
func redactURL(list string) string {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		bare := !strings.Contains(p, "://") // nats.go takes "user:pass@host:port" too
		if bare {
			p = "nats://" + p
		}
		u, err := neturl.Parse(p)
		switch {
		case err != nil && strings.Contains(p, "@"):
			parts[i] = "xxxxx@" + p[strings.LastIndex(p, "@")+1:]
		case err == nil && u.User != nil:
			u.User = neturl.User("xxxxx")
			parts[i] = u.String()
			if bare {
				parts[i] = strings.TrimPrefix(parts[i], "nats://")
			}
		}
	}
	return strings.Join(parts, ",")
}
