package natsconn_test

import (
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/jetledger/jetledger/natsconn"
	"github.com/nats-io/nats.go"
)

// savedContext is a context as 'nats context save' writes it: every field,
// the unused ones empty (those this package does not support included).
var savedContext = map[string]any{
	"description": "", "url": "", "socks_proxy": "", "token": "", "user": "", "password": "", "creds": "", "nkey": "",
	"cert": "", "key": "", "ca": "", "nsc": "", "jetstream_domain": "", "jetstream_api_prefix": "",
	"jetstream_event_prefix": "", "inbox_prefix": "", "user_jwt": "", "user_seed": "", "color_scheme": "",
	"tls_first": false, "windows_cert_store": "", "windows_cert_match_by": "", "windows_cert_match": "",
	"windows_ca_certs_match": nil,
}

// contextDir is a nats CLI configuration directory of the test's own.
func contextDir(tb testing.TB) string {
	tb.Helper()
	dir := tb.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "context"), 0o700); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// writeContext writes the context name in dir with fields set over
// savedContext and returns its file.
func writeContext(tb testing.TB, dir, name string, fields map[string]any) string {
	tb.Helper()
	ctx := maps.Clone(savedContext)
	maps.Copy(ctx, fields)
	b, err := json.MarshalIndent(ctx, "", "  ")
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(dir, "context", name+".json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

func newContexts(tb testing.TB, dir string) *natsconn.Contexts {
	tb.Helper()
	cs, err := natsconn.NewContexts(natsconn.ContextConfig{Dir: dir})
	if err != nil {
		tb.Fatal(err)
	}
	return cs
}

// What this package cannot use of a context is refused, by kind and field.
func TestLoadRefusals(t *testing.T) {
	t.Parallel()
	dir := contextDir(t)
	for name, fields := range map[string]map[string]any{
		"jwt":      {"user_jwt": "eyJ0eXAi", "user_seed": "SUAM"},
		"nsc":      {"nsc": "nsc://operator/account/user"},
		"socks":    {"socks_proxy": "127.0.0.1:1080"},
		"future":   {"frobnicate": 1},
		"op":       {"creds": "op://vault/nats/creds"},
		"envpw":    {"user": "app", "password": "env://NATS_SECRET"},
		"both":     {"jetstream_domain": "hub", "jetstream_api_prefix": "$JS.hub.API"},
		"badtype":  {"url": 4222},
		"badfirst": {"tls_first": "yes"},
	} {
		writeContext(t, dir, name, fields)
	}
	if err := os.WriteFile(filepath.Join(dir, "context", "notjson.json"), []byte("url: nats://x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, context, wantField string
		wantErr                  error
	}{
		{name: "missing", context: "nope", wantErr: natsconn.ErrNoSuchContext},
		{name: "missing .json", context: filepath.Join(dir, "x.json"), wantErr: natsconn.ErrNoSuchContext},
		{name: "not a name", context: "../dev", wantErr: natsconn.ErrNotContext},
		{name: "not JSON", context: "notjson", wantErr: natsconn.ErrNotContext},
		{name: "not a string", context: "badtype", wantErr: natsconn.ErrNotContext, wantField: "url"},
		{name: "not a bool", context: "badfirst", wantErr: natsconn.ErrNotContext, wantField: "tls_first"},
		{name: "user_jwt", context: "jwt", wantErr: natsconn.ErrUnsupported, wantField: "user_jwt"},
		{name: "nsc", context: "nsc", wantErr: natsconn.ErrUnsupported, wantField: "nsc"},
		{name: "socks_proxy", context: "socks", wantErr: natsconn.ErrUnsupported, wantField: "socks_proxy"},
		{name: "a newer field", context: "future", wantErr: natsconn.ErrUnsupported, wantField: "frobnicate"},
		{name: "op:// creds", context: "op", wantErr: natsconn.ErrUnsupported, wantField: "creds"},
		{name: "env:// password", context: "envpw", wantErr: natsconn.ErrUnsupported, wantField: "password"},
		{name: "domain and prefix", context: "both", wantErr: natsconn.ErrContextConflict, wantField: "jetstream_api_prefix"},
	}
	cs := newContexts(t, dir)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := cs.Load(tt.context)
			var ce *natsconn.ContextError
			if !errors.Is(err, tt.wantErr) || !errors.As(err, &ce) {
				t.Fatalf("Load(%q) = %v, want a *ContextError of %v", tt.context, err, tt.wantErr)
			}
			if ce.Field != tt.wantField || ce.Name != tt.context {
				t.Fatalf("Load(%q): field %q, name %q; want %q, %q", tt.context, ce.Field, ce.Name, tt.wantField, tt.context)
			}
		})
	}
}

