package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
)

// jetledger console refuses, before connecting, what would open a door: a
// listen that is not loopback without --users-file, a users file others
// can read, half of HTTPS. Each is bad usage (exit 2) naming the flag.
func TestTheConsoleCommandRefusesOpenDoors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	open := filepath.Join(dir, "open")
	if err := os.WriteFile(open, []byte("ada operator s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "0.0.0.0:8080"}, "--listen"},
		{[]string{"--users-file", open}, "readable by every user"},
		{[]string{"--https-cert", open}, "--https-key"},
	} {
		var stderr bytes.Buffer
		args := append([]string{"console", "--nats", "nats://127.0.0.1:1"}, c.args...)
		if code := mainExit(context.Background(), args, &bytes.Buffer{}, &stderr); code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%q: exit %d, want 2 naming %q\n%s", c.args, code, c.want, stderr.String())
		}
	}
}

// jetledger console serves the console, with sign-in, over the NATS it is
// given, under --prefix, and stops at SIGINT with exit 0.
func TestTheConsoleCommandServes(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	users := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(users, []byte("ada operator ada-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startCommand(t, "console", "--nats", srv.ClientURL(), "--listen", "127.0.0.1:0", "--users-file", users,
		"--prefix", "/ops", "--log-format", "json")
	var base string
	consumertest.Eventually(t, time.Minute, "the console serving", func() bool {
		p.failIfExited(t)
		r, ok := p.record(func(r map[string]any) bool { return r["msg"] == "console: serving" })
		base, _ = r["url"].(string)
		return ok
	})
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: time.Minute}
	resp, err := c.PostForm(base+"signin", url.Values{"name": {"ada"}, "secret": {"ada-secret"}})
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	body.ReadFrom(resp.Body) //nolint:errcheck // checked below
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(body.String(), "Sites and partitions") || !strings.HasSuffix(base, "/ops/") {
		t.Fatalf("signed in at %s: %d\n%s", base, resp.StatusCode, body.String())
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("stopped: exit %d\n%s", code, p.stderr)
	}
}
