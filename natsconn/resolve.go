package natsconn

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/jetledger/jetledger/internal/say"
)

// A nats CLI user's setup works unchanged in a program that resolves its
// Config here: the NATS_* variables and the contexts of the nats CLI, under
// the program's own settings.

// Sources are what Resolve consults under the caller's own settings. The
// zero value reads the environment and the nats CLI's own contexts.
type Sources struct {
	// Given says whether the caller's own settings set the Config field
	// at path ("URL", "Creds", ...), even to "": a default the caller
	// filled in is not given. Default: the field is not zero.
	Given func(path string) bool
	// Context names the context to read: a name, or a .json file. Default
	// $NATS_CONTEXT, else the one 'nats context select' chose.
	Context string
	// OnlyNamed reads a context only when Context or $NATS_CONTEXT names
	// one, not the one selected long ago for the nats CLI: for a program
	// that must not silently act on another server. Default false.
	OnlyNamed bool
	// Contexts is where contexts are read. Default
	// NewContexts(ContextConfig{}).
	Contexts *Contexts
	// Getenv reads the nats CLI's variables. Default os.Getenv.
	Getenv func(string) string
	// Names maps a setting's path (a Config field, or "Context" for
	// Sources.Context) to the caller's name for it, in the Reason of
	// Resolve's refusals (say.Name). Default: the paths themselves.
	Names map[string]string
}

// Origin says where Resolve took what the caller's own settings did not
// give, for messages.
type Origin struct {
	URL     string // "$NATS_URL", or the context's Label, when the URL came from there; else ""
	Context string // the Label of the context read, if one was
}

// setting is a string setting of Config as each layer names it.
type setting struct {
	path  string // the Config field, as Sources.Given and Names say it
	env   string // the nats CLI's variable, or "" if it has none
	field string // the context's JSON field
	at    func(*Config) *string
}

// groups are the settings a layer gives together: credentials and the
// client certificate are taken whole from one layer, so that two ways of
// logging in are never mixed.
var groups = [][]setting{
	{{"URL", "NATS_URL", "url", func(c *Config) *string { return &c.URL }}},
	{
		{"Creds", "NATS_CREDS", "creds", func(c *Config) *string { return &c.Creds }},
		{"NKey", "NATS_NKEY", "nkey", func(c *Config) *string { return &c.NKey }},
		{"User", "NATS_USER", "user", func(c *Config) *string { return &c.User }},
		{"Password", "NATS_PASSWORD", "password", func(c *Config) *string { return &c.Password }},
		{"Token", "", "token", func(c *Config) *string { return &c.Token }},
	},
	{{"TLSCert", "NATS_CERT", "cert", func(c *Config) *string { return &c.TLSCert }}, {"TLSKey", "NATS_KEY", "key", func(c *Config) *string { return &c.TLSKey }}},
	{{"TLSCA", "NATS_CA", "ca", func(c *Config) *string { return &c.TLSCA }}},
	{{"Domain", "", "jetstream_domain", func(c *Config) *string { return &c.Domain }}, {"APIPrefix", "", "jetstream_api_prefix", func(c *Config) *string { return &c.APIPrefix }}},
	{{"InboxPrefix", "", "inbox_prefix", func(c *Config) *string { return &c.InboxPrefix }}},
}

// Resolve is cfg completed as the nats CLI's user has set up, per group of
// settings: the caller's own (the fields src.Given says were set) win,
// then the nats CLI's variables (NATS_URL, NATS_CREDS, NATS_NKEY,
// NATS_USER, NATS_PASSWORD, NATS_CERT, NATS_KEY, NATS_CA), then the
// context's fields, then cfg's value as the caller's default. A context
// names a server even without a url: nats.DefaultURL. The groups are the
// URL; the credentials (Creds, NKey, User, Password, Token); the client
// certificate (TLSCert, TLSKey); TLSCA; Domain and APIPrefix; InboxPrefix;
// TLSFirst. The variables are read as the nats CLI reads them: NATS_USER
// without NATS_PASSWORD is a token.
//
// A context that cannot be used, a file that a variable or the context
// names and that is not there, a certificate without its key: each is a
// *ConfigError, found before any I/O but reading the context and stat.
// The settings the caller gave are not checked here (Check, Connect).
func Resolve(cfg Config, src Sources) (Config, Origin, error) {
	src = src.withDefaults(cfg)
	c, err := src.context()
	if err != nil {
		return cfg, Origin{}, err
	}
	var origin Origin
	for _, g := range groups {
		if slices.ContainsFunc(g, func(s setting) bool { return src.Given(s.path) }) {
			continue
		}
		layer, from, err := src.layer(g, c)
		if err != nil {
			return cfg, Origin{}, err
		}
		if from == "" {
			continue
		}
		for _, s := range g {
			*s.at(&cfg) = *s.at(&layer)
		}
		if g[0].path == "URL" {
			origin.URL = from
		}
	}
	if c != nil {
		origin.Context = c.Label()
		if !src.Given("TLSFirst") {
			cfg.TLSFirst = c.TLSFirst
		}
	}
	return cfg, origin, nil
}

