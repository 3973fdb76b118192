package main

import (
	"errors"
	"reflect"
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
	"Password": "--nats-password", "Token": "--nats-token", "TLSCA": "--tls-ca", "TLSCert": "--tls-cert", "TLSKey": "--tls-key", "Context": "--context"}

// AfterApply resolves the connection flags, before any I/O. kong calls it
// for the --context of every command (the flag has a default), so it acts
// only for the selected command's; not for the demo's hidden consumer,
// which demo gives its own embedded server.
func (c *natsContext) AfterApply(kctx *kong.Context) error {
	flags := kongx.SelectedFlags(kctx)
	self, urlFlag := flags["context"], flags["nats"]
	if self == nil || urlFlag == nil || !self.Target.CanAddr() || self.Target.Addr().Interface() != any(c) {
		return nil
	}
	if *c = (natsContext{name: c.name}); kctx.Selected() != nil && kctx.Selected().Hidden {
		return nil
	}
	for _, p := range kctx.Path {
		if p.Flag == self && c.name == "" {
			return &kongx.EmptyValueError{Flag: "--context", InFile: p.Resolved}
		}
	}
	var own natsconn.Config
	syncFlags(flags, &own, false)
	cfg, origin, err := natsconn.Resolve(own, natsconn.Sources{Context: c.name, Names: natsNames,
		OnlyNamed: urlFlag.Default == "" || flags["db"] != nil,
		Given: func(path string) bool {
			f := flags[strings.TrimPrefix(natsNames[path], "--")]
			return f != nil && kongx.Given(kctx, f)
		}})
	if err != nil {
		return configUsage(err)
	}
	syncFlags(flags, &cfg, true)
	c.origin, c.domain, c.apiPrefix, c.inboxPrefix, c.tlsFirst = origin, cfg.Domain, cfg.APIPrefix, cfg.InboxPrefix, cfg.TLSFirst
	return nil
}

// syncFlags copies the connection flags to cfg's fields, or back.
func syncFlags(flags map[string]*kong.Flag, cfg *natsconn.Config, toFlags bool) {
	for path, name := range natsNames {
		f, field := flags[strings.TrimPrefix(name, "--")], reflect.ValueOf(cfg).Elem().FieldByName(path)
		switch {
		case f == nil || !field.IsValid():
		case toFlags:
			f.Target.SetString(field.String())
		default:
			field.SetString(f.Target.String())
		}
	}
}

// configUsage is a setting natsconn refuses, as a usage error (exit 2).
func configUsage(err error) error {
	if ce := (*natsconn.ConfigError)(nil); errors.As(err, &ce) {
		return usagef("%s", ce.Reason)
	}
	return err
}
