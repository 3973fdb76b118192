package console_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/console"
	"github.com/jetledger/jetledger/consumer/consumertest"
)

// selfSigned writes a certificate for 127.0.0.1 and its key, and returns
// their files and a pool that trusts it.
func selfSigned(t *testing.T) (cert, key string, pool *x509.CertPool) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "console"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(c)
	return cert, key, pool
}

// Served with TLS: HTTPS only, and the session cookie is Secure,
// HttpOnly and SameSite=Strict. Serve refuses, before listening, a listen
// that is not loopback without users, and half of TLS.
func TestServeWithTLSMarksTheCookieSecure(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	nc, _ := consumertest.Connect(t, srv)
	users, _ := console.ParseUsers(strings.NewReader(usersFile))
	for _, bad := range []console.ServeConfig{
		{Options: console.Options{Conn: nc}, Listen: "0.0.0.0:0"},
		{Options: console.Options{Conn: nc}, Listen: "127.0.0.1:0", TLSCert: "c.pem"},
	} {
		if err := console.Serve(t.Context(), bad); err == nil {
			t.Errorf("Serve(%+v) took it", bad)
		}
	}
	if err := console.Serve(t.Context(), console.ServeConfig{Options: console.Options{Conn: nc}, Listen: "[::]:0"}); !errors.Is(err, console.ErrOpenListen) {
		t.Errorf("an open listen on every address: %v, want ErrOpenListen", err)
	}
	cert, key, pool := selfSigned(t)
	ready := make(chan string, 1)
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- console.Serve(ctx, console.ServeConfig{Options: console.Options{Conn: nc, Users: users}, Listen: "127.0.0.1:0",
			TLSCert: cert, TLSKey: key, Ready: func(u string) { ready <- u }})
	}()
	base := <-ready
	if !strings.HasPrefix(base, "https://") {
		t.Fatalf("served at %s, want https", base)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(base+"signin", url.Values{"name": {"ada"}, "secret": {"ada-secret"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	set := resp.Header.Get("Set-Cookie")
	for _, want := range []string{"Secure", "HttpOnly", "SameSite=Strict"} {
		if !strings.Contains(set, want) {
			t.Errorf("the session cookie %q lacks %s", set, want)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Serve after its context ended: %v", err)
	}
}
