package node

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// dial connects to n's listener as a client over TCP, with opts.
func dial(t *testing.T, n *Node, opts ...nats.Option) (*nats.Conn, error) {
	t.Helper()
	nc, err := nats.Connect(n.ClientURL(), append(opts, nats.MaxReconnects(0), nats.Timeout(5*time.Second))...)
	if err == nil {
		t.Cleanup(nc.Close)
	}
	return nc, err
}

// The roles on the real server: a publisher publishes and reads its ack,
// and is refused the stream and consumer API that would destroy the
// system of record, and a subscription to the stream's subjects; the
// admin may do anything; a client with no token, or a wrong one, is not
// let in; the program's own connection works whatever the listener asks.
func TestRolesOnTheEmbeddedServer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	n, err := Start(ctx, Config{Listen: "127.0.0.1:0", StoreDir: filepath.Join(t.TempDir(), "nats"), Logger: quiet,
		Token: "admin-secret", Publishers: PublishRole{Tokens: []string{"pub-old", "pub-new"}, Stream: "EV", Subjects: []string{"ev.>"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	own, err := n.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := own.CreateStream(ctx, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.>"}}); err != nil {
		t.Fatalf("the program's own connection: %v", err)
	}
	if _, err := own.CreateOrUpdateConsumer(ctx, "EV", jetstream.ConsumerConfig{Durable: "run", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}

	for _, tok := range []string{"", "wrong", "admin-secre"} {
		if _, err := dial(t, n, nats.Token(tok)); !errors.Is(err, nats.ErrAuthorization) {
			t.Errorf("token %q: %v, want %v", tok, err, nats.ErrAuthorization)
		}
	}

	violations := make(chan error, 16)
	pub, err := dial(t, n, nats.Token("pub-new"), nats.CustomInboxPrefix(PublisherInboxPrefix), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { violations <- err }))
	if err != nil {
		t.Fatal(err)
	}
	pjs, err := jetstream.New(pub)
	if err != nil {
		t.Fatal(err)
	}
	if ack, err := pjs.Publish(ctx, "ev.1", []byte(`{}`), jetstream.WithMsgID("m1")); err != nil || ack.Sequence != 1 {
		t.Fatalf("publisher's publish: %v %+v", err, ack)
	}
	if _, err := pjs.Stream(ctx, "EV"); err != nil {
		t.Fatalf("publisher reads the stream's info: %v", err)
	}
	if name, err := pjs.StreamNameBySubject(ctx, "ev.1"); err != nil || name != "EV" {
		t.Fatalf("publisher looks the stream up by subject: %q %v", name, err)
	}
	if _, err := pjs.Publish(ctx, "other.1", []byte(`{}`)); err == nil {
		t.Fatal("publisher published outside the stream's subjects")
	}
	// Each destructive request is refused: no reply comes, the stream stays.
	short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 300*time.Millisecond) }
	for name, try := range map[string]func(context.Context) error{
		"STREAM.DELETE": func(c context.Context) error { return pjs.DeleteStream(c, "EV") },
		"STREAM.PURGE": func(c context.Context) error {
			s, err := own.Stream(ctx, "EV") // the handle only; the purge is the publisher's
			if err != nil {
				return err
			}
			_, err = pub.RequestWithContext(c, "$JS.API.STREAM.PURGE."+s.CachedInfo().Config.Name, nil)
			return err
		},
		"CONSUMER.DELETE": func(c context.Context) error { return pjs.DeleteConsumer(c, "EV", "run") },
		"MSG.GET": func(c context.Context) error {
			_, err := pub.RequestWithContext(c, "$JS.API.STREAM.MSG.GET.EV", []byte(`{"seq":1}`))
			return err
		},
	} {
		c, cancel := short()
		if err := try(c); err == nil {
			t.Errorf("publisher's %s: accepted", name)
		}
		cancel()
	}
	// Neither the stream's subjects nor the replies to other clients'
	// requests (an admin's stream info, a replay's messages) are its to read.
	for _, subj := range []string{"ev.>", "_INBOX.>", ">", "_INBOX.x.>"} {
		if _, err := pub.SubscribeSync(subj); err == nil {
			if err := pub.Flush(); err == nil {
				select {
				case v := <-violations:
					if !strings.Contains(v.Error(), "Permissions Violation") {
						t.Errorf("subscribe to %s: %v, want a permissions violation", subj, v)
					}
				case <-time.After(5 * time.Second):
					t.Errorf("publisher's subscription to %s was not refused", subj)
				}
			}
		}
	}
	info, err := own.Stream(ctx, "EV")
	if err != nil || info.CachedInfo().State.Msgs != 1 {
		t.Fatalf("after the publisher's attempts: %v", err)
	}
	if _, err := own.Consumer(ctx, "EV", "run"); err != nil {
		t.Fatalf("the durable after the publisher's attempts: %v", err)
	}

	// The older publisher token works too (rotation); the admin may delete.
	if old, err := dial(t, n, nats.Token("pub-old"), nats.CustomInboxPrefix(PublisherInboxPrefix)); err != nil {
		t.Fatalf("second publisher token: %v", err)
	} else if ojs, _ := jetstream.New(old); ojs != nil {
		if _, err := ojs.Publish(ctx, "ev.2", []byte(`{}`)); err != nil {
			t.Fatalf("second publisher token's publish: %v", err)
		}
	}
	admin, err := dial(t, n, nats.Token("admin-secret"))
	if err != nil {
		t.Fatal(err)
	}
	ajs, _ := jetstream.New(admin)
	if err := ajs.DeleteStream(ctx, "EV"); err != nil {
		t.Fatalf("admin's delete: %v", err)
	}
}

// A listener that is not loopback needs client authentication, or says
// so; Insecure opts out. Loopback needs none.
func TestNonLoopbackListenNeedsAuthentication(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "nats")
	for _, tt := range []struct {
		cfg  Config
		want error
	}{
		{Config{Listen: "0.0.0.0:0"}, ErrUnauthenticated},
		{Config{Listen: ":0"}, ErrUnauthenticated},
		{Config{Listen: "[::]:0"}, ErrUnauthenticated},
		{Config{Listen: "192.0.2.1:4222"}, ErrUnauthenticated},
		{Config{Listen: "0.0.0.0:0", Insecure: true}, nil},
		{Config{Listen: "0.0.0.0:0", Token: "t"}, nil},
		{Config{Listen: "localhost:0"}, nil},
		{Config{Listen: "[::1]:0"}, nil},
		{Config{Listen: "127.0.0.2:0"}, nil},
		{Config{Publishers: PublishRole{Tokens: []string{"p"}}}, ErrInvalidConfig},
		{Config{Token: "t", Publishers: PublishRole{Tokens: []string{"t"}, Stream: "EV", Subjects: []string{"ev"}}}, ErrInvalidConfig},
		{Config{TLS: TLSConfig{Cert: "c.pem"}}, ErrTLSPair},
		{Config{Publishers: PublishRole{Tokens: []string{"p"}, Stream: "EV", Subjects: []string{">"}}}, ErrInvalidConfig},
		{Config{Publishers: PublishRole{Tokens: []string{"p"}, Stream: "EV", Subjects: []string{"*.x"}}}, ErrInvalidConfig},
		{Config{Publishers: PublishRole{Tokens: []string{"p"}, Stream: "EV", Subjects: []string{"$JS.API.>"}}}, ErrInvalidConfig},
		{Config{Publishers: PublishRole{Tokens: []string{"p"}, Stream: "EV", Subjects: []string{"_INBOX.x"}}}, ErrInvalidConfig},
		{Config{Publishers: PublishRole{Tokens: []string{"p"}, Stream: "EV", Subjects: []string{"_JETLEDGER.changelog.>"}}}, ErrInvalidConfig},
		{Config{Publishers: PublishRole{Tokens: []string{"p"}, Stream: "EV", Subjects: []string{"_JETLEDGER_INBOX.x"}}}, ErrInvalidConfig},
		{Config{Publishers: PublishRole{Tokens: []string{"p"}, Stream: "EV", Subjects: []string{"ev.a", "ev.*"}}}, ErrInvalidConfig},
		{Config{Publishers: PublishRole{Tokens: []string{"p"}, Stream: "EV", Subjects: []string{"ev.*.x", "ev.a.*"}}}, ErrInvalidConfig},
		{Config{Publishers: PublishRole{Tokens: []string{"p"}, Stream: "EV", Subjects: []string{"ev.a", "ev.a"}}}, ErrInvalidConfig},
		{Config{Publishers: PublishRole{Tokens: []string{"p"}, Stream: "EV", Subjects: []string{"ev.*", "orders.>"}}}, nil},
		{Config{Leaf: &LeafConfig{URLs: []string{"nats-leaf://h:7422"}, Domain: "s1"}, Publishers: PublishRole{Tokens: []string{"p"}, Stream: "EV", Subjects: []string{"ev"}}}, ErrInvalidConfig},
	} {
		tt.cfg.StoreDir = dir
		err := tt.cfg.Validate()
		if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("%+v: %v, want %v", tt.cfg, err, tt.want)
		}
		var ce *ConfigError
		if err != nil && !errors.As(err, &ce) {
			t.Errorf("%+v: %T, want *ConfigError", tt.cfg, err)
		}
	}
	err := Config{StoreDir: dir, Listen: "0.0.0.0:0", Names: map[string]string{"Listen": "--listen", "Token": "--embedded-token", "Insecure": "--insecure-listen"}}.Validate()
	for _, want := range []string{"--listen 0.0.0.0:0", "--embedded-token", "--insecure-listen"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %v does not name %s", err, want)
		}
	}
}

