package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"maps"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// These tests set the environment (XDG_CONFIG_HOME, NATS_*), so none of
// them runs in parallel.

// natsCLIVariables are the nats CLI's variables that jetledger reads.
var natsCLIVariables = []string{"NATS_URL", "NATS_CONTEXT", "NATS_CREDS", "NATS_NKEY", "NATS_USER", "NATS_PASSWORD", "NATS_CERT", "NATS_KEY", "NATS_CA"}

// contextHome gives the test a nats CLI configuration directory of its
// own, and none of the NATS_* variables of the environment running it.
func contextHome(tb testing.TB) string {
	tb.Helper()
	home := tb.TempDir()
	tb.Setenv("XDG_CONFIG_HOME", home)
	for _, v := range natsCLIVariables {
		tb.Setenv(v, "")
	}
	if err := os.MkdirAll(filepath.Join(home, "nats", "context"), 0o700); err != nil {
		tb.Fatal(err)
	}
	return home
}

// savedContext is a context as 'nats context save' writes it: every field,
// the unused ones empty (those jetledger does not support included).
var savedContext = map[string]any{
	"description": "", "url": "", "socks_proxy": "", "token": "", "user": "", "password": "", "creds": "", "nkey": "",
	"cert": "", "key": "", "ca": "", "nsc": "", "jetstream_domain": "", "jetstream_api_prefix": "",
	"jetstream_event_prefix": "", "inbox_prefix": "", "user_jwt": "", "user_seed": "", "color_scheme": "",
	"tls_first": false, "windows_cert_store": "", "windows_cert_match_by": "", "windows_cert_match": "",
	"windows_ca_certs_match": nil,
}

