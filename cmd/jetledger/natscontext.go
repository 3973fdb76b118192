package main

import (
	"strings"

	"github.com/alecthomas/kong"
	"github.com/jetledger/jetledger/internal/kongx"
	"github.com/jetledger/jetledger/natsconn"
)

// A nats CLI user's setup works unchanged: natsconn.Resolve fills in what
// jetledger's own settings (flag, JETLEDGER_* variable, config file) left
// unset from the NATS_* variables and the context. run and replay, which
// start an embedded server without --nats, and the commands that pair a
// ledger with a server (status, ledger prune) use a context only when one
// is named: one selected long ago for the nats CLI must not silently make
// them consume, or prune by, a remote server's stream.

// natsContext is --context. After parsing it holds what Resolve found that
// jetledger has no flag for.
type natsContext struct {
	name                           string // as given
	origin                         natsconn.Origin
	domain, apiPrefix, inboxPrefix string
	tlsFirst                       bool
}

// Decode reads the flag's value for kong.
func (c *natsContext) Decode(ctx *kong.DecodeContext) error {
	v, err := popFlagValue(ctx, "context")
	c.name = v
	return err
}

// natsNames are the flags of natsconn's settings, by Config field: what
// jetledger gives, and how natsconn's refusals name it.
var natsNames = map[string]string{"URL": "--nats", "Creds": "--nats-creds", "NKey": "--nats-nkey", "User": "--nats-user",
	"Password": "--nats-password", "Token": "--nats-token", "TLSCA": "--tls-ca", "TLSCert": "--tls-cert", "TLSKey": "--tls-key", "Context": "--context", "InboxPrefix": "--inbox-prefix"}

// AfterApply resolves the connection flags, before any I/O. kong calls it
// for the --context of every command (the flag has a default), so it acts
// only for the selected command's; not for the demo's hidden consumer,
// which demo gives its own embedded server.
func (c *natsContext) AfterApply(kctx *kong.Context) error {
	n, flags := selectedNATS(kctx), kongx.SelectedFlags(kctx)
	if n == nil || &n.Context != c || kctx.Selected().Hidden {
		return nil
	}
	for _, p := range kctx.Path {
		if p.Flag == flags["context"] && c.name == "" {
			return &kongx.EmptyValueError{Flag: "--context", InFile: p.Resolved}
		}
	}
	// Before the nats CLI's settings: a secret's file is jetledger's own.
	fromFile, err := kongx.ReadSecrets(kctx)
	if err != nil {
		return usageError{err}
	}
	cfg, origin, err := natsconn.Resolve(n.config(nil), natsconn.Sources{Context: c.name, Names: natsNames,
		OnlyNamed: flags["nats"].Default == "" || flags["db"] != nil, // run, replay; status, ledger prune
		Given: func(path string) bool {
			f := flags[strings.TrimPrefix(natsNames[path], "--")]
			return f != nil && (kongx.Given(kctx, f) || fromFile[f.Name])
		}})
	if err != nil {
		return configUsage(err)
	}
	n.URL, n.Creds, n.NKey, n.User, n.Password, n.Token, n.TLSCA, n.TLSCert, n.TLSKey = cfg.URL, cfg.Creds, cfg.NKey, cfg.User, cfg.Password, cfg.Token, cfg.TLSCA, cfg.TLSCert, cfg.TLSKey
	*c = natsContext{name: c.name, origin: origin, domain: cfg.Domain, apiPrefix: cfg.APIPrefix, inboxPrefix: cfg.InboxPrefix, tlsFirst: cfg.TLSFirst}
	return nil
}

// selectedNATS is the selected command's connection flags, its field NATS
// (perhaps in an embedded struct), if it has them.
func selectedNATS(kctx *kong.Context) *natsFlags {
	if kctx.Selected() == nil {
		return nil
	}
	v := kctx.Selected().Target.FieldByName("NATS")
	if !v.CanAddr() {
		return nil
	}
	n, _ := v.Addr().Interface().(*natsFlags)
	return n
}
