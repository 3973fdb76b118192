package natsconn_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jetledger/jetledger/natsconn"
	"github.com/nats-io/nats.go"
)

// Per group of settings, the caller's own win, then the nats CLI's
// variables, then the context, then the caller's default; credentials and
// the client certificate come whole from one layer.
func TestResolve(t *testing.T) {
	t.Parallel()
	dir := contextDir(t)
	ca, creds, cert, key := existing(t), existing(t), existing(t), existing(t)
	devFile := writeContext(t, dir, "dev", map[string]any{"url": "nats://ctx:4222", "user": "cu", "password": "cp", "ca": ca,
		"cert": cert, "key": key, "jetstream_domain": "hub", "inbox_prefix": "_INBOX_dev", "tls_first": true})
	bareFile := writeContext(t, dir, "bare", nil)
	cs := newContexts(t, dir)
	selDir := dir + "-selected"
	if err := os.CopyFS(selDir, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	selected := newContexts(t, selDir)
	selDev := natsconn.Origin{URL: `context "dev" (` + filepath.Join(selDir, "context", "dev.json") + `)`}
	selDev.Context = selDev.URL
	dev := natsconn.Origin{Context: `context "dev" (` + devFile + `)`}
	fromDev := dev
	fromDev.URL = dev.Context
	ctxCfg := natsconn.Config{URL: "nats://ctx:4222", User: "cu", Password: "cp", TLSCA: ca, TLSCert: cert, TLSKey: key,
		Domain: "hub", InboxPrefix: "_INBOX_dev", TLSFirst: true}
	with := func(f func(*natsconn.Config)) natsconn.Config { c := ctxCfg; f(&c); return c }
	defaulted := func(string) bool { return false } // the caller's values are its defaults
	tests := []struct {
		name       string
		cfg        natsconn.Config
		given      func(string) bool
		context    string
		onlyNamed  bool
		selected   bool // dev is selected
		env        map[string]string
		want       natsconn.Config
		wantOrigin natsconn.Origin
	}{
		{name: "nothing", cfg: natsconn.Config{URL: "nats://default:4222"}, given: defaulted, want: natsconn.Config{URL: "nats://default:4222"}},
		{name: "the context", cfg: natsconn.Config{URL: "nats://default:4222"}, given: defaulted, context: "dev", want: ctxCfg, wantOrigin: fromDev},
		{name: "$NATS_CONTEXT", env: map[string]string{"NATS_CONTEXT": "dev"}, want: ctxCfg, wantOrigin: fromDev},
		{name: "a context without url", context: "bare", want: natsconn.Config{URL: nats.DefaultURL},
			wantOrigin: natsconn.Origin{URL: `context "bare" (` + bareFile + `)`, Context: `context "bare" (` + bareFile + `)`}},
		{name: "$NATS_URL over the context", context: "dev", env: map[string]string{"NATS_URL": "nats://env:4222"},
			want: with(func(c *natsconn.Config) { c.URL = "nats://env:4222" }), wantOrigin: natsconn.Origin{URL: "$NATS_URL", Context: dev.Context}},
		{name: "the caller's URL over $NATS_URL", cfg: natsconn.Config{URL: "nats://own:4222"}, context: "dev", env: map[string]string{"NATS_URL": "nats://env:4222"},
			want: with(func(c *natsconn.Config) { c.URL = "nats://own:4222" }), wantOrigin: dev},
		{name: "a given empty URL", given: func(p string) bool { return p == "URL" }, context: "dev",
			want: with(func(c *natsconn.Config) { c.URL = "" }), wantOrigin: dev},
		{name: "the caller's password replaces the context's credentials", cfg: natsconn.Config{Password: "x"}, context: "dev",
			want: with(func(c *natsconn.Config) { c.User, c.Password = "", "x" }), wantOrigin: fromDev},
		{name: "$NATS_CREDS replaces the context's credentials", context: "dev", env: map[string]string{"NATS_CREDS": creds},
			want: with(func(c *natsconn.Config) { c.User, c.Password, c.Creds = "", "", creds }), wantOrigin: fromDev},
		{name: "$NATS_USER without a password is a token", context: "dev", env: map[string]string{"NATS_USER": "s3cret"},
			want: with(func(c *natsconn.Config) { c.User, c.Password, c.Token = "", "", "s3cret" }), wantOrigin: fromDev},
		{name: "$NATS_USER and $NATS_PASSWORD", env: map[string]string{"NATS_USER": "u", "NATS_PASSWORD": "p"}, want: natsconn.Config{User: "u", Password: "p"}},
		{name: "the caller's key replaces the context's certificate", cfg: natsconn.Config{TLSKey: ca}, context: "dev",
			want: with(func(c *natsconn.Config) { c.TLSCert, c.TLSKey = "", ca }), wantOrigin: fromDev},
		{name: "$NATS_CA over the context's ca", context: "dev", env: map[string]string{"NATS_CA": creds},
			want: with(func(c *natsconn.Config) { c.TLSCA = creds }), wantOrigin: fromDev},
		{name: "the caller's API prefix and handshake", cfg: natsconn.Config{APIPrefix: "$JS.x.API"}, given: func(p string) bool { return p == "APIPrefix" || p == "TLSFirst" },
			context: "dev", want: with(func(c *natsconn.Config) { c.Domain, c.APIPrefix, c.TLSFirst = "", "$JS.x.API", false }), wantOrigin: fromDev},
		{name: "the selected context", selected: true, want: ctxCfg, wantOrigin: selDev},
		{name: "$NATS_CONTEXT over the selected", selected: true, env: map[string]string{"NATS_CONTEXT": "bare"}, want: natsconn.Config{URL: nats.DefaultURL},
			wantOrigin: natsconn.Origin{URL: `context "bare" (` + filepath.Join(selDir, "context", "bare.json") + `)`, Context: `context "bare" (` + filepath.Join(selDir, "context", "bare.json") + `)`}},
		{name: "OnlyNamed ignores the selected context", selected: true, onlyNamed: true},
		{name: "OnlyNamed takes $NATS_CONTEXT", selected: true, onlyNamed: true, env: map[string]string{"NATS_CONTEXT": "dev"}, want: ctxCfg, wantOrigin: selDev},
	}
	if err := os.WriteFile(filepath.Join(selDir, "context.txt"), []byte("dev"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := natsconn.Sources{Given: tt.given, Context: tt.context, OnlyNamed: tt.onlyNamed, Contexts: cs,
				Getenv: func(k string) string { return tt.env[k] }}
			if tt.selected {
				src.Contexts = selected
			}
			got, origin, err := natsconn.Resolve(tt.cfg, src)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want || origin != tt.wantOrigin {
				t.Errorf("Resolve()\n got %+v, %+v\nwant %+v, %+v", got, origin, tt.want, tt.wantOrigin)
			}
		})
	}
}