// writeContext writes the context name with fields set over savedContext
// and returns its file.
func writeContext(tb testing.TB, home, name string, fields map[string]any) string {
	tb.Helper()
	ctx := maps.Clone(savedContext)
	maps.Copy(ctx, fields)
	b, err := json.MarshalIndent(ctx, "", "  ")
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(home, "nats", "context", name+".json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// selectContext does what 'nats context select name' does.
func selectContext(tb testing.TB, home, name string) {
	tb.Helper()
	if err := os.WriteFile(filepath.Join(home, "nats", "context.txt"), []byte(name), 0o600); err != nil {
		tb.Fatal(err)
	}
}

// authServer runs a JetStream server in the domain "hub" that wants user
// app, password pw, with the stream EV on ev.>.
func authServer(tb testing.TB) (*server.Server, jetstream.JetStream) {
	tb.Helper()
	srv := consumertest.RunServerWithOptions(tb, &server.Options{Username: "app", Password: "pw", JetStreamDomain: "hub"})
	nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo("app", "pw"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	consumertest.CreateStream(tb, js, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.>"}})
	return srv, js
}

// streamMessages is the number of messages in the stream EV.
func streamMessages(tb testing.TB, js jetstream.JetStream) uint64 {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "EV")
	if err != nil {
		tb.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	return info.State.Msgs
}

// publish reaches a server that wants a user and password through every
// way of naming it: --context (a name or a .json file), $NATS_CONTEXT, the
// selected context, $NATS_URL, flags over the context's fields. The
// controls show that the server refuses a connection without the password
// the context holds, and with a wrong one.
func TestContextReachesTheServer(t *testing.T) {
	home := contextHome(t)
	srv, js := authServer(t)
	url := srv.ClientURL()
	devFile := writeContext(t, home, "dev", map[string]any{"url": url, "user": "app", "password": "pw"})
	writeContext(t, home, "elsewhere", map[string]any{"url": "nats://127.0.0.1:1", "user": "app", "password": "pw"})
	writeContext(t, home, "wrongpw", map[string]any{"url": url, "user": "app", "password": "nope"})
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		selected string
		wantCode int
	}{
		{name: "--context", args: []string{"--context", "dev"}},
		{name: "--context FILE.json", args: []string{"--context", devFile}},
		{name: "$NATS_CONTEXT", env: map[string]string{"NATS_CONTEXT": "dev"}},
		{name: "selected", selected: "dev"},
		{name: "$NATS_URL alone", env: map[string]string{"NATS_URL": strings.Replace(url, "nats://", "nats://app:pw@", 1)}},
		{name: "$NATS_URL over the context's url", env: map[string]string{"NATS_URL": url}, selected: "elsewhere"},
		{name: "-s over the context's url", args: []string{"--context", "elsewhere", "-s", url}},
		{name: "--nats over the selected context's url", args: []string{"--nats", url}, selected: "elsewhere"},
		{name: "flags over the context's credentials", args: []string{"--context", "wrongpw", "--nats-user", "app", "--nats-password", "pw"}},
		{name: "control: no credentials", args: []string{"--nats", url}, wantCode: exitFailure},
		{name: "control: the context's wrong password", args: []string{"--context", "wrongpw"}, wantCode: exitFailure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			selectContext(t, home, tt.selected)
			before := streamMessages(t, js)
			args := append([]string{"publish", "--subject", "ev.paid", "--data", `{"amount":1}`, "--log-level", "error"}, tt.args...)
			code, _, stderr := runMain(args...)
			if code != tt.wantCode {
				t.Fatalf("%q: exit %d, want %d\n%s", args, code, tt.wantCode, stderr)
			}
			want := before
			if tt.wantCode == exitOK {
				want++
			}
			if got := streamMessages(t, js); got != want {
				t.Fatalf("%q: the stream has %d messages, want %d", args, got, want)
			}
		})
	}
}

// testPKI writes to dir a CA certificate, and a client certificate and key
// it signed, and returns the server's TLS config: a certificate for
// 127.0.0.1 and client certificates required.
func testPKI(tb testing.TB, dir string) *tls.Config {
	tb.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "jetledger test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		tb.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, tmpl *x509.Certificate) (*ecdsa.PrivateKey, []byte) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl.SerialNumber, tmpl.NotBefore, tmpl.NotAfter = big.NewInt(serial), time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			tb.Fatal(err)
		}
		return key, der
	}
	srvKey, srvDER := issue(2, &x509.Certificate{Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	cliKey, cliDER := issue(3, &x509.Certificate{Subject: pkix.Name{CommonName: "jetledger"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	cliKeyDER, err := x509.MarshalECPrivateKey(cliKey)
	if err != nil {
		tb.Fatal(err)
	}
	for name, block := range map[string]*pem.Block{"ca.pem": {Type: "CERTIFICATE", Bytes: caDER},
		"client.pem": {Type: "CERTIFICATE", Bytes: cliDER}, "client-key.pem": {Type: "EC PRIVATE KEY", Bytes: cliKeyDER}} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS12}
}

// A context's ca, cert, key and tls_first reach a server that does the TLS
// handshake first and wants a client certificate; its paths may start with
// ~ or hold variables. The controls show the server refuses a client
// without either.
func TestContextTLS(t *testing.T) {
	home := contextHome(t)
	pki := t.TempDir()
	t.Setenv("HOME", pki)
	t.Setenv("JETLEDGER_TEST_PKI", pki)
	tlsConf := testPKI(t, pki)
	srv := consumertest.RunServerWithOptions(t, &server.Options{TLS: true, TLSVerify: true, TLSConfig: tlsConf, TLSHandshakeFirst: true})
	url := strings.Replace(srv.ClientURL(), "nats://", "tls://", 1)
	nc, err := nats.Connect(url, nats.RootCAs(filepath.Join(pki, "ca.pem")),
		nats.ClientCert(filepath.Join(pki, "client.pem"), filepath.Join(pki, "client-key.pem")), nats.TLSHandshakeFirst())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.>"}})
	full := map[string]any{"url": url, "ca": filepath.Join(pki, "ca.pem"), "cert": "$JETLEDGER_TEST_PKI/client.pem", "key": "~/client-key.pem", "tls_first": true}
	writeContext(t, home, "tls", full)
	without := func(field string) map[string]any {
		m := maps.Clone(full)
		delete(m, field)
		if field == "cert" {
			delete(m, "key")
		}
		return m
	}
	writeContext(t, home, "nofirst", without("tls_first"))
	writeContext(t, home, "nocert", without("cert"))
	for _, tt := range []struct {
		context  string
		wantCode int
	}{{"tls", exitOK}, {"nofirst", exitFailure}, {"nocert", exitFailure}} {
		t.Run(tt.context, func(t *testing.T) {
			before := streamMessages(t, js)
			code, _, stderr := runMain("publish", "--context", tt.context, "--subject", "ev.paid", "--data", "{}", "--log-level", "error")
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d\n%s", code, tt.wantCode, stderr)
			}
			want := before
			if tt.wantCode == exitOK {
				want++
			}
			if got := streamMessages(t, js); got != want {
				t.Fatalf("the stream has %d messages, want %d", got, want)
			}
		})
	}
}

// A context's JetStream domain or API prefix is honoured: status finds the
// stream in the server's domain, and not in another one.
func TestContextJetStreamDomain(t *testing.T) {
	home := contextHome(t)
	srv, _ := authServer(t)
	db := filepath.Join(t.TempDir(), "none.db")
	tests := []struct {
		field, value string
		wantStream   bool
	}{
		{"jetstream_domain", "hub", true},
		{"jetstream_domain", "elsewhere", false},
		{"jetstream_api_prefix", "$JS.hub.API", true},
		{"jetstream_api_prefix", "$JS.elsewhere.API", false},
	}
	for _, tt := range tests {
		t.Run(tt.field+"="+tt.value, func(t *testing.T) {
			writeContext(t, home, "hub", map[string]any{"url": srv.ClientURL(), "user": "app", "password": "pw", tt.field: tt.value})
			code, stdout, stderr := runMain("status", "--context", "hub", "--stream", "EV", "--db", db, "--json")
			var rep statusReport
			if code != exitFailure || json.Unmarshal([]byte(stdout), &rep) != nil {
				// exit 1 in every case: there is no ledger, nor a consumer.
				t.Fatalf("exit %d, stdout %q\n%s", code, stdout, stderr)
			}
			if got := rep.Stream != nil && rep.Stream.Name == "EV"; got != tt.wantStream {
				t.Fatalf("stream found: %t, want %t; problems %q", got, tt.wantStream, rep.Problems)
			}
		})
	}
}

// What jetledger cannot use of a context is refused before any I/O, naming
// the context's file and the field; so is a context that does not exist,
// however it was named.
func TestContextRefusals(t *testing.T) {
	home := contextHome(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "l.db")
	file := func(name string) string { return filepath.Join(home, "nats", "context", name+".json") }
	for name, fields := range map[string]map[string]any{
		"jwt":      {"user_jwt": "eyJ0eXAi", "user_seed": "SUAM"},
		"nsc":      {"nsc": "nsc://operator/account/user"},
		"socks":    {"socks_proxy": "127.0.0.1:1080"},
		"winstore": {"windows_cert_store": "windowscurrentuser"},
		"future":   {"frobnicate": 1},
		"op":       {"creds": "op://vault/nats/creds"},
		"envpw":    {"user": "app", "password": "env://NATS_SECRET"},
		"nocreds":  {"creds": filepath.Join(dir, "missing.creds")},
		"halfcert": {"cert": devNull(t)},
		"both":     {"jetstream_domain": "hub", "jetstream_api_prefix": "$JS.hub.API"},
		"notjson":  nil,
	} {
		writeContext(t, home, name, fields)
	}
	if err := os.WriteFile(file("notjson"), []byte("url: nats://x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		selected string
		want     []string // in the message
	}{
		{name: "missing --context", args: []string{"status", "--context", "nope"}, want: []string{file("nope")}},
		{name: "missing $NATS_CONTEXT", args: []string{"publish", "--subject", "ev.x", "--data", "{}"}, env: map[string]string{"NATS_CONTEXT": "nope"}, want: []string{file("nope")}},
		{name: "missing selected", args: []string{"publish"}, selected: "gone", want: []string{filepath.Join(home, "nats", "context.txt"), file("gone")}},
		{name: "missing .json", args: []string{"status", "--context", filepath.Join(dir, "x.json")}, want: []string{filepath.Join(dir, "x.json")}},
		{name: "run, missing", args: []string{"run", "--db", db, "--context", "nope"}, want: []string{file("nope")}},
		{name: "not a name", args: []string{"status", "--context", "../dev"}, want: []string{`"../dev"`}},
		{name: "empty", args: []string{"status", "--context", ""}, want: []string{"--context is empty"}},
		{name: "user_jwt", args: []string{"status", "--context", "jwt"}, want: []string{file("jwt"), `"user_jwt"`}},
		{name: "nsc", args: []string{"status", "--context", "nsc"}, want: []string{file("nsc"), `"nsc"`}},
		{name: "socks_proxy", args: []string{"status", "--context", "socks"}, want: []string{file("socks"), `"socks_proxy"`}},
		{name: "windows_cert_store", args: []string{"status", "--context", "winstore"}, want: []string{file("winstore"), `"windows_cert_store"`}},
		{name: "a newer field", args: []string{"status", "--context", "future"}, want: []string{file("future"), `"frobnicate"`}},
		{name: "op:// creds", args: []string{"status", "--context", "op"}, want: []string{file("op"), `"creds"`, "op:"}},
		{name: "env:// password", args: []string{"status", "--context", "envpw"}, want: []string{file("envpw"), `"password"`}},
		{name: "missing creds file", args: []string{"status", "--context", "nocreds"}, want: []string{file("nocreds"), `"creds"`, "missing.creds"}},
		{name: "cert without key", args: []string{"status", "--context", "halfcert"}, want: []string{file("halfcert"), `"cert"`, `"key"`}},
		{name: "domain and prefix", args: []string{"status", "--context", "both"}, want: []string{file("both"), `"jetstream_domain"`, `"jetstream_api_prefix"`}},
		{name: "not JSON", args: []string{"status", "--context", "notjson"}, want: []string{file("notjson")}},
		{name: "selected, unsupported", args: []string{"publish", "--nats", "nats://127.0.0.1:1"}, selected: "jwt", want: []string{file("jwt"), `"user_jwt"`}},
		{name: "missing $NATS_CREDS", args: []string{"status"}, env: map[string]string{"NATS_CREDS": filepath.Join(dir, "missing.creds")}, want: []string{"$NATS_CREDS", "missing.creds"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			selectContext(t, home, tt.selected)
			msg := usageMessage(t, tt.args...)
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q: %q does not say %q", tt.args, msg, w)
				}
			}
		})
	}
	assertEmpty(t, dir, nil)
}

// devNull is an existing file, for the fields only checked to exist.
func devNull(tb testing.TB) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "file.pem")
	if err := os.WriteFile(p, []byte("not read at parse time"), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

// Which setting wins, read back from the parsed flags: jetledger's own
// (flag, JETLEDGER_*, config file), then the nats CLI's variables, then the
// context. Credentials and client certificates come whole from one layer.
// run and replay use a context only when one is named; the demo's hidden
// consumer uses none; commands not selected are left alone.
func TestContextPrecedence(t *testing.T) {
	home := contextHome(t)
	ca, otherCA, creds := devNull(t), devNull(t), devNull(t)
	const ctxURL, envURL, jlURL, flagURL, fileURL = "nats://ctx:4222", "nats://env:4222", "nats://jetledger-env:4222", "nats://flag:4222", "nats://file:4222"
	writeContext(t, home, "dev", map[string]any{"url": ctxURL, "user": "cu", "password": "cp", "ca": ca, "inbox_prefix": "_INBOX_dev", "tls_first": true})
	writeContext(t, home, "bare", nil)
	cfg := writeConfig(t, "nats = \""+fileURL+"\"\n")
	// inbox is the context's inbox_prefix: whether the context dev was read.
	type want struct{ url, user, password, token, creds, ca, inbox string }
	fromCtx := want{url: ctxURL, user: "cu", password: "cp", ca: ca, inbox: "_INBOX_dev"}
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		selected string
		want     want
	}{
		{name: "nothing", args: []string{"publish"}, want: want{url: defaultNATS}},
		// A command that pairs a ledger with a server takes a named context only.
		// Left empty when parsed: status asks the server its ledger
		// records, else defaultNATS (natsFlags.orRecorded).
		{name: "status ignores the selected", args: []string{"status"}, selected: "dev", want: want{}},
		{name: "status takes a named one", args: []string{"status", "--context", "dev"}, want: fromCtx},
		{name: "selected", args: []string{"publish"}, selected: "dev", want: fromCtx},
		{name: "--context", args: []string{"publish", "--context", "dev"}, want: fromCtx},
		{name: "$JETLEDGER_CONTEXT", args: []string{"publish"}, env: map[string]string{"JETLEDGER_CONTEXT": "dev"}, want: fromCtx},
		{name: "$NATS_CONTEXT over selected", args: []string{"publish"}, env: map[string]string{"NATS_CONTEXT": "dev"}, selected: "bare", want: fromCtx},
		{name: "--context over $NATS_CONTEXT", args: []string{"publish", "--context", "dev"}, env: map[string]string{"NATS_CONTEXT": "bare"}, want: fromCtx},
		{name: "a context without url", args: []string{"publish", "--context", "bare"}, want: want{url: nats.DefaultURL}},
		{name: "$NATS_URL over the context", args: []string{"publish"}, env: map[string]string{"NATS_URL": envURL}, selected: "dev",
			want: want{url: envURL, user: "cu", password: "cp", ca: ca, inbox: "_INBOX_dev"}},
		{name: "$JETLEDGER_NATS over $NATS_URL", args: []string{"publish"}, env: map[string]string{"NATS_URL": envURL, "JETLEDGER_NATS": jlURL}, selected: "dev",
			want: want{url: jlURL, user: "cu", password: "cp", ca: ca, inbox: "_INBOX_dev"}},
		{name: "--nats over $JETLEDGER_NATS", args: []string{"publish", "--nats", flagURL}, env: map[string]string{"JETLEDGER_NATS": jlURL}, selected: "dev",
			want: want{url: flagURL, user: "cu", password: "cp", ca: ca, inbox: "_INBOX_dev"}},
		{name: "-s", args: []string{"publish", "-s", flagURL}, want: want{url: flagURL}},
		{name: "config file over $NATS_URL", args: []string{"--config", cfg, "publish"}, env: map[string]string{"NATS_URL": envURL}, selected: "dev",
			want: want{url: fileURL, user: "cu", password: "cp", ca: ca, inbox: "_INBOX_dev"}},
		{name: "$NATS_CREDS replaces the context's credentials", args: []string{"publish"}, env: map[string]string{"NATS_CREDS": creds}, selected: "dev",
			want: want{url: ctxURL, creds: creds, ca: ca, inbox: "_INBOX_dev"}},
		{name: "$NATS_USER without a password is a token", args: []string{"publish"}, env: map[string]string{"NATS_USER": "s3cret"}, selected: "dev",
			want: want{url: ctxURL, token: "s3cret", ca: ca, inbox: "_INBOX_dev"}},
		{name: "--nats-password replaces the context's credentials", args: []string{"publish", "--nats-password", "x"}, selected: "dev",
			want: want{url: ctxURL, password: "x", ca: ca, inbox: "_INBOX_dev"}},
		{name: "$NATS_CA over the context's ca", args: []string{"publish"}, env: map[string]string{"NATS_CA": otherCA}, selected: "dev",
			want: want{url: ctxURL, user: "cu", password: "cp", ca: otherCA, inbox: "_INBOX_dev"}},
		{name: "run ignores the selected context", args: []string{"run"}, selected: "dev", want: want{}},
		{name: "replay ignores the selected context", args: []string{"replay"}, selected: "dev", want: want{}},
		{name: "run, $NATS_CONTEXT", args: []string{"run"}, env: map[string]string{"NATS_CONTEXT": "dev"}, want: fromCtx},
		{name: "replay, --context", args: []string{"replay", "--context", "dev"}, want: fromCtx},
		{name: "demo-consumer uses none", args: []string{"demo-consumer", "--nats", flagURL}, env: map[string]string{"NATS_CREDS": creds}, selected: "dev",
			want: want{url: flagURL}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			selectContext(t, home, tt.selected)
			root, err := parseArgs(tt.args...)
			if err != nil {
				t.Fatalf("%q: %v", tt.args, err)
			}
			command := tt.args[0]
			if command == "--config" {
				command = tt.args[2]
			}
			n := map[string]natsFlags{"publish": root.Publish.NATS, "status": root.Status.NATS, "run": root.Run.NATS, "replay": root.Replay.NATS,
				"demo-consumer": root.DemoConsumer.NATS}[command]
			got := want{url: n.URL, user: n.User, password: n.Password, token: n.Token, creds: n.Creds, ca: n.TLSCA, inbox: n.Context.inboxPrefix}
			if got != tt.want || n.Context.tlsFirst != (tt.want.inbox != "") {
				t.Fatalf("%q:\n got %+v, tls_first %t\nwant %+v", tt.args, got, n.Context.tlsFirst, tt.want)
			}
			// A command not run is left alone, though kong calls the hook of
			// every command's --context (its name may come from the
			// environment, which kong reads for every command).
			other := root.Check.NATS.Context
			other.name = ""
			notRun := root.Status.NATS
			if command == "status" {
				notRun = root.Publish.NATS
			}
			if other != (natsContext{}) || notRun.User != "" {
				t.Fatalf("%q filled in commands not run: check %+v, user %q", tt.args, other, notRun.User)
			}
		})
	}
}

