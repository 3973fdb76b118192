package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// run with its secrets in files: the admin's token and the publishers'
// are in no command line (/proc/PID/cmdline); a publisher's token
// publishes through `jetledger publish --nats-token-file` and is refused
// the stream's deletion, which the admin's token may do; a --listen that
// is not loopback without a token is refused before anything starts.
func TestRolesAndSecretFilesOfRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, v string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	adminFile, pubFile := write("admin", "admin-s3cret\n"), write("publishers", "pub-one\npub-two\n")
	pubTokenFile := write("pub-token", "pub-two\n")

	if out, code := cli(t, "run", "--db", filepath.Join(dir, "x.db"), "--stream", "SEC", "--subjects", "sec.>", "--listen", "0.0.0.0:0"); code != 2 ||
		!strings.Contains(out, "--embedded-token") || !strings.Contains(out, "--insecure-listen") {
		t.Fatalf("non-loopback --listen without a token: exit %d\n%s", code, out)
	}

	db := filepath.Join(dir, "l.db")
	port := freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	run := start(t, nil, "run", "--db", db, "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--embedded-token-file", adminFile,
		"--publisher-token-file", pubFile, "--stream", "SEC", "--subjects", "sec.>", "--log-format", "json")
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(run.cmd.Process.Pid) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"admin-s3cret", "pub-one", "pub-two"} {
		if strings.Contains(string(cmdline), secret) {
			t.Fatalf("%s is in run's command line", secret)
		}
	}
	consumertest.Eventually(t, 30*time.Second, "published with the publisher's token", func() bool {
		_, code := cli(t, "publish", "--nats", url, "--nats-token-file", pubTokenFile, "--inbox-prefix", "_INBOX.publishers", "--subject", "sec.x", "--data", `{"a":1}`, "--id", "p1")
		return code == 0
	})
	consumertest.Eventually(t, 30*time.Second, "applied", func() bool {
		o, c := cli(t, "ledger", "stats", "--db", db, "--json")
		return c == 0 && strings.Contains(o, `"processed": 1`)
	})

	// The publisher may not delete a durable; the admin may (its own
	// here: run's stays, for run to stop cleanly).
	for _, tt := range []struct {
		token, durable string
		delete         bool
	}{{"pub-one", "jetledger", false}, {"admin-s3cret", "other", true}} {
		nc, err := nats.Connect(url, nats.Token(tt.token), nats.MaxReconnects(0))
		if err != nil {
			t.Fatal(err)
		}
		js, _ := jetstream.New(nc)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second) // a refusal is no reply: the wait
		if tt.delete {
			if _, err := js.CreateOrUpdateConsumer(ctx, "SEC", jetstream.ConsumerConfig{Durable: tt.durable}); err != nil {
				t.Fatal(err)
			}
		}
		err = js.DeleteConsumer(ctx, "SEC", tt.durable)
		cancel()
		nc.Close()
		if (err == nil) != tt.delete {
			t.Fatalf("%s deleting durable %s: %v", tt.token, tt.durable, err)
		}
	}
	run.signal(syscall.SIGTERM)
	if code := run.wait(30 * time.Second); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, tail(run.output()))
	}
}

// --metrics on an address that is not loopback is warned of, and with
// --metrics-tls-cert/-key it is served with TLS only: a client that
// trusts the CA reads /healthz, a plain HTTP one gets no report.
func TestMetricsWithTLSAndTheirWarning(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	caFile, srvTLS := testTLS(t, dir)
	cert, key := filepath.Join(dir, "metrics.pem"), filepath.Join(dir, "metrics-key.pem")
	k, err := x509.MarshalECPrivateKey(srvTLS.Certificates[0].PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	if os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvTLS.Certificates[0].Certificate[0]}), 0o600) != nil ||
		os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: k}), 0o600) != nil {
		t.Fatal("write the metrics certificate")
	}
	port := freePort(t)
	run := start(t, nil, "run", "--db", filepath.Join(dir, "l.db"), "--listen", fmt.Sprintf("127.0.0.1:%d", freePort(t)), "--stream", "MT", "--subjects", "mt.>",
		"--metrics", fmt.Sprintf("0.0.0.0:%d", port), "--metrics-tls-cert", cert, "--metrics-tls-key", key, "--log-format", "json")
	pool := x509.NewCertPool()
	ca, _ := os.ReadFile(caFile)
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	var body []byte
	consumertest.Eventually(t, 30*time.Second, "/healthz over TLS", func() bool {
		resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d/healthz", port))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ = io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK
	})
	if !strings.Contains(string(body), `"database":"ok"`) {
		t.Fatalf("/healthz: %s", body)
	}
	healthURL := fmt.Sprintf("https://127.0.0.1:%d/healthz", port)
	if out, code := cli(t, "health", "--url", healthURL, "--tls-ca", caFile); code != 0 || !strings.Contains(out, "database") {
		t.Fatalf("jetledger health: exit %d\n%s", code, out)
	}
	if out, code := cli(t, "health", "--url", healthURL); code != 1 {
		t.Fatalf("jetledger health without the CA: exit %d\n%s", code, out)
	}
	if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port)); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), "healthy") {
			t.Fatalf("plain HTTP was served the report: %s", b)
		}
	}
	run.signal(syscall.SIGTERM)
	if code := run.wait(30 * time.Second); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, tail(run.output()))
	}
	if !strings.Contains(run.output(), "served to anyone who can reach this address") {
		t.Fatalf("no warning for --metrics on 0.0.0.0:\n%s", tail(run.output()))
	}
}

