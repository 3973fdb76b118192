package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// Edge and NATS-sink flags that cannot work together are usage errors
// before anything is created.
func TestEdgeFlagsUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "l.db")
	hub := []string{"run", "--db", db, "--hub-url", "nats-leaf://127.0.0.1:7422", "--edge-domain", "site1"}
	tests := []struct {
		args []string
		want string
	}{
		{append(hub, "--nats", "nats://127.0.0.1:4222", "--hub-stream", "O"), "--hub-url makes the embedded server a leaf node, and there is none"},
		{append(hub, "--hub-stream", "O", "--subjects", "o.>"), "with --hub-url, --stream sources --hub-stream and takes no --subjects"},
		{hub, "--hub-url needs --hub-stream"},
		{[]string{"run", "--db", db, "--hub-url", "nats-leaf://127.0.0.1:7422", "--hub-stream", "O"}, "--hub-url needs --edge-domain"},
		{append(hub, "--hub-stream", "O", "--edge-domain", "hub"), `--edge-domain "hub" is the hub's domain`},
		{append(hub, "--hub-stream", "O", "--edge-domain", "a.b"), `--edge-domain "a.b": want letters`},
		{append(hub, "--hub-stream", "O", "--hub-creds", filepath.Join(dir, "missing.creds")), "--hub-creds: stat"},
		{append(hub, "--hub-stream", "O", "--hub-tls-cert", db), "--hub-tls-cert and --hub-tls-key go together"},
		{[]string{"run", "--db", db, "--hub-url", "::nonsense", "--hub-stream", "O", "--edge-domain", "s"}, `--hub-url "::nonsense": want a URL`},
		// The URL may carry a password: an error shows it redacted.
		{[]string{"run", "--db", db, "--hub-url", "nats-leaf://u:s3cret@", "--hub-stream", "O", "--edge-domain", "s"}, `--hub-url "nats-leaf://xxxxx@": want a URL`},
		{[]string{"run", "--db", db, "--hub-stream", "O"}, "--hub-stream goes with --hub-url"},
		{[]string{"run", "--db", db, "--hub-start-seq", "5"}, "--hub-start-seq goes with --hub-url"},
		{[]string{"run", "--db", db, "--effects-stream", "OUT"}, "--effects-stream goes with --effects-subject"},
		{[]string{"run", "--db", db, "--effects-subject", "e.>"}, `--effects-subject "e.>": want one subject without wildcards`},
		{[]string{"run", "--db", db, "--effects-subject", "e.x", "--webhook", "http://127.0.0.1:1/"}, "--effects-subject and --webhook both name the sink"},
	}
	for _, tc := range tests {
		if msg := usageMessage(t, tc.args...); !strings.HasPrefix(msg, tc.want) {
			t.Errorf("%q: %q, want it to start with %q", tc.args, msg, tc.want)
		}
	}
	assertEmpty(t, dir, nil)
}