// run without --nats and without a named context starts its embedded
// server even when the nats CLI has a context selected; with the context
// named it consumes the context's server, and starts none.
func TestRunUsesAContextOnlyWhenNamed(t *testing.T) {
	home := contextHome(t)
	srv, js := authServer(t)
	writeContext(t, home, "remote", map[string]any{"url": srv.ClientURL(), "user": "app", "password": "pw"})
	selectContext(t, home, "remote")

	// run consumes until its context ends; it exits 0 then.
	runUntil := func(t *testing.T, ready func() bool, args ...string) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var stdout, stderr bytes.Buffer
		done := make(chan int, 1)
		args = append([]string{"run", "--log-level", "error"}, args...)
		go func() { done <- mainExit(ctx, args, &stdout, &stderr) }()
		consumertest.Eventually(t, 30*time.Second, "run to start", func() bool {
			select {
			case code := <-done:
				t.Fatalf("%q exited %d before it was ready\n%s", args, code, stderr.String())
			default:
			}
			return ready()
		})
		cancel()
		if code := <-done; code != exitOK {
			t.Fatalf("%q: exit %d\n%s", args, code, stderr.String())
		}
	}
	exists := func(p string) func() bool {
		return func() bool { _, err := os.Stat(p); return err == nil }
	}
	hasDurable := func(name string) func() bool {
		return func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := js.Consumer(ctx, "EV", name)
			return err == nil
		}
	}

	t.Run("selected context: embedded server", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "l.db")
		runUntil(t, exists(filepath.Join(db+".nats", "jetstream")), "--db", db, "--listen", "127.0.0.1:0",
			"--stream", "EV", "--subjects", "ev.>", "--durable", "local")
		if hasDurable("local")() {
			t.Fatal("run consumed the selected context's server instead of its embedded one")
		}
	})
	t.Run("named context: its server", func(t *testing.T) {
		t.Setenv("NATS_CONTEXT", "remote")
		db := filepath.Join(t.TempDir(), "l.db")
		runUntil(t, hasDurable("named"), "--db", db, "--stream", "EV", "--durable", "named")
		if exists(db + ".nats")() {
			t.Fatal("run with a named context started an embedded server")
		}
	})
}
