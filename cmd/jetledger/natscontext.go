package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"

	"github.com/alecthomas/kong"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A nats CLI user's setup works unchanged: its contexts and its NATS_*
// variables. A context is a JSON file written by 'nats context save', read
// here as natscontext (github.com/nats-io/jsm.go) reads it, rather than with
// that package: its module would bring an expression language, YAML, x/net
// and resolvers that run nsc and 1Password, for a dozen JSON fields.
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

// connSetting is one connection setting as each layer names it: the flag,
// the nats CLI's variable ("" if it has none) and the context file's field.
type connSetting struct{ flag, env, field string }

// connGroups are the settings a layer gives together; a group that
// jetledger's own settings touch is left to them whole.
var connGroups = [][]connSetting{
	{{"nats", "NATS_URL", "url"}},
	{{"nats-creds", "NATS_CREDS", "creds"}, {"nats-nkey", "NATS_NKEY", "nkey"}, {"nats-user", "NATS_USER", "user"},
		{"nats-password", "NATS_PASSWORD", "password"}, {"nats-token", "", "token"}},
	{{"tls-cert", "NATS_CERT", "cert"}, {"tls-key", "NATS_KEY", "key"}},
	{{"tls-ca", "NATS_CA", "ca"}},
}

// fileFields are the context fields that name a file.
var fileFields = []string{"creds", "nkey", "cert", "key", "ca"}

// AfterApply fills in the connection flags that jetledger's own settings
// left unset, from the NATS_* variables and the context. Errors are the
// caller's (exit 2) and come before any I/O. kong calls it for the --context
// of every command (the flag has a default), so it acts only for the
// selected command's.
func (c *natsContext) AfterApply(kctx *kong.Context) error {
	flags := map[string]*kong.Flag{}
	for _, f := range kctx.Flags() {
		flags[f.Name] = f
	}
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
		c.context = ctxFile.label()
		c.domain, c.apiPrefix, c.inboxPrefix = ctxFile.fields["jetstream_domain"], ctxFile.fields["jetstream_api_prefix"], ctxFile.fields["inbox_prefix"]
		c.tlsFirst = ctxFile.tlsFirst
	}
	return nil
}

// given says whether jetledger's own settings set f: the command line, the
// config file (both on kctx's path) or its JETLEDGER_* variable.
func given(kctx *kong.Context, f *kong.Flag) bool {
	for _, p := range kctx.Path {
		if p.Flag == f {
			return true
		}
	}
	for _, env := range f.Envs {
		if _, ok := os.LookupEnv(env); ok {
			return true
		}
	}
	return false
}

// fill sets group's flags from the NATS_* variables or else from the
// context, unless jetledger's own settings set one of them.
func (c *natsContext) fill(kctx *kong.Context, flags map[string]*kong.Flag, group []connSetting, ctxFile *contextFile) error {
	values := map[string]string{}
	for _, s := range group {
		f := flags[s.flag]
		if f == nil || given(kctx, f) {
			return nil
		}
		if s.env != "" && os.Getenv(s.env) != "" {
			values[s.flag] = os.Getenv(s.env)
		}
	}
	switch {
	case len(values) > 0:
		if err := checkEnvGroup(group, values); err != nil {
			return err
		}
		if group[0].flag == "nats" {
			c.from = "$NATS_URL"
		}
	case ctxFile != nil:
		for _, s := range group {
			values[s.flag] = ctxFile.fields[s.field]
		}
		if group[0].flag == "nats" {
			// A context names a server even when it has no URL: the nats CLI's default.
			values["nats"] = cmp.Or(values["nats"], nats.DefaultURL)
			c.from = ctxFile.label()
		}
		if err := ctxFile.checkGroup(group); err != nil {
			return err
		}
	default:
		return nil
	}
	for _, s := range group {
		flags[s.flag].Target.SetString(values[s.flag])
	}
	return nil
}

