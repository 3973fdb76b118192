package main

import (
	"cmp"
	"errors"
	"os"

	"github.com/alecthomas/kong"
	"github.com/jetledger/jetledger/internal/kongx"
	"github.com/jetledger/jetledger/natsconn"
	"github.com/nats-io/nats.go"
)

// A nats CLI user's setup works unchanged: its contexts and its NATS_*
// variables. The contexts are read by natsconn; here is only which layer
// wins and how each maps to the flags.
//
// Precedence, per setting: jetledger's own (flag, JETLEDGER_* variable,
// config file, in kong's order), then the nats CLI's variables, then the
// context's field, then the default. Credentials and the client certificate
// are taken whole from the first of these that sets any part of them, so
// that two ways of logging in are never mixed.
//
// The context is --context, else $NATS_CONTEXT, else the one 'nats context
// select' chose (context.txt), as the nats CLI does; except for run and
// replay, which start an embedded server without --nats, and the commands
// that pair a ledger with a server (status, ledger prune): a context
// selected long ago for the nats CLI must not silently make them consume,
// or prune by, a remote server's stream. They use a context only when one
// is named.

// natsContext is --context. After parsing it holds what the context or the
// NATS_* variables set that jetledger has no flag for, and where the server
// URL came from when jetledger's own settings did not give it.
type natsContext struct {
	name string // as given

	from        string // "$NATS_URL" or `context "NAME" (FILE)`, when the URL came from there
	context     string // `context "NAME" (FILE)`, when one was read
	domain      string // JetStream domain
	apiPrefix   string // JetStream API prefix
	inboxPrefix string
	tlsFirst    bool
}

// Decode reads the flag's value for kong.
func (c *natsContext) Decode(ctx *kong.DecodeContext) error {
	v, err := popFlagValue(ctx, "context")
	c.name = v
	return err
}

// connGroups are the settings a layer gives together; a group that
// jetledger's own settings touch is left to them whole.
var connGroups = [][]kongx.Setting{
	{{Flag: "nats", Env: "NATS_URL", Field: "url"}},
	{
		{Flag: "nats-creds", Env: "NATS_CREDS", Field: "creds"},
		{Flag: "nats-nkey", Env: "NATS_NKEY", Field: "nkey"},
		{Flag: "nats-user", Env: "NATS_USER", Field: "user"},
		{Flag: "nats-password", Env: "NATS_PASSWORD", Field: "password"},
		{Flag: "nats-token", Field: "token"},
	},
	{{Flag: "tls-cert", Env: "NATS_CERT", Field: "cert"}, {Flag: "tls-key", Env: "NATS_KEY", Field: "key"}},
	{{Flag: "tls-ca", Env: "NATS_CA", Field: "ca"}},
}

// AfterApply fills in the connection flags that jetledger's own settings
// left unset, from the NATS_* variables and the context. Errors are the
// caller's (exit 2) and come before any I/O. kong calls it for the --context
// of every command (the flag has a default), so it acts only for the
// selected command's.
func (c *natsContext) AfterApply(kctx *kong.Context) error {
	flags := kongx.SelectedFlags(kctx)
	self, urlFlag := flags["context"], flags["nats"]
	if self == nil || urlFlag == nil || !self.Target.CanAddr() || self.Target.Addr().Interface() != any(c) {
		return nil
	}
	*c = natsContext{name: c.name}
	if sel := kctx.Selected(); sel != nil && sel.Hidden {
		return nil // the demo's consumer: demo gives it its own embedded server
	}
	// run and replay default to their embedded server, not to a URL; and a
	// command that pairs a ledger with a server (status, ledger prune) must
	// not read another server's stream of the same name and act on this
	// ledger by it.
	embedded := urlFlag.Default == "" || flags["db"] != nil
	ctxFile, err := c.load(kctx, self, embedded)
	if err != nil {
		return err
	}
	for _, group := range connGroups {
		if err := c.fill(kctx, flags, group, ctxFile); err != nil {
			return err
		}
	}
	if ctxFile != nil {
		c.context = ctxFile.Label()
		c.domain, c.apiPrefix, c.inboxPrefix = ctxFile.Field("jetstream_domain"), ctxFile.Field("jetstream_api_prefix"), ctxFile.Field("inbox_prefix")
		c.tlsFirst = ctxFile.TLSFirst
	}
	return nil
}

