package main

import (
	"bufio"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
)

// The program, built and run: the console answers under /ops/ (sign-in
// first, then the sites page) and the program's own route beside it.
func TestTheProgramMountsTheConsole(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	dir := t.TempDir()
	bin, users := filepath.Join(dir, "console"), filepath.Join(dir, "users")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	if err := os.WriteFile(users, []byte("ada operator ada-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), bin, "-nats", srv.ClientURL(), "-users", users, "-listen", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the program said nothing: %v", err)
	}
	base := strings.TrimSpace(strings.TrimPrefix(line, "serving "))
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: time.Minute}
	resp, err := c.PostForm(base+"signin", url.Values{"name": {"ada"}, "secret": {"ada-secret"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/ops/" {
		t.Fatalf("signed in: %d at %s, want 200 at /ops/", resp.StatusCode, resp.Request.URL)
	}
	own, err := c.Get(strings.TrimSuffix(base, "ops/"))
	if err != nil {
		t.Fatal(err)
	}
	own.Body.Close()
	if own.StatusCode != http.StatusOK {
		t.Fatalf("the program's own page: %d", own.StatusCode)
	}
}
