package node

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"
)

// A refusal is a *ConfigError whose Reason names the settings as Names
// says, and which is still its sentinel for errors.Is.
func TestValidateSaysTheCallersNames(t *testing.T) {
	t.Parallel()
	names := map[string]string{"URLs": "--hub-url", "Domain": "--edge-domain", "HubDomain": "--hub-domain", "Credentials": "--hub-creds",
		"TLSCA": "--hub-tls-ca", "TLSCert": "--hub-tls-cert", "TLSKey": "--hub-tls-key"}
	missing := filepath.Join(t.TempDir(), "missing.pem")
	exists := "config.go" // a file, not PEM
	tests := []struct {
		name       string
		leaf       LeafConfig
		wantErr    error
		wantReason string
	}{
		{name: "domain without URLs", leaf: LeafConfig{Domain: "s"}, wantErr: ErrHubURL, wantReason: "--edge-domain goes with --hub-url"},
		{name: "key without URLs", leaf: LeafConfig{TLSKey: "k"}, wantErr: ErrHubURL, wantReason: "--hub-tls-key goes with --hub-url"},
		{name: "no URLs", leaf: LeafConfig{}, wantErr: ErrHubURL, wantReason: "--hub-url: none given"},
		{name: "no domain", leaf: LeafConfig{URLs: []string{"nats-leaf://h:7422"}}, wantErr: ErrDomain,
			wantReason: "--hub-url needs --edge-domain, a JetStream domain unique to this site (such as site1)"},
		{name: "bad hub domain", leaf: LeafConfig{URLs: []string{"nats-leaf://h:7422"}, Domain: "s", HubDomain: "a b"}, wantErr: ErrHubDomainName,
			wantReason: `--hub-domain "a b": want letters, digits, '-' and '_'`},
		{name: "same domain", leaf: LeafConfig{URLs: []string{"nats-leaf://h:7422"}, Domain: "hub"}, wantErr: ErrSameDomain,
			wantReason: `--edge-domain "hub" is the hub's domain; each site needs its own`},
		{name: "cert without key", leaf: LeafConfig{URLs: []string{"nats-leaf://h:7422"}, Domain: "s", TLSCert: exists}, wantErr: ErrTLSPair,
			wantReason: "--hub-tls-cert and --hub-tls-key go together"},
		{name: "CA missing", leaf: LeafConfig{URLs: []string{"nats-leaf://h:7422"}, Domain: "s", TLSCA: missing}, wantErr: ErrLeafTLS,
			wantReason: "--hub-tls-ca: stat " + missing + ": no such file or directory"},
		{name: "credentials missing", leaf: LeafConfig{URLs: []string{"nats-leaf://h:7422"}, Domain: "s", Credentials: missing}, wantErr: fs.ErrNotExist,
			wantReason: "--hub-creds: stat " + missing + ": no such file or directory"},
		{name: "URL with a password", leaf: LeafConfig{URLs: []string{"nats-leaf://h:7422", "nats-leaf://u:s3cret@"}, Domain: "s"}, wantErr: ErrHubURL,
			wantReason: `--hub-url "nats-leaf://xxxxx@": want a URL such as nats-leaf://hub.example:7422`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := tt.leaf
			l.Names = names
			err := l.Validate()
			var ce *ConfigError
			if !errors.Is(err, tt.wantErr) || !errors.As(err, &ce) {
				t.Fatalf("Validate: %v, want a *ConfigError that is %v", err, tt.wantErr)
			}
			if ce.Reason != tt.wantReason {
				t.Fatalf("Reason %q, want %q", ce.Reason, tt.wantReason)
			}
		})
	}
}

// A TLS file Start reads and cannot use is refused in the caller's words.
func TestStartSaysTheLeafFile(t *testing.T) {
	t.Parallel()
	names := map[string]string{"TLSCA": "--hub-tls-ca", "TLSCert": "--hub-tls-cert", "TLSKey": "--hub-tls-key"}
	for _, tt := range []struct {
		leaf       LeafConfig
		wantErr    error
		wantReason string
	}{
		{LeafConfig{TLSCA: "config.go"}, ErrNoPEM, "--hub-tls-ca config.go: no PEM certificate in it"},
		{LeafConfig{TLSCert: "config.go", TLSKey: "config.go"}, ErrLeafTLS, "--hub-tls-cert/--hub-tls-key: tls: failed to find any PEM data in certificate input"},
	} {
		l := tt.leaf
		l.URLs, l.Domain, l.Names = []string{"nats-leaf://127.0.0.1:7422"}, "s", names
		n, err := Start(t.Context(), Config{Listen: "127.0.0.1:0", StoreDir: filepath.Join(t.TempDir(), "s"), Leaf: &l, Logger: quiet})
		if err == nil {
			n.Close()
		}
		var ce *ConfigError
		if !errors.Is(err, tt.wantErr) || !errors.As(err, &ce) || ce.Reason != tt.wantReason {
			t.Errorf("Start with %+v: %v, want %v said %q", tt.leaf, err, tt.wantErr, tt.wantReason)
		}
	}
}

// Without Names a refusal names the Config's own fields.
func TestValidateNamesTheFieldsByDefault(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		cfg        Config
		wantReason string
	}{
		{Config{StoreDir: "s", Listen: "nowhere"}, `Listen "nowhere": want host:port`},
		{Config{StoreDir: "s", Listen: "127.0.0.1:99999"}, `Listen "127.0.0.1:99999": the port must be a number from 0 to 65535`},
		{Config{}, "StoreDir is required"},
		{Config{StoreDir: "s", Leaf: &LeafConfig{Domain: "s"}}, "Domain goes with URLs"},
	} {
		var ce *ConfigError
		if err := tt.cfg.Validate(); !errors.As(err, &ce) || ce.Reason != tt.wantReason {
			t.Errorf("Validate(%+v): %v, want the reason %q", tt.cfg, err, tt.wantReason)
		}
	}
	if err := (Config{StoreDir: "s", Listen: "x"}).Validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("a bad Listen is %v, want ErrInvalidConfig", err)
	}
}

// "always" or a positive duration.
func TestParseSyncInterval(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in      string
		want    string
		wantErr bool
	}{
		{in: "always", want: "0s"}, {in: "ALWAYS", want: "0s"}, {in: "2m", want: "2m0s"},
		{in: "0s", wantErr: true}, {in: "-1m", wantErr: true}, {in: "soon", wantErr: true},
	} {
		d, err := ParseSyncInterval(tt.in)
		if (err != nil) != tt.wantErr || err == nil && d.String() != tt.want {
			t.Errorf("ParseSyncInterval(%q) = %s, %v; want %s (error %t)", tt.in, d, err, tt.want, tt.wantErr)
		}
	}
}