// fill sets group's flags from the NATS_* variables or else from the
// context, unless jetledger's own settings set one of them.
func (c *natsContext) fill(kctx *kong.Context, flags map[string]*kong.Flag, group []kongx.Setting, ctxFile *natsconn.Context) error {
	var field func(string) string
	if ctxFile != nil {
		field = ctxFile.Field
	}
	_, err := kongx.FillGroup(kctx, flags, group, field, func(from kongx.Source, values map[string]string) error {
		if from == kongx.FromEnv {
			if err := checkEnvGroup(group, values); err != nil {
				return err
			}
			if group[0].Flag == "nats" {
				c.from = "$NATS_URL"
			}
			return nil
		}
		if group[0].Flag == "nats" {
			// A context names a server even when it has no URL: the nats CLI's default.
			values["nats"] = cmp.Or(values["nats"], nats.DefaultURL)
			c.from = ctxFile.Label()
		}
		fields := make([]string, len(group))
		for i, s := range group {
			fields[i] = s.Field
		}
		if err := ctxFile.CheckFiles(fields...); err != nil {
			return contextUsage(err)
		}
		return nil
	})
	return err
}

// checkEnvGroup checks the NATS_* variables of a group as the nats CLI
// reads them: files that exist, a certificate with its key, and a user
// without a password being a token.
func checkEnvGroup(group []kongx.Setting, values map[string]string) error {
	for _, s := range group {
		if v := values[s.Flag]; v != "" && natsconn.NamesFile(s.Field) {
			if _, err := os.Stat(v); err != nil {
				return usagef("$%s: %v", s.Env, err)
			}
		}
	}
	if (values["tls-cert"] == "") != (values["tls-key"] == "") && group[0].Flag == "tls-cert" {
		return usagef("$NATS_CERT and $NATS_KEY go together")
	}
	if values["nats-user"] != "" && values["nats-password"] == "" {
		values["nats-token"], values["nats-user"] = values["nats-user"], ""
	}
	return nil
}

// load reads the context that applies, if any: named by --context (or its
// variable or the config file), else by $NATS_CONTEXT, else selected by
// 'nats context select' unless the command defaults to its embedded server.
func (c *natsContext) load(kctx *kong.Context, self *kong.Flag, embedded bool) (*natsconn.Context, error) {
	name, named := c.name, kongx.Given(kctx, self)
	if named && name == "" {
		for _, p := range kctx.Path {
			switch {
			case p.Flag == self && p.Resolved:
				return nil, usagef("--context is empty in the config file: give it a value, or leave it out")
			case p.Flag == self:
				return nil, usagef("--context is empty: give it a value, or leave the flag out")
			}
		}
		named = false // an empty $JETLEDGER_CONTEXT, as for every flag's variable
	}
	contexts, err := natsconn.NewContexts(natsconn.ContextConfig{})
	if err != nil {
		return nil, contextUsage(err)
	}
	var cf *natsconn.Context
	switch {
	case named:
		cf, err = contexts.Load(name)
	case os.Getenv("NATS_CONTEXT") != "":
		cf, err = contexts.Load(os.Getenv("NATS_CONTEXT"))
	case embedded:
		return nil, nil
	default:
		cf, err = contexts.Selected()
	}
	if err != nil {
		return nil, contextUsage(err)
	}
	return cf, nil
}

// contextUsage is a context the library refuses, as a usage error (exit
// 2) with its message; a selected context that is missing says how to
// pick another.
func contextUsage(err error) error {
	var ce *natsconn.ContextError
	switch {
	case !errors.As(err, &ce):
		return err
	case errors.Is(err, natsconn.ErrNoSuchContext) && ce.Selected != "":
		return usagef("context %q, selected in %s: %s: no such file ('nats context select' picks another; or give --context)", ce.Name, ce.Selected, ce.Path)
	}
	return usagef("%s", ce.Detail())
}

// apply sets what the context read that has no flag into cfg.
func (c natsContext) apply(cfg *natsconn.Config) {
	cfg.Domain, cfg.APIPrefix, cfg.InboxPrefix, cfg.TLSFirst = c.domain, c.apiPrefix, c.inboxPrefix, c.tlsFirst
}