// checkEnvGroup checks the NATS_* variables of a group as the nats CLI
// reads them: files that exist, a certificate with its key, and a user
// without a password being a token.
func checkEnvGroup(group []connSetting, values map[string]string) error {
	for _, s := range group {
		if v := values[s.flag]; v != "" && slices.Contains(fileFields, s.field) {
			if _, err := os.Stat(v); err != nil {
				return usagef("$%s: %v", s.env, err)
			}
		}
	}
	if (values["tls-cert"] == "") != (values["tls-key"] == "") && group[0].flag == "tls-cert" {
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
func (c *natsContext) load(kctx *kong.Context, self *kong.Flag, embedded bool) (*contextFile, error) {
	dir, dirErr := natsConfigDir()
	name, named := c.name, given(kctx, self)
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
	selected := ""
	switch {
	case named:
	case os.Getenv("NATS_CONTEXT") != "":
		name = os.Getenv("NATS_CONTEXT")
	case embedded || dirErr != nil:
		return nil, nil
	default:
		txt := filepath.Join(dir, "context.txt")
		b, err := os.ReadFile(txt)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, usagef("the nats CLI's selected context: %v", err)
		}
		if name = strings.TrimSpace(string(b)); name == "" {
			return nil, nil
		}
		selected = txt
	}
	file, err := contextPath(dir, dirErr, name)
	if err != nil {
		return nil, err
	}
	return readContext(name, file, selected)
}

// natsConfigDir is the nats CLI's directory: $XDG_CONFIG_HOME/nats, else
// ~/.config/nats.
func natsConfigDir() (string, error) {
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "nats"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".config", "nats"), nil
}

// contextPath is the file of the context name: name itself if it ends in
// .json (as the nats CLI takes it), else NAME.json in the contexts'
// directory.
func contextPath(dir string, dirErr error, name string) (string, error) {
	switch {
	case strings.HasSuffix(name, ".json"):
		return name, nil
	case strings.Contains(name, "..") || strings.ContainsAny(name, `/\*>`) || strings.ContainsFunc(name, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }):
		return "", usagef("context %q: not a context name (nor a .json file)", name)
	case dirErr != nil:
		return "", usagef("context %q: no directory for the nats CLI's contexts: %v (set $XDG_CONFIG_HOME, or give the .json file)", name, dirErr)
	}
	return filepath.Join(dir, "context", name+".json"), nil
}

// contextFile is what jetledger reads of a context file.
type contextFile struct {
	name, path string
	fields     map[string]string // the string fields jetledger uses, by JSON name
	tlsFirst   bool
}

func (cf *contextFile) label() string { return fmt.Sprintf("context %q (%s)", cf.name, cf.path) }

// contextStrings are the context's string fields jetledger uses.
var contextStrings = []string{"url", "creds", "nkey", "user", "password", "token", "cert", "key", "ca",
	"jetstream_domain", "jetstream_api_prefix", "inbox_prefix"}

// contextIgnored are the fields that change nothing of a connection:
// labels, the CLI's colours, and the prefix of JetStream advisories, which
// jetledger does not subscribe to.
var contextIgnored = []string{"name", "description", "color_scheme", "jetstream_event_prefix"}

// contextUnsupported says what to do instead of the fields jetledger
// cannot honour. Any other unknown field that is set is refused too: a
// newer nats CLI's setting may matter to the connection.
var contextUnsupported = map[string]string{
	"nsc":                    "write a creds file with 'nsc generate creds' and set \"creds\" to it",
	"user_jwt":               "put the JWT and its seed in a creds file and set \"creds\" to it",
	"user_seed":              "put the JWT and its seed in a creds file and set \"creds\" to it",
	"socks_proxy":            "jetledger connects directly",
	"windows_cert_store":     "give \"cert\", \"key\" and \"ca\" files",
	"windows_cert_match_by":  "give \"cert\", \"key\" and \"ca\" files",
	"windows_cert_match":     "give \"cert\", \"key\" and \"ca\" files",
	"windows_ca_certs_match": "give \"cert\", \"key\" and \"ca\" files",
}

// secretSchemes are the nats CLI's references to secrets kept elsewhere
// (1Password, nsc, the environment, inline data, a file), which jetledger
// does not resolve in a token, user or password.
var secretSchemes = []string{"op", "nsc", "env", "data", "file"}