// withDefaults is src with each zero field its default; own is the
// caller's Config.
func (src Sources) withDefaults(own Config) Sources {
	if src.Getenv == nil {
		src.Getenv = os.Getenv
	}
	if src.Given == nil {
		src.Given = own.set
	}
	return src
}

// set says whether cfg's field at path is not zero.
func (cfg Config) set(path string) bool {
	if path == "TLSFirst" {
		return cfg.TLSFirst
	}
	for _, g := range groups {
		for _, s := range g {
			if s.path == path {
				return *s.at(&cfg) != ""
			}
		}
	}
	return false
}

// context reads the context that applies, if any.
func (src Sources) context() (*Context, error) {
	cs := src.Contexts
	if cs == nil {
		var err error
		if cs, err = NewContexts(ContextConfig{}); err != nil {
			return nil, src.refuse(err)
		}
	}
	var c *Context
	var err error
	switch name := src.Context; {
	case name != "":
		c, err = cs.Load(name)
	case src.Getenv("NATS_CONTEXT") != "":
		c, err = cs.Load(src.Getenv("NATS_CONTEXT"))
	case src.OnlyNamed:
		return nil, nil
	default:
		c, err = cs.Selected()
	}
	if err != nil {
		return nil, src.refuse(err)
	}
	return c, nil
}

// layer is the group g as the nats CLI's variables give it, else as the
// context c does, and where it came from: "$" and the variable, or the
// context's Label; "" for neither.
func (src Sources) layer(g []setting, c *Context) (Config, string, error) {
	var env Config
	for _, s := range g {
		if s.env != "" {
			*s.at(&env) = src.Getenv(s.env)
		}
	}
	if slices.ContainsFunc(g, func(s setting) bool { return *s.at(&env) != "" }) {
		return env, "$" + g[0].env, checkEnv(g, &env)
	}
	if c == nil {
		return Config{}, "", nil
	}
	fields := make([]string, len(g))
	for i, s := range g {
		fields[i] = s.field
	}
	if err := c.CheckFiles(fields...); err != nil {
		return Config{}, "", src.refuse(err)
	}
	return c.Config(), c.Label(), nil
}

// checkEnv checks the group g as the nats CLI's variables give it in env:
// the files exist, a certificate comes with its key; and it takes a user
// without a password as a token, as the nats CLI does.
func checkEnv(g []setting, env *Config) error {
	for _, s := range g {
		if v := *s.at(env); v != "" && NamesFile(s.field) {
			if _, err := os.Stat(v); err != nil {
				return &ConfigError{Reason: fmt.Sprintf("$%s: %v", s.env, err), Err: &FileError{Setting: s.path, Err: err}}
			}
		}
	}
	if g[0].path == "TLSCert" && (env.TLSCert == "") != (env.TLSKey == "") {
		return &ConfigError{Reason: "$NATS_CERT and $NATS_KEY go together", Err: ErrCertWithoutKey}
	}
	if env.User != "" && env.Password == "" {
		env.Token, env.User = env.User, ""
	}
	return nil
}

// refuse is a context that cannot be used as a *ConfigError; a selected
// context that is missing says how to pick another.
func (src Sources) refuse(err error) error {
	var ce *ContextError
	switch {
	case !errors.As(err, &ce):
		return err
	case errors.Is(err, ErrNoSuchContext) && ce.Selected != "":
		return &ConfigError{Err: err, Reason: fmt.Sprintf("context %q, selected in %s: %s: no such file ('nats context select' picks another; or give %s)",
			ce.Name, ce.Selected, ce.Path, say.Name(src.Names, "Context"))}
	}
	return &ConfigError{Reason: ce.Detail(), Err: err}
}
