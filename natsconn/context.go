package natsconn

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

	"github.com/nats-io/nats.go"
)

// A context is a JSON file written by 'nats context save', read here as
// natscontext (github.com/nats-io/jsm.go) reads it, rather than with that
// package: its module would bring an expression language, YAML, x/net and
// resolvers that run nsc and 1Password, for a dozen JSON fields.

// ContextConfig says where the nats CLI's contexts are. The zero value is
// the nats CLI's own place.
type ContextConfig struct {
	// Dir is the nats CLI's configuration directory, holding context.txt
	// (the selected context) and context/NAME.json. Default
	// $XDG_CONFIG_HOME/nats, else ~/.config/nats.
	Dir string
}

// Contexts reads the nats CLI's contexts from one directory.
type Contexts struct {
	dir    string
	dirErr error // why there is no directory, when Dir was not given
}

// NewContexts returns the contexts of cfg.Dir. It does no I/O; a missing
// home directory is an error only once a context is looked up by name.
func NewContexts(cfg ContextConfig) (*Contexts, error) {
	if cfg.Dir != "" {
		return &Contexts{dir: cfg.Dir}, nil
	}
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" {
		return &Contexts{dir: filepath.Join(d, "nats")}, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return &Contexts{dirErr: err}, nil
	}
	return &Contexts{dir: filepath.Join(home, ".config", "nats")}, nil
}

// Context is what this package reads of a context file.
type Context struct {
	Name     string // as given
	Path     string // the file read
	TLSFirst bool   // tls_first: the TLS handshake before the server's INFO
	fields   map[string]string
}

// Label names the context and its file, for messages.
func (c *Context) Label() string { return fmt.Sprintf("context %q (%s)", c.Name, c.Path) }

// Field is the string field name (its JSON name: "url", "creds", "nkey",
// "user", "password", "token", "cert", "key", "ca", "jetstream_domain",
// "jetstream_api_prefix", "inbox_prefix") or "". File fields are expanded
// (~, $VARIABLES, file://) as the nats CLI does.
func (c *Context) Field(name string) string { return c.fields[name] }

// Config is the connection the context describes; its URL is the nats
// CLI's default when the context has none.
func (c *Context) Config() Config {
	f := c.fields
	return Config{
		URL: cmp.Or(f["url"], nats.DefaultURL), Creds: f["creds"], NKey: f["nkey"],
		User: f["user"], Password: f["password"], Token: f["token"],
		TLSCA: f["ca"], TLSCert: f["cert"], TLSKey: f["key"],
		Domain: f["jetstream_domain"], APIPrefix: f["jetstream_api_prefix"], InboxPrefix: f["inbox_prefix"],
		TLSFirst: c.TLSFirst,
	}
}

// Load reads the context name: the file name itself if it ends in .json
// (as the nats CLI takes it), else context/NAME.json in the directory.
func (cs *Contexts) Load(name string) (*Context, error) {
	file, err := cs.path(name)
	if err != nil {
		return nil, err
	}
	return readContext(name, file, "")
}

// Selected reads the context that 'nats context select' chose
// (context.txt), or returns nil and no error when none is selected or
// there is no directory to look in.
func (cs *Contexts) Selected() (*Context, error) {
	if cs.dirErr != nil {
		return nil, nil
	}
	txt := filepath.Join(cs.dir, "context.txt")
	b, err := os.ReadFile(txt)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, &ContextError{Kind: ErrNotContext, Selected: txt, Err: err, detail: fmt.Sprintf("the nats CLI's selected context: %v", err)}
	}
	name := strings.TrimSpace(string(b))
	if name == "" {
		return nil, nil
	}
	file, err := cs.path(name)
	if err != nil {
		return nil, err
	}
	return readContext(name, file, txt)
}

func (cs *Contexts) path(name string) (string, error) {
	switch {
	case strings.HasSuffix(name, ".json"):
		return name, nil
	case strings.Contains(name, "..") || strings.ContainsAny(name, `/\*>`) || strings.ContainsFunc(name, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }):
		return "", &ContextError{Kind: ErrNotContext, Name: name, detail: fmt.Sprintf("context %q: not a context name (nor a .json file)", name)}
	case cs.dirErr != nil:
		return "", &ContextError{Kind: ErrNoContextDir, Name: name, Err: cs.dirErr,
			detail: fmt.Sprintf("context %q: no directory for the nats CLI's contexts: %v (set $XDG_CONFIG_HOME, or give the .json file)", name, cs.dirErr)}
	}
	return filepath.Join(cs.dir, "context", name+".json"), nil
}

// contextStrings are the context's string fields this package uses.
var contextStrings = []string{"url", "creds", "nkey", "user", "password", "token", "cert", "key", "ca",
	"jetstream_domain", "jetstream_api_prefix", "inbox_prefix"}