// readContext reads and checks the context file: every field that is set
// is one jetledger honours or one that changes nothing; the nats CLI
// writes the others empty, which is fine. selected is the context.txt that
// chose name, if one did: a missing file is then said to be its choice.
func readContext(name, path, selected string) (*contextFile, error) {
	cf := &contextFile{name: name, path: path, fields: map[string]string{}}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && selected != "":
		return nil, usagef("context %q, selected in %s: %s: no such file ('nats context select' picks another; or give --context)", name, selected, path)
	case errors.Is(err, fs.ErrNotExist):
		return nil, usagef("context %q: %s: no such file ('nats context ls' lists the contexts)", name, path)
	}
	if err != nil {
		return nil, usagef("context %q: %v", name, err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, usagef("%s: not a nats CLI context: %v", cf.label(), err)
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := raw[k]
		switch {
		case slices.Contains(contextStrings, k):
			var s string
			if err := json.Unmarshal(v, &s); err != nil && !isNull(v) {
				return nil, usagef("%s: field %q: want a string", cf.label(), k)
			}
			cf.fields[k] = s
		case k == "tls_first":
			if err := json.Unmarshal(v, &cf.tlsFirst); err != nil && !isNull(v) {
				return nil, usagef("%s: field %q: want true or false", cf.label(), k)
			}
		case slices.Contains(contextIgnored, k), isEmptyJSON(v):
		default:
			hint, known := contextUnsupported[k]
			if !known {
				hint = "leave it out, or use a context without it"
			}
			return nil, usagef("%s: jetledger does not support the field %q; %s", cf.label(), k, hint)
		}
	}
	return cf, cf.check()
}

// check refuses what the fields hold that jetledger cannot use: secrets
// kept elsewhere, a JetStream domain together with an API prefix.
func (cf *contextFile) check() error {
	for _, k := range []string{"user", "password", "token"} {
		if s := scheme(cf.fields[k]); slices.Contains(secretSchemes, s) {
			return usagef("%s: field %q refers to a secret kept elsewhere (%s:), which jetledger does not resolve; give the value itself", cf.label(), k, s)
		}
	}
	for _, k := range fileFields {
		v := cf.fields[k]
		switch s := scheme(v); s {
		case "":
		case "file":
			v = strings.TrimPrefix(v, "file://")
		default:
			return usagef("%s: field %q refers to a secret kept elsewhere (%s:), which jetledger does not resolve; give a file", cf.label(), k, s)
		}
		cf.fields[k] = expandPath(v)
	}
	if cf.fields["jetstream_domain"] != "" && cf.fields["jetstream_api_prefix"] != "" {
		return usagef("%s: fields \"jetstream_domain\" and \"jetstream_api_prefix\" both say where the JetStream API is; keep one", cf.label())
	}
	return nil
}

// checkGroup checks the context's fields of a group that is about to be
// used: the files exist, a certificate comes with its key.
func (cf *contextFile) checkGroup(group []connSetting) error {
	for _, s := range group {
		if v := cf.fields[s.field]; v != "" && slices.Contains(fileFields, s.field) {
			if _, err := os.Stat(v); err != nil {
				return usagef("%s: field %q: %v", cf.label(), s.field, err)
			}
		}
	}
	if group[0].field == "cert" && (cf.fields["cert"] == "") != (cf.fields["key"] == "") {
		return usagef("%s: fields \"cert\" and \"key\" go together", cf.label())
	}
	return nil
}

// scheme is the URI scheme v starts with, lower case, or "" (a Windows
// drive letter is no scheme).
func scheme(v string) string {
	u, err := url.Parse(v)
	if err != nil || len(u.Scheme) < 2 {
		return ""
	}
	return u.Scheme
}

// expandPath expands a leading ~ and environment variables in a context's
// file path, as the nats CLI does.
func expandPath(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			p = home + p[1:]
		}
	}
	return os.ExpandEnv(p)
}

func isNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }

// isEmptyJSON says whether v is a zero value, as the nats CLI writes every
// field it does not use.
func isEmptyJSON(v json.RawMessage) bool {
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return false
	}
	switch b.String() {
	case "null", `""`, "false", "0", "[]", "{}":
		return true
	}
	return false
}

// options are the nats.go options of what the context set that has no flag.
func (c natsContext) options() []nats.Option {
	var opts []nats.Option
	if c.inboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(c.inboxPrefix))
	}
	if c.tlsFirst {
		opts = append(opts, nats.TLSHandshakeFirst())
	}
	return opts
}

// jetStream is the JetStream API of nc in the context's domain or at its
// API prefix, if it names one.
func (c natsContext) jetStream(nc *nats.Conn) (jetstream.JetStream, error) {
	switch {
	case c.domain != "":
		return jetstream.NewWithDomain(nc, c.domain)
	case c.apiPrefix != "":
		return jetstream.NewWithAPIPrefix(nc, c.apiPrefix)
	}
	return jetstream.New(nc)
}
