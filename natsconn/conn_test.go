package natsconn_test

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/natsconn"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.DiscardHandler)

// existing is a file that exists, for the settings only checked to.
func existing(tb testing.TB) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "file.pem")
	if err := os.WriteFile(p, []byte("not read by Validate"), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	file, missing := existing(t), filepath.Join(t.TempDir(), "missing.creds")
	tests := []struct {
		name        string
		cfg         natsconn.Config
		wantErr     error
		wantSetting string // of a *FileError
	}{
		{name: "zero value", cfg: natsconn.Config{}},
		{name: "files exist", cfg: natsconn.Config{Creds: file, TLSCA: file, TLSCert: file, TLSKey: file}},
		{name: "missing creds", cfg: natsconn.Config{Creds: missing}, wantErr: fs.ErrNotExist, wantSetting: "Creds"},
		{name: "missing nkey", cfg: natsconn.Config{NKey: missing}, wantErr: fs.ErrNotExist, wantSetting: "NKey"},
		{name: "missing key", cfg: natsconn.Config{TLSCert: file, TLSKey: missing}, wantErr: fs.ErrNotExist, wantSetting: "TLSKey"},
		{name: "cert without key", cfg: natsconn.Config{TLSCert: file}, wantErr: natsconn.ErrCertWithoutKey},
		{name: "key without cert", cfg: natsconn.Config{TLSKey: file}, wantErr: natsconn.ErrCertWithoutKey},
		{name: "domain and prefix", cfg: natsconn.Config{Domain: "hub", APIPrefix: "$JS.hub.API"}, wantErr: natsconn.ErrInvalidConfig},
		{name: "negative reconnect wait", cfg: natsconn.Config{ReconnectWait: -1}, wantErr: natsconn.ErrInvalidConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.Validate()
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Validate() = %v, want %v", err, tt.wantErr)
			}
			var fe *natsconn.FileError
			if got := ""; errors.As(err, &fe) {
				got = fe.Setting
				if got != tt.wantSetting {
					t.Fatalf("FileError.Setting = %q, want %q", got, tt.wantSetting)
				}
			} else if tt.wantSetting != "" {
				t.Fatalf("Validate() = %v, want a *FileError", err)
			}
			if tt.wantErr == nil {
				return
			}
			if _, _, err := natsconn.Connect(t.Context(), tt.cfg); !errors.Is(err, tt.wantErr) {
				t.Fatalf("Connect() = %v, want %v before dialing", err, tt.wantErr)
			}
		})
	}
}

// A file that holds no NKey seed is an *NKeyError, before dialing.
func TestConfigOptionsNKeySeed(t *testing.T) {
	t.Parallel()
	_, err := natsconn.Config{NKey: existing(t)}.Options()
	if ke := (*natsconn.NKeyError)(nil); !errors.As(err, &ke) {
		t.Fatalf("Options() = %v, want an *NKeyError", err)
	}
}

// Connect logs in with the Config's user and password and opens
// JetStream in its domain; without the password it is a *ConnectError
// that does not show it.
func TestConnect(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServerWithOptions(t, &server.Options{Username: "app", Password: "s3cretpw", JetStreamDomain: "hub"})
	nc, js, err := natsconn.Connect(t.Context(), natsconn.Config{URL: srv.ClientURL(), User: "app", Password: "s3cretpw", Domain: "hub", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.>"}}); err != nil {
		t.Fatal(err)
	}
	if got := nc.Opts.Name; got != natsconn.DefaultName {
		t.Fatalf("client name %q, want %q", got, natsconn.DefaultName)
	}

	_, _, err = natsconn.Connect(t.Context(), natsconn.Config{URL: srv.ClientURL(), User: "app", Password: "wrong", Logger: quiet})
	var ce *natsconn.ConnectError
	if !errors.As(err, &ce) || ce.Op != "connect" || !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("Connect() = %v, want a *ConnectError of nats.ErrAuthorization", err)
	}
	// Nothing listens on port 1; the error names the server without its password.
	_, _, err = natsconn.Connect(t.Context(), natsconn.Config{URL: "u:s3cretpw@127.0.0.1:1", Logger: quiet})
	if !errors.As(err, &ce) || strings.Contains(err.Error(), "s3cretpw") {
		t.Fatalf("Connect() = %v, want a *ConnectError without the password", err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := natsconn.Connect(ctx, natsconn.Config{URL: srv.ClientURL()}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Connect(cancelled) = %v, want context.Canceled", err)
	}
}

// nats.go takes a URL without a scheme ("u:pw@host:port"); parsed as it
// is, that is scheme "u" with an opaque part, so RedactURL adds one.
func TestRedactURL(t *testing.T) {
	t.Parallel()
	// A free port, not nats-server's default one, which a user's own server
	// may hold.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	plain := "nats://" + l.Addr().String()
	l.Close()
	for in, want := range map[string]string{
		plain:                           plain,
		"nats://u:s3cretpw@127.0.0.1:1": "nats://xxxxx@127.0.0.1:1",
		"u:s3cretpw@127.0.0.1:1":        "xxxxx@127.0.0.1:1",
		"nats://a:b@127.0.0.1:2,u:s3cretpw@127.0.0.1:1": "nats://xxxxx@127.0.0.1:2,xxxxx@127.0.0.1:1",
		"nats://tok3n@127.0.0.1:1":                      "nats://xxxxx@127.0.0.1:1",
		"nats://u:s3cretpw@host:1/%zz":                  "xxxxx@host:1/%zz",
	} {
		if got := natsconn.RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