// A context's fields become the Config; file paths are expanded as the
// nats CLI does; a context without a url names the nats CLI's default.
func TestContextConfig(t *testing.T) {
	dir := contextDir(t)
	pki := t.TempDir()
	t.Setenv("HOME", pki)
	t.Setenv("NATSCONN_TEST_PKI", pki)
	writeContext(t, dir, "dev", map[string]any{"url": "nats://dev:4222", "user": "u", "password": "p",
		"ca": "file://" + filepath.Join(pki, "ca.pem"), "cert": "$NATSCONN_TEST_PKI/c.pem", "key": "~/k.pem",
		"inbox_prefix": "_INBOX_dev", "jetstream_api_prefix": "$JS.hub.API", "tls_first": true})
	writeContext(t, dir, "bare", nil)
	cs := newContexts(t, dir)
	c, err := cs.Load("dev")
	if err != nil {
		t.Fatal(err)
	}
	want := natsconn.Config{URL: "nats://dev:4222", User: "u", Password: "p", TLSCA: filepath.Join(pki, "ca.pem"),
		TLSCert: filepath.Join(pki, "c.pem"), TLSKey: filepath.Join(pki, "k.pem"), InboxPrefix: "_INBOX_dev",
		APIPrefix: "$JS.hub.API", TLSFirst: true}
	if got := c.Config(); got != want {
		t.Fatalf("Config()\n got %+v\nwant %+v", got, want)
	}
	// The files do not exist yet: CheckFiles names the first one asked about.
	var ce *natsconn.ContextError
	if err := c.CheckFiles("cert", "key"); !errors.As(err, &ce) || ce.Field != "cert" || !errors.Is(err, natsconn.ErrContextConflict) {
		t.Fatalf("CheckFiles = %v, want the field cert", err)
	}
	if err := c.CheckFiles("url", "user"); err != nil {
		t.Fatalf("CheckFiles of no files = %v", err)
	}
	bare, err := cs.Load("bare")
	if err != nil {
		t.Fatal(err)
	}
	if got := bare.Config(); got != (natsconn.Config{URL: nats.DefaultURL}) {
		t.Fatalf("a bare context's Config() = %+v", got)
	}
}

// A certificate without its key is refused when the pair is about to be used.
func TestCheckFilesCertWithoutKey(t *testing.T) {
	t.Parallel()
	dir := contextDir(t)
	writeContext(t, dir, "halfcert", map[string]any{"cert": existing(t)})
	c, err := newContexts(t, dir).Load("halfcert")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckFiles("cert", "key"); !errors.Is(err, natsconn.ErrContextConflict) {
		t.Fatalf("CheckFiles = %v, want ErrContextConflict", err)
	}
}

// Selected reads the context that context.txt names; none selected is no
// context and no error; a selected one that is missing says where it was
// selected.
func TestSelected(t *testing.T) {
	t.Parallel()
	dir := contextDir(t)
	cs := newContexts(t, dir)
	if c, err := cs.Selected(); c != nil || err != nil {
		t.Fatalf("nothing selected: %v, %v", c, err)
	}
	writeContext(t, dir, "dev", map[string]any{"url": "nats://dev:4222"})
	txt := filepath.Join(dir, "context.txt")
	for _, tt := range []struct {
		selected string
		wantURL  string
		wantErr  error
	}{{"dev\n", "nats://dev:4222", nil}, {"  ", "", nil}, {"gone", "", natsconn.ErrNoSuchContext}} {
		if err := os.WriteFile(txt, []byte(tt.selected), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := cs.Selected()
		var ce *natsconn.ContextError
		switch {
		case tt.wantErr != nil && (!errors.Is(err, tt.wantErr) || !errors.As(err, &ce) || ce.Selected != txt):
			t.Fatalf("selected %q: %v, want %v from %s", tt.selected, err, tt.wantErr, txt)
		case tt.wantErr == nil && err != nil:
			t.Fatalf("selected %q: %v", tt.selected, err)
		case tt.wantURL != "" && (c == nil || c.Config().URL != tt.wantURL):
			t.Fatalf("selected %q: %+v", tt.selected, c)
		case tt.wantURL == "" && c != nil:
			t.Fatalf("selected %q: %+v, want none", tt.selected, c)
		}
	}
}