// fileFields are the context fields that name a file.
var fileFields = []string{"creds", "nkey", "cert", "key", "ca"}

// NamesFile reports whether the context field (its JSON name) names a
// file: creds, nkey, cert, key or ca.
func NamesFile(field string) bool { return slices.Contains(fileFields, field) }

// contextIgnored are the fields that change nothing of a connection:
// labels, the CLI's colours, and the prefix of JetStream advisories, which
// jetledger does not subscribe to.
var contextIgnored = []string{"name", "description", "color_scheme", "jetstream_event_prefix"}

// contextUnsupported says what to do instead of the fields this package
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
// (1Password, nsc, the environment, inline data, a file), which this
// package does not resolve in a token, user or password.
var secretSchemes = []string{"op", "nsc", "env", "data", "file"}

// fault is an error of the context c about field.
func (c *Context) fault(kind error, field string, cause error, format string, a ...any) *ContextError {
	return &ContextError{Kind: kind, Name: c.Name, Path: c.Path, Field: field, Err: cause, detail: fmt.Sprintf(format, a...)}
}

// readContext reads and checks the context file: every field that is set
// is one this package honours or one that changes nothing; the nats CLI
// writes the others empty, which is fine. selected is the context.txt that
// chose name, if one did.
func readContext(name, path, selected string) (*Context, error) {
	c := &Context{Name: name, Path: path, fields: map[string]string{}}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		e := c.fault(ErrNoSuchContext, "", err, "context %q: %s: no such file ('nats context ls' lists the contexts)", name, path)
		e.Selected = selected
		return nil, e
	case err != nil:
		return nil, c.fault(ErrNotContext, "", err, "context %q: %v", name, err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, c.fault(ErrNotContext, "", err, "%s: not a nats CLI context: %v", c.Label(), err)
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := c.setField(k, raw[k]); err != nil {
			return nil, err
		}
	}
	return c, c.check()
}

// setField takes the field k of value v, or refuses it.
func (c *Context) setField(k string, v json.RawMessage) error {
	switch {
	case slices.Contains(contextStrings, k):
		var s string
		if err := json.Unmarshal(v, &s); err != nil && !isNull(v) {
			return c.fault(ErrNotContext, k, err, "%s: field %q: want a string", c.Label(), k)
		}
		c.fields[k] = s
	case k == "tls_first":
		if err := json.Unmarshal(v, &c.TLSFirst); err != nil && !isNull(v) {
			return c.fault(ErrNotContext, k, err, "%s: field %q: want true or false", c.Label(), k)
		}
	case slices.Contains(contextIgnored, k), isEmptyJSON(v):
	default:
		hint, known := contextUnsupported[k]
		if !known {
			hint = "leave it out, or use a context without it"
		}
		return c.fault(ErrUnsupported, k, nil, "%s: jetledger does not support the field %q; %s", c.Label(), k, hint)
	}
	return nil
}

// check refuses what the fields hold that this package cannot use:
// secrets kept elsewhere, a JetStream domain together with an API prefix.
func (c *Context) check() error {
	for _, k := range []string{"user", "password", "token"} {
		if s := scheme(c.fields[k]); slices.Contains(secretSchemes, s) {
			return c.fault(ErrUnsupported, k, nil, "%s: field %q refers to a secret kept elsewhere (%s:), which jetledger does not resolve; give the value itself", c.Label(), k, s)
		}
	}
	for _, k := range fileFields {
		v := c.fields[k]
		switch s := scheme(v); s {
		case "":
		case "file":
			v = strings.TrimPrefix(v, "file://")
		default:
			return c.fault(ErrUnsupported, k, nil, "%s: field %q refers to a secret kept elsewhere (%s:), which jetledger does not resolve; give a file", c.Label(), k, s)
		}
		c.fields[k] = expandPath(v)
	}
	if c.fields["jetstream_domain"] != "" && c.fields["jetstream_api_prefix"] != "" {
		return c.fault(ErrContextConflict, "jetstream_api_prefix", nil, "%s: fields \"jetstream_domain\" and \"jetstream_api_prefix\" both say where the JetStream API is; keep one", c.Label())
	}
	return nil
}

// CheckFiles checks the context's fields (JSON names) that are about to
// be used: the files they name exist, and "cert", if among them, comes
// with "key".
func (c *Context) CheckFiles(fields ...string) error {
	for _, f := range fields {
		if v := c.fields[f]; v != "" && NamesFile(f) {
			if _, err := os.Stat(v); err != nil {
				return c.fault(ErrContextConflict, f, err, "%s: field %q: %v", c.Label(), f, err)
			}
		}
	}
	if slices.Contains(fields, "cert") && (c.fields["cert"] == "") != (c.fields["key"] == "") {
		return c.fault(ErrContextConflict, "cert", nil, "%s: fields \"cert\" and \"key\" go together", c.Label())
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
