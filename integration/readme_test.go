package integration

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
)

// readmeBlock returns the first ```sh block after heading in README.md.
func readmeBlock(tb testing.TB, heading string) string {
	tb.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		tb.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		tb.Fatalf("README.md has no heading %q", heading)
	}
	m := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(after)
	if m == nil {
		tb.Fatalf("no sh block under %q", heading)
	}
	return m[1]
}

// cutAt splits script before the first line that starts with prefix.
func cutAt(tb testing.TB, script, prefix string) (before, from string) {
	tb.Helper()
	i := strings.Index(script, "\n"+prefix)
	if i < 0 {
		tb.Fatalf("README quick start has no line starting %q:\n%s", prefix, script)
	}
	return script[:i+1], script[i+1:]
}

// The README's "Quick start: the binary", run as written, in a temporary
// directory, with the documented outcomes checked. Adapted only where a
// test must: the binary under test is copied in instead of built (the go
// build line), the ports come from a config file (JETLEDGER_CONFIG) so that
// tests can run side by side, and the script waits for the server to listen
// and for the consumer to apply before the commands that need that.
func TestReadmeQuickStart(t *testing.T) {
	t.Parallel()
	script := readmeBlock(t, "## Quick start: the binary")
	build, rest := cutAt(t, script, "cat > schema.sql")
	if !strings.HasPrefix(strings.TrimSpace(build), "go build -o jetledger ./cmd/jetledger") {
		t.Fatalf("the quick start no longer starts with go build:\n%s", build)
	}
	setup, rest := cutAt(t, rest, "./jetledger run ")
	run, rest := cutAt(t, rest, "# In another shell")
	publish, query := cutAt(t, rest, "sqlite3 ")
	run = strings.TrimSuffix(strings.TrimSpace(run), "&")

	dir := t.TempDir()
	port := freePort(t)
	config := filepath.Join(dir, "ports.toml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf("[run]\nlisten = \"127.0.0.1:%d\"\n[publish]\nnats = \"nats://127.0.0.1:%d\"\n", port, port)), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"JETLEDGER_CONFIG=" + config}
	sh := func(script string) string {
		t.Helper()
		p := startBinary(t, "bash", env, "-c", "set -eo pipefail; cd "+dir+"\n"+script)
		if code := p.wait(60 * time.Second); code != 0 {
			t.Fatalf("exit %d:\n%s\n%s", code, script, p.output())
		}
		return p.output()
	}
	sh(fmt.Sprintf("cp %q jetledger\n%s", binPath, setup))

	consumer := startBinary(t, "bash", env, "-c", "cd "+dir+"\nexec "+run)
	waitServing(t, consumer, fmt.Sprintf("127.0.0.1:%d", port))
	out := sh(publish)
	if m := regexp.MustCompile(`duplicate=(true|false)`).FindAllStringSubmatch(out, -1); len(m) != 3 ||
		m[0][1] != "false" || m[1][1] != "true" || m[2][1] != "false" {
		t.Fatalf("publishes: want duplicate=false, true, false:\n%s", out)
	}
	if !strings.Contains(out, "processed messages") {
		t.Fatalf("ledger stats printed no stats:\n%s", out)
	}

	db, err := sql.Open("sqlite", filepath.Join(dir, "payments.db")+"?_pragma=busy_timeout(10000)&_pragma=query_only(ON)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	consumertest.Eventually(t, 30*time.Second, "both events applied", func() bool {
		return count(t, db, `SELECT count(*) FROM balances`) == 2
	})
	if _, err := exec.LookPath("sqlite3"); err != nil {
		t.Logf("no sqlite3 on PATH: its line is checked through the driver instead")
	} else if rows := strings.Fields(sh(query)); len(rows) != 2 || rows[0] != "a1|5" || rows[1] != "a2|7" {
		t.Fatalf("%s: want a1|5 a2|7, got %q", query, rows)
	}
	var a1, a2 int
	if err := db.QueryRow(`SELECT (SELECT amount FROM balances WHERE account = 'a1'), (SELECT amount FROM balances WHERE account = 'a2')`).Scan(&a1, &a2); err != nil || a1 != 5 || a2 != 7 {
		t.Fatalf("balances a1=%d a2=%d (%v), want 5 and 7", a1, a2, err)
	}
	consumer.signal(syscall.SIGTERM)
	if code := consumer.wait(30 * time.Second); code != 0 {
		t.Fatalf("run: exit %d after SIGTERM\n%s", code, consumer.output())
	}
}