// What Resolve cannot use is a *ConfigError that says it in the caller's
// words, before any I/O but reading the context and stat.
func TestResolveRefusals(t *testing.T) {
	t.Parallel()
	dir := contextDir(t)
	missing := filepath.Join(t.TempDir(), "missing.creds")
	writeContext(t, dir, "nocreds", map[string]any{"creds": missing})
	writeContext(t, dir, "halfcert", map[string]any{"cert": existing(t)})
	writeContext(t, dir, "jwt", map[string]any{"user_jwt": "eyJ0eXAi"})
	if err := os.WriteFile(filepath.Join(dir, "context.txt"), []byte("gone"), 0o600); err != nil {
		t.Fatal(err)
	}
	cs := newContexts(t, dir)
	tests := []struct {
		name       string
		context    string
		env        map[string]string
		wantErr    error
		wantReason string // in the Reason
	}{
		{name: "the context is read first", context: "jwt", env: map[string]string{"NATS_CREDS": missing}, wantErr: natsconn.ErrUnsupported, wantReason: `"user_jwt"`},
		{name: "missing $NATS_CREDS", env: map[string]string{"NATS_CONTEXT": "halfcert", "NATS_CREDS": missing, "NATS_CERT": missing, "NATS_KEY": missing},
			wantErr: fs.ErrNotExist, wantReason: "$NATS_CREDS: "},
		{name: "$NATS_CERT without $NATS_KEY", env: map[string]string{"NATS_CONTEXT": "halfcert", "NATS_CERT": existing(t)}, wantErr: natsconn.ErrCertWithoutKey,
			wantReason: "$NATS_CERT and $NATS_KEY go together"},
		{name: "the context's missing creds", context: "nocreds", wantErr: natsconn.ErrContextConflict, wantReason: `"creds"`},
		{name: "the context's cert without key", context: "halfcert", wantErr: natsconn.ErrContextConflict, wantReason: `"cert" and "key"`},
		{name: "missing selected", wantErr: natsconn.ErrNoSuchContext, wantReason: "or give --context)"},
		{name: "missing named", context: "nope", wantErr: natsconn.ErrNoSuchContext, wantReason: "'nats context ls'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := natsconn.Resolve(natsconn.Config{}, natsconn.Sources{Context: tt.context, Contexts: cs,
				Names: map[string]string{"Context": "--context"}, Getenv: func(k string) string { return tt.env[k] }})
			var ce *natsconn.ConfigError
			if !errors.Is(err, tt.wantErr) || !errors.As(err, &ce) {
				t.Fatalf("Resolve() = %v, want a *ConfigError of %v", err, tt.wantErr)
			}
			if !strings.Contains(ce.Reason, tt.wantReason) || strings.HasPrefix(ce.Reason, "natsconn:") {
				t.Fatalf("Reason %q, want it to say %q", ce.Reason, tt.wantReason)
			}
		})
	}
}

