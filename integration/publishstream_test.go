package integration

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
)

// `tail -f events.jsonl | jetledger publish`: a line is published, and
// applied by run, while the input is still open; a line that is not JSON
// then stops the publisher with exit 2, naming the line, after the ack of
// the one before it.
func TestPublishStreamsStandardInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "l.db")
	port := freePort(t)
	run := start(t, nil, "run", "--db", db, "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--stream", "PS", "--subjects", "ps.>")
	consumertest.Eventually(t, 30*time.Second, "run up", func() bool {
		_, code := cli(t, "publish", "--nats", fmt.Sprintf("nats://127.0.0.1:%d", port), "--subject", "ps.x", "--data", `{"warm":1}`, "--id", "w")
		return code == 0
	})
	cmd := exec.Command(binPath, "publish", "--nats", fmt.Sprintf("nats://127.0.0.1:%d", port), "--subject", "ps.x", "--id-field", "id")
	cmd.Env = testEnviron()
	var mu sync.Mutex
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = lockedBuffer{&mu, &out}, lockedBuffer{&mu, &out}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() }) //nolint:errcheck // done by then, or stuck
	if _, err := io.WriteString(stdin, `{"id":"s1","a":1}`+"\n"); err != nil {
		t.Fatal(err)
	}
	consumertest.Eventually(t, 30*time.Second, "the first line applied while the input is open", func() bool {
		o, c := cli(t, "ledger", "stats", "--db", db, "--json")
		return c == 0 && strings.Contains(o, `"processed": 2`)
	})
	if _, err := io.WriteString(stdin, "{not json\n"); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	mu.Lock()
	got := out.String()
	mu.Unlock()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(got, "id=s1") || !strings.Contains(got, "line 2") {
		t.Fatalf("publish after a bad line: %v\n%s", err, got)
	}
	run.signal(syscall.SIGTERM)
	if code := run.wait(30 * time.Second); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, tail(run.output()))
	}
}