// TLS on the client listener: a plain client is refused, one that trusts
// the CA connects; with ClientCA, only a client with a certificate it
// signed. The program's own connection needs neither.
func TestTLSOnTheClientListener(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pki := writePKI(t, dir)
	for i, clientCA := range []string{"", pki.ca} {
		n, err := Start(t.Context(), Config{Listen: "127.0.0.1:0", StoreDir: filepath.Join(dir, "nats", strconv.Itoa(i)), Logger: quiet,
			TLS: TLSConfig{Cert: pki.serverCert, Key: pki.serverKey, ClientCA: clientCA}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.JetStream(); err != nil {
			t.Fatalf("own connection under TLS: %v", err)
		}
		if _, err := dial(t, n); err == nil {
			t.Errorf("client CA %q: a plain client was let in", clientCA)
		}
		_, err = dial(t, n, nats.RootCAs(pki.ca))
		if (clientCA == "") != (err == nil) {
			t.Errorf("client CA %q: a TLS client without a certificate: %v", clientCA, err)
		}
		if _, err := dial(t, n, nats.RootCAs(pki.ca), nats.ClientCert(pki.clientCert, pki.clientKey)); err != nil {
			t.Errorf("client CA %q: a client with a certificate: %v", clientCA, err)
		}
		n.Close()
	}
}

type pkiFiles struct{ ca, serverCert, serverKey, clientCert, clientKey string }

// writePKI writes a CA and a server (127.0.0.1) and client certificate it
// signed, as PEM files in dir.
func writePKI(t *testing.T, dir string) pkiFiles {
	t.Helper()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pemBlock(typ, der), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf := func(serial int64, usage x509.ExtKeyUsage) ([]byte, []byte) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "127.0.0.1"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		k, _ := x509.MarshalECPrivateKey(key)
		return der, k
	}
	sc, sk := leaf(2, x509.ExtKeyUsageServerAuth)
	cc, ck := leaf(3, x509.ExtKeyUsageClientAuth)
	return pkiFiles{ca: write("ca.pem", "CERTIFICATE", caDER), serverCert: write("server.pem", "CERTIFICATE", sc), serverKey: write("server-key.pem", "EC PRIVATE KEY", sk),
		clientCert: write("client.pem", "CERTIFICATE", cc), clientKey: write("client-key.pem", "EC PRIVATE KEY", ck)}
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
