package natsconn

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	neturl "net/url"
	"os"
	"strings"
	"time"

	"github.com/jetledger/jetledger/internal/say"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Defaults of Config.
const (
	DefaultName          = "jetledger"
	DefaultReconnectWait = 500 * time.Millisecond
)

// Config is a connection to a NATS server and its JetStream API. The zero
// value connects to nats.DefaultURL without credentials.
type Config struct {
	// URL is the server, or a comma-separated list of servers. Default
	// nats.DefaultURL.
	URL string
	// Creds is a user credentials file (JWT and seed). Default none.
	Creds string
	// NKey is a user NKey seed file. Default none.
	NKey string
	// User and Password log in by name; either alone is sent too. Default none.
	User, Password string
	// Token is an authentication token. Default none.
	Token string
	// TLSCA is a CA certificate file to verify the server. Default the
	// system's roots.
	TLSCA string
	// TLSCert and TLSKey are the client certificate and its key, given
	// together. Default none.
	TLSCert, TLSKey string
	// TLSFirst does the TLS handshake before the server's INFO. Default false.
	TLSFirst bool
	// Domain is the JetStream domain. Default none: the account's own.
	Domain string
	// APIPrefix is the JetStream API prefix, instead of a Domain. Default
	// "$JS.API".
	APIPrefix string
	// InboxPrefix is the prefix of reply subjects. Default "_INBOX".
	InboxPrefix string
	// Name is the client's name, as the server shows it. Default DefaultName.
	Name string
	// ReconnectWait is the pause between reconnect attempts; reconnects
	// never stop. Default DefaultReconnectWait; not negative.
	ReconnectWait time.Duration
	// Logger gets the disconnects and reconnects. Default slog.Default().
	Logger *slog.Logger
	// InProcess, when set, is a server in this process to connect to
	// without a socket (nats.InProcessServer): an embedded node's
	// (node.Node.Conn). URL then only names it in messages. Default nil.
	InProcess nats.InProcessConnProvider
}

// Validate checks cfg before any I/O but stat: the files it names exist
// (a *FileError names the field), a certificate comes with its key, a
// Domain is not given together with an APIPrefix.
func (cfg Config) Validate() error {
	for _, f := range []struct{ setting, path string }{{"Creds", cfg.Creds}, {"NKey", cfg.NKey},
		{"TLSCA", cfg.TLSCA}, {"TLSCert", cfg.TLSCert}, {"TLSKey", cfg.TLSKey}} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return &FileError{Setting: f.setting, Err: err}
		}
	}
	switch {
	case (cfg.TLSCert == "") != (cfg.TLSKey == ""):
		return ErrCertWithoutKey
	case cfg.Domain != "" && cfg.APIPrefix != "":
		return fmt.Errorf("%w: Domain and APIPrefix both say where the JetStream API is", ErrInvalidConfig)
	case cfg.ReconnectWait < 0:
		return fmt.Errorf("%w: ReconnectWait %v is negative", ErrInvalidConfig, cfg.ReconnectWait)
	}
	return nil
}

// Options validates cfg and returns the nats.go options of its
// credentials, TLS, inbox prefix and handshake; not those of Connect's
// name and reconnects.
func (cfg Config) Options() ([]nats.Option, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var opts []nats.Option
	if cfg.Creds != "" {
		opts = append(opts, nats.UserCredentials(cfg.Creds))
	}
	if cfg.NKey != "" {
		o, err := nats.NkeyOptionFromSeed(cfg.NKey)
		if err != nil {
			return nil, &NKeyError{Path: cfg.NKey, Err: err}
		}
		opts = append(opts, o)
	}
	if cfg.User != "" || cfg.Password != "" {
		opts = append(opts, nats.UserInfo(cfg.User, cfg.Password))
	}
	if cfg.Token != "" {
		opts = append(opts, nats.Token(cfg.Token))
	}
	if cfg.TLSCA != "" {
		opts = append(opts, nats.RootCAs(cfg.TLSCA))
	}
	if cfg.TLSCert != "" {
		opts = append(opts, nats.ClientCert(cfg.TLSCert, cfg.TLSKey))
	}
	if cfg.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(cfg.InboxPrefix))
	}
	if cfg.InProcess != nil {
		opts = append(opts, nats.InProcessServer(cfg.InProcess))
	}
	if cfg.TLSFirst {
		opts = append(opts, nats.TLSHandshakeFirst())
	}
	return opts, nil
}

