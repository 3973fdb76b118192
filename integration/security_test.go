package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// The embedded server can require a token; clients pass --nats-token. The
// ledger file is created with mode 0600.
func TestEmbeddedTokenAndLedgerMode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "l.db")
	port := freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	run := start(t, nil, "run", "--db", db, "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--embedded-token", "s3cret",
		"--stream", "SEC", "--subjects", "sec.>", "--log-format", "json")
	pub := func(extra ...string) (string, int) {
		return cli(t, append([]string{"publish", "--nats", url, "--subject", "sec.x", "--data", `{"a":1}`, "--id", "t1"}, extra...)...)
	}
	var out string
	var code int
	consumertest.Eventually(t, 30*time.Second, "embedded server up", func() bool {
		out, code = pub()
		return strings.Contains(strings.ToLower(out), "authorization")
	})
	if code != 1 {
		t.Fatalf("publish without the token: exit %d\n%s", code, out)
	}
	if out, code := pub("--nats-token", "s3cret"); code != 0 {
		t.Fatalf("publish with the token: exit %d\n%s", code, out)
	}
	consumertest.Eventually(t, 30*time.Second, "applied", func() bool {
		o, c := cli(t, "ledger", "stats", "--db", db, "--json")
		return c == 0 && strings.Contains(o, `"processed": 1`)
	})
	run.signal(syscall.SIGTERM)
	if code := run.wait(30 * time.Second); code != 0 {
		t.Fatalf("exit %d\n%s", code, tail(run.output()))
	}
	fi, err := os.Stat(db)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("ledger mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
}

// TLS with a private CA, NKey and user/password authentication, as nats CLI
// users configure them.
func TestTLSNKeyAndUserPassword(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	caFile, tlsConf := testTLS(t, dir)
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pubKey, _ := user.PublicKey()
	seed, _ := user.Seed()
	seedFile := filepath.Join(dir, "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		opts  *server.Options
		good  []string
		bad   []string
		wantS string
	}{
		{name: "tls", opts: &server.Options{TLS: true, TLSConfig: tlsConf}, good: []string{"--tls-ca", caFile}, wantS: "certificate"},
		{name: "nkey", opts: &server.Options{Nkeys: []*server.NkeyUser{{Nkey: pubKey}}}, good: []string{"--nats-nkey", seedFile}, wantS: "authorization"},
		{name: "user", opts: &server.Options{Username: "app", Password: "pw"}, good: []string{"--nats-user", "app", "--nats-password", "pw"},
			bad: []string{"--nats-user", "app", "--nats-password", "wrong"}, wantS: "authorization"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := consumertest.RunServerWithOptions(t, tt.opts)
			url := srv.ClientURL()
			if tt.opts.TLS {
				url = strings.Replace(url, "nats://", "tls://", 1)
			}
			base := []string{"check", "--nats", url, "--stream", "NOPE"}
			out, code := cli(t, append(base, tt.bad...)...)
			if code != 1 || !strings.Contains(strings.ToLower(out), tt.wantS) {
				t.Fatalf("without credentials: exit %d\n%s", code, out)
			}
			// With them the connection works: check gets as far as the missing consumer.
			out, code = cli(t, append(base, tt.good...)...)
			if code != 1 || !strings.Contains(out, "does not exist") {
				t.Fatalf("with credentials: exit %d\n%s", code, out)
			}
		})
	}
	if out, code := cli(t, "check", "--tls-cert", caFile); code != 2 || !strings.Contains(out, "--tls-key") {
		t.Fatalf("--tls-cert without --tls-key: exit %d\n%s", code, out)
	}
}

// testTLS writes a CA certificate and returns its path and a server TLS
// config with a certificate it signed for 127.0.0.1.
func testTLS(t testing.TB, dir string) (string, *tls.Config) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "jetledger test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return caFile, &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}}, MinVersion: tls.VersionTLS12}
}