// A webhook URL with a password and a query token, at a port where no one
// listens: neither secret is in any line run logs, nor in the error the
// outbox stores for the failed sends (outbox list --json).
func TestWebhookURLSecretsAreRedacted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "l.db")
	port := freePort(t)
	hook := fmt.Sprintf("http://user:hookpw@127.0.0.1:%d/hook/T000/B000?token=querysecret", freePort(t))
	run := start(t, nil, "run", "--db", db, "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--stream", "RD", "--subjects", "rd.>",
		"--webhook", hook, "--webhook-delete-url", hook+"&id={external_id}", "--outbox-max-attempts", "2", "--log-format", "json", "--log-level", "debug")
	consumertest.Eventually(t, 30*time.Second, "published", func() bool {
		_, code := cli(t, "publish", "--nats", fmt.Sprintf("nats://127.0.0.1:%d", port), "--subject", "rd.x", "--data", `{"a":1}`, "--id", "r1")
		return code == 0
	})
	var rows string
	consumertest.Eventually(t, 60*time.Second, "the send failed and its error stored", func() bool {
		o, c := cli(t, "outbox", "list", "--db", db, "--json")
		rows = o
		return c == 0 && strings.Contains(o, "connection refused")
	})
	run.signal(syscall.SIGTERM)
	if code := run.wait(60 * time.Second); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, tail(run.output()))
	}
	for _, secret := range []string{"hookpw", "querysecret"} {
		for i, line := range strings.Split(run.output(), "\n") {
			if strings.Contains(line, secret) {
				t.Errorf("run's log line %d holds %s: %s", i+1, secret, line)
			}
		}
		if strings.Contains(rows, secret) {
			t.Errorf("outbox list holds %s:\n%s", secret, rows)
		}
	}
	if !strings.Contains(run.output(), "REDACTED@127.0.0.1") {
		t.Errorf("the webhook is not named, redacted, in run's log:\n%s", tail(run.output()))
	}
}

// Partitions behind the admin's token: each partition's run connects to
// the shared server as its own client, so the token is not refused as
// one given with --nats; both partitions apply.
func TestPartitionsWithTheAdminToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	admin := filepath.Join(dir, "admin")
	if err := os.WriteFile(admin, []byte("adm\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "p.db")
	port := freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	run := start(t, nil, "run", "--db", db, "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--embedded-token-file", admin,
		"--stream", "PT", "--subjects", "pt.*", "--partitions", "2", "--log-format", "json")
	for i := range 4 {
		consumertest.Eventually(t, 30*time.Second, "published", func() bool {
			_, code := cli(t, "publish", "--nats", url, "--nats-token-file", admin, "--subject", fmt.Sprintf("pt.k%d", i), "--data", `{"a":1}`, "--id", fmt.Sprintf("m%d", i))
			return code == 0
		})
	}
	consumertest.Eventually(t, 30*time.Second, "every message applied in one partition or the other", func() bool {
		total := 0
		for p := range 2 {
			o, c := cli(t, "ledger", "stats", "--db", filepath.Join(dir, fmt.Sprintf("p-p%d.db", p)), "--json")
			var n int
			if i := strings.Index(o, `"processed": `); c == 0 && i >= 0 {
				fmt.Sscanf(o[i+len(`"processed": `):], "%d", &n)
			}
			total += n
		}
		return total == 4
	})
	run.signal(syscall.SIGTERM)
	if code := run.wait(30 * time.Second); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, tail(run.output()))
	}
}

// Issue 43: run's --operator-token-file and --viewer-token-file. Through
// the embedded server's port, a viewer reads the run's admin API and its
// action gets no answer; an operator's action is answered (404: no such
// conflict, so it reached the API) and it cannot delete the run's durable.
func TestOperatorAndViewerTokensOfRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, v string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	port := freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	run := start(t, nil, "run", "--db", filepath.Join(dir, "l.db"), "--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--embedded-token-file", write("admin", "admin-s3cret\n"), "--operator-token-file", write("operators", "op-1\n"),
		"--viewer-token-file", write("viewers", "view-1\n"), "--stream", "OPS", "--subjects", "ops.>", "--log-format", "json")
	addr := admin.Address{Stream: "OPS", Durable: "jetledger"}
	dial := func(token, inbox string) *nats.Conn {
		var nc *nats.Conn
		consumertest.Eventually(t, 30*time.Second, "the embedded server taking "+token, func() bool {
			var err error
			nc, err = nats.Connect(url, nats.Token(token), nats.CustomInboxPrefix(inbox), nats.MaxReconnects(0))
			return err == nil
		})
		t.Cleanup(nc.Close)
		return nc
	}
	viewer, operator := dial("view-1", "_INBOX.viewers"), dial("op-1", "_INBOX.operators")
	var st admin.Status
	consumertest.Eventually(t, 30*time.Second, "a viewer reading the run's status", func() bool {
		return callAdmin(viewer, addr, "status", nil, &st, 3*time.Second) == nil
	})
	ack := admin.ByID{ID: 404, Who: "ops"}
	if err := callAdmin(viewer, addr, "conflicts.ack", ack, nil, 3*time.Second); !errors.Is(err, admin.ErrNoRun) {
		t.Fatalf("a viewer's action: %v, want no answer (its publish is not permitted)", err)
	}
	var e *admin.Error
	if err := callAdmin(operator, addr, "conflicts.ack", ack, nil, 10*time.Second); !errors.As(err, &e) || e.Code != admin.CodeNotFound {
		t.Fatalf("an operator's action on no conflict: %v, want %s from the API", err, admin.CodeNotFound)
	}
	js, err := jetstream.New(operator)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second) // a refusal is no reply: the wait
	defer cancel()
	if err := js.DeleteConsumer(ctx, "OPS", "jetledger"); err == nil {
		t.Fatal("an operator deleted the run's durable")
	}
	run.signal(syscall.SIGTERM)
	if code := run.wait(30 * time.Second); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, tail(run.output()))
	}
}