// Check is Options' refusal of cfg said in names' words (a setting's
// Config field, "Creds", to the caller's name for it; say.Name): a
// *ConfigError, for a command line to print as its usage error. A refusal
// that a Config from Resolve cannot have (Domain with APIPrefix, a
// negative ReconnectWait) is returned as Options gives it.
func (cfg Config) Check(names map[string]string) error {
	_, err := cfg.Options()
	var fe *FileError
	var ke *NKeyError
	var reason string
	switch {
	case errors.As(err, &fe):
		reason = say.Name(names, fe.Setting) + ": " + fe.Err.Error()
	case errors.As(err, &ke):
		reason = say.Name(names, "NKey") + " " + ke.Path + ": " + ke.Err.Error()
	case errors.Is(err, ErrCertWithoutKey):
		reason = say.Name(names, "TLSCert") + " and " + say.Name(names, "TLSKey") + " go together"
	default:
		return err
	}
	return &ConfigError{Reason: reason, Err: err}
}

// Connect validates cfg, dials the server with reconnects forever (a
// restarting broker is a pause, not an exit) and opens its JetStream API
// in cfg's domain or at its prefix. A failure after validation is a
// *ConnectError. nats.go's dial is bounded by its own timeout (2s per
// server); ctx cancelled before it is an error.
func Connect(ctx context.Context, cfg Config) (*nats.Conn, jetstream.JetStream, error) {
	auth, err := cfg.Options()
	if err != nil {
		return nil, nil, err
	}
	url, log := cmp.Or(cfg.URL, nats.DefaultURL), cmp.Or(cfg.Logger, slog.Default())
	if err := ctx.Err(); err != nil {
		return nil, nil, &ConnectError{Op: "connect", URL: RedactURL(url), Err: err}
	}
	nc, err := nats.Connect(url, append(auth,
		nats.Name(cmp.Or(cfg.Name, DefaultName)),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(cmp.Or(cfg.ReconnectWait, DefaultReconnectWait)),
		nats.RetryOnFailedConnect(false),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("disconnected from NATS", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("reconnected to NATS", "url", nc.ConnectedUrlRedacted()) }),
	)...)
	if err != nil {
		return nil, nil, &ConnectError{Op: "connect", URL: RedactURL(url), Err: err}
	}
	js, err := JetStream(nc, cfg)
	if err != nil {
		nc.Close()
		return nil, nil, &ConnectError{Op: "jetstream", URL: RedactURL(url), Err: err}
	}
	return nc, js, nil
}

// JetStream is the JetStream API of nc in cfg's Domain or at its
// APIPrefix, if it names one.
func JetStream(nc *nats.Conn, cfg Config) (jetstream.JetStream, error) {
	switch {
	case cfg.Domain != "":
		return jetstream.NewWithDomain(nc, cfg.Domain)
	case cfg.APIPrefix != "":
		return jetstream.NewWithAPIPrefix(nc, cfg.APIPrefix)
	}
	return jetstream.New(nc)
}

// RedactURL hides the user information (a password, or a token in the
// user's place) in a comma-separated list of server URLs: $NATS_URL and
// contexts may carry it.
func RedactURL(list string) string { return withoutUser(list, "xxxxx") }

// BareURL is list without its user information: the servers alone, to
// record and connect to again with credentials given apart.
func BareURL(list string) string { return withoutUser(list, "") }

// withoutUser puts as (none if empty) in place of each URL's user
// information.
func withoutUser(list, as string) string {
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
			parts[i] = strings.TrimPrefix(as+"@", "@") + p[strings.LastIndex(p, "@")+1:]
		case err == nil && u.User != nil:
			u.User = nil
			if as != "" {
				u.User = neturl.User(as)
			}
			parts[i] = u.String()
			if bare {
				parts[i] = strings.TrimPrefix(parts[i], "nats://")
			}
		}
	}
	return strings.Join(parts, ",")
}

// APIPrefix is what nats.go's KV puts before a key's subject when js
// speaks to a domain or through an API prefix: a KV write published by
// hand (with a per-message TTL, which KeyValue.Put cannot set) goes to
// APIPrefix(js) + "$KV.<bucket>.<key>".
func APIPrefix(js jetstream.JetStream) string {
	o := js.Options()
	if o.Domain != "" {
		return "$JS." + o.Domain + ".API."
	}
	if p := strings.TrimSuffix(o.APIPrefix, ".") + "."; p != "." && p != jetstream.DefaultAPIPrefix {
		return p
	}
	return ""
}

// KeyTTL is ttl in whole seconds, rounded up, for a per-message TTL
// (Nats-TTL): the server counts it in seconds, and one cut short would
// free a key (a lease, a member's heartbeat) its writer still holds.
func KeyTTL(ttl time.Duration) time.Duration {
	return (ttl + time.Second - 1).Truncate(time.Second)
}
