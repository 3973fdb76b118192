package integration

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/nats-io/nats.go/jetstream"
)

// An existing consumer whose AckWait is below the plan: run refuses to start
// (exit 1) naming both durations, and check reports the same.
func TestRunRefusesShortAckWait(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Minute)
	if _, err := w.js.CreateConsumer(context.Background(), stream, jetstream.ConsumerConfig{
		Durable: "jetledger", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 3 * time.Second,
	}); err != nil {
		t.Fatal(err)
	}
	need := ackwait.Plan{Deadline: 10 * time.Second, BatchSize: 100}.AckWait().String()

	run := start(t, nil, "run", "--nats", w.srv.ClientURL(), "--db", w.db, "--stream", stream, "--deadline", "10s", "--log-format", "json")
	if code := run.wait(30 * time.Second); code != 1 {
		t.Fatalf("run exit code %d, want 1; output:\n%s", code, run.output())
	}
	check := start(t, nil, "check", "--nats", w.srv.ClientURL(), "--stream", stream, "--deadline", "10s")
	if code := check.wait(30 * time.Second); code != 1 {
		t.Fatalf("check exit code %d, want 1; output:\n%s", code, check.output())
	}
	for name, out := range map[string]string{"run": run.output(), "check": check.output()} {
		for _, s := range []string{"AckWait is 3s", "at least " + need, "--wait " + need} {
			if !strings.Contains(out, s) {
				t.Errorf("%s output lacks %q:\n%s", name, s, out)
			}
		}
	}
	// With a plan the consumer satisfies, check passes.
	ok := start(t, nil, "check", "--nats", w.srv.ClientURL(), "--stream", stream, "--deadline", "500ms",
		"--buffer-wait", "100ms", "--commit-margin", "100ms", "--ack-margin", "100ms")
	if code := ok.wait(30 * time.Second); code != 0 {
		t.Fatalf("check exit code %d, want 0; output:\n%s", code, ok.output())
	}
}

// Usage errors exit 2 with the bad input named.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "unknown flag", args: []string{"run", "--no-such-flag"}, want: "no-such-flag"},
		{name: "unknown command", args: []string{"frobnicate"}, want: "frobnicate"},
		{name: "bad duration", args: []string{"run", "--deadline", "soon"}, want: "deadline"},
		// The embedded server's port is taken: the SQL is checked first.
		{name: "apply does not compile", args: []string{"run", "--db", "DB", "--listen", "BUSY", "--apply", "INSERT INTO nowhere VALUES (:data)"}, want: "--apply does not compile"},
		{name: "publish without subject", args: []string{"publish", "--data", "{}"}, want: "--subject is required"},
		{name: "publish bad json", args: []string{"publish", "--subject", "x", "--data", "{"}, want: "not valid JSON"},
		{name: "ledger unknown subcommand", args: []string{"ledger", "vacuum"}, want: "vacuum"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string(nil), tt.args...)
			for i, a := range args {
				switch a {
				case "DB":
					args[i] = t.TempDir() + "/l.db"
				case "BUSY":
					l, err := net.Listen("tcp", "127.0.0.1:0")
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { l.Close() })
					args[i] = l.Addr().String()
				}
			}
			p := start(t, nil, args...)
			if code := p.wait(30 * time.Second); code != 2 {
				t.Fatalf("exit code %d, want 2; output:\n%s", code, p.output())
			}
			if !strings.Contains(p.output(), tt.want) {
				t.Fatalf("output lacks %q:\n%s", tt.want, p.output())
			}
		})
	}
}

func TestHelpExitsZero(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"run", "publish", "check", "demo", "ledger"} {
		p := start(t, nil, cmd, "--help")
		if code := p.wait(30 * time.Second); code != 0 {
			t.Fatalf("%s --help: exit %d", cmd, code)
		}
		if !strings.Contains(p.output(), "Usage: jetledger "+cmd) {
			t.Fatalf("%s --help output:\n%s", cmd, p.output())
		}
	}
}

// SIGTERM while run is still starting (here: in a slow --schema) is a clean
// stop, exit 0, not a usage error. The soak found it exiting 2.
func TestSIGTERMDuringStartup(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Minute)
	slow := filepath.Join(w.dir, "slow.sql")
	if err := os.WriteFile(slow, []byte(balanceTable+`
		CREATE TABLE IF NOT EXISTS slow AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000)
		SELECT count(*) AS n FROM c;`), 0o600); err != nil {
		t.Fatal(err)
	}
	// The schema runs first on a scratch copy of the ledger in TMPDIR
	// (the early SQL check, which gives up after checkBudget), then on the
	// ledger: SIGTERM in the first, or in the second on a slow machine.
	tmp := filepath.Join(w.dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	p := start(t, []string{"TMPDIR=" + tmp}, "run", "--nats", w.srv.ClientURL(), "--db", w.db, "--stream", stream, "--schema", slow, "--log-format", "json")
	consumertest.Eventually(t, 30*time.Second, "scratch ledger created", func() bool {
		entries, err := os.ReadDir(tmp)
		return err == nil && len(entries) > 0
	})
	p.signal(syscall.SIGTERM)
	if code := p.wait(30 * time.Second); code != 0 || !strings.Contains(p.output(), "stopped while starting") {
		t.Fatalf("exit %d\n%s", code, p.output())
	}
	if entries, err := os.ReadDir(tmp); err != nil || len(entries) > 0 {
		t.Fatalf("the scratch ledger is left behind: %v %v", entries, err)
	}
}