// Check says Options' refusals in the caller's words, or the fields'.
func TestCheck(t *testing.T) {
	t.Parallel()
	file, missing := existing(t), filepath.Join(t.TempDir(), "missing.pem")
	names := map[string]string{"Creds": "--nats-creds", "NKey": "--nats-nkey", "TLSCert": "--tls-cert", "TLSKey": "--tls-key"}
	tests := []struct {
		name       string
		cfg        natsconn.Config
		names      map[string]string
		wantErr    error
		wantReason string // the Reason's start
	}{
		{name: "fine", cfg: natsconn.Config{TLSCert: file, TLSKey: file}, names: names},
		{name: "missing creds", cfg: natsconn.Config{Creds: missing}, names: names, wantErr: fs.ErrNotExist, wantReason: "--nats-creds: stat " + missing},
		{name: "missing creds, a Go program's", cfg: natsconn.Config{Creds: missing}, wantErr: fs.ErrNotExist, wantReason: "Creds: stat " + missing},
		{name: "no NKey seed", cfg: natsconn.Config{NKey: file}, names: names, wantErr: new(natsconn.NKeyError), wantReason: "--nats-nkey " + file + ": "},
		{name: "cert without key", cfg: natsconn.Config{TLSCert: file}, names: names, wantErr: natsconn.ErrCertWithoutKey, wantReason: "--tls-cert and --tls-key go together"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.Check(tt.names)
			var ce *natsconn.ConfigError
			switch ke := (*natsconn.NKeyError)(nil); {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("Check() = %v", err)
			case tt.wantErr == nil:
			case !errors.As(err, &ce):
				t.Fatalf("Check() = %v, want a *ConfigError", err)
			case errors.As(tt.wantErr, &ke) && !errors.As(err, &ke), !errors.As(tt.wantErr, &ke) && !errors.Is(err, tt.wantErr):
				t.Fatalf("Check() = %v, want %v", err, tt.wantErr)
			case !strings.HasPrefix(ce.Reason, tt.wantReason):
				t.Fatalf("Reason %q, want %q", ce.Reason, tt.wantReason)
			}
		})
	}
}
