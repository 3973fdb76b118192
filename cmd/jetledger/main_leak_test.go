package main

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Commands run servers, consumers and dispatchers in-process in these tests:
// none may outlive its test. A developer's own nats CLI setup (a selected
// context, NATS_URL) must not reach them either.
func TestMain(m *testing.M) {
	for _, k := range []string{"NATS_URL", "NATS_CONTEXT", "NATS_CREDS", "NATS_NKEY", "NATS_USER", "NATS_PASSWORD", "NATS_CERT", "NATS_KEY", "NATS_CA"} {
		os.Unsetenv(k)
	}
	dir, err := os.MkdirTemp("", "jetledger-xdg-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_CONFIG_HOME", dir)
	code := m.Run()
	os.RemoveAll(dir)
	if err := goleak.Find(); code == 0 && err != nil {
		fmt.Fprintln(os.Stderr, "goroutines left after the tests:", err)
		code = 1
	}
	os.Exit(code)
}
