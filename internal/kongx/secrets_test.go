package kongx_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alecthomas/kong"

	"github.com/jetledger/jetledger/internal/kongx"
)

type secretCLI struct {
	Token     string            `name:"token"`
	TokenFile string            `name:"token-file" secret:"token"`
	Keys      kongx.SecretLines `name:"keys-file"`
}

// parseSecrets parses args and reads the secrets as an AfterApply hook.
func parseSecrets(t *testing.T, args ...string) (*secretCLI, map[string]bool, error) {
	t.Helper()
	var c secretCLI
	opts, err := kongx.Options(kongx.Config{Name: "app"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := kong.New(&c, append(opts, kong.Writers(io.Discard, io.Discard))...)
	if err != nil {
		t.Fatal(err)
	}
	kctx, err := p.Parse(args)
	if err != nil {
		return nil, nil, err
	}
	set, err := kongx.ReadSecrets(kctx)
	return &c, set, err
}

// A secret from its file, from systemd's credentials directory, or from
// the flag; both flag and file refused; an empty file refused.
func TestReadSecrets(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tok")
	os.WriteFile(file, []byte("from-file\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "token"), []byte("from-credentials"), 0o600)
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	keys := filepath.Join(dir, "keys")
	os.WriteFile(keys, []byte("# site A's publishers\r\na\r\n\n  b  \n"), 0o600)
	spaced := filepath.Join(dir, "spaced")
	os.WriteFile(spaced, []byte("a b\n"), 0o600)
	crlf := filepath.Join(dir, "crlf")
	os.WriteFile(crlf, []byte("new\r\nold\r\n"), 0o600)

	c, set, err := parseSecrets(t, "--token-file", file, "--keys-file", keys)
	if err != nil || c.Token != "from-file" || !set["token"] || strings.Join(c.Keys.Values, ",") != "a,b" {
		t.Fatalf("from files: %+v %v %v", c, set, err)
	}
	if c, _, err := parseSecrets(t, "--token-file", crlf); err != nil || c.Token != "new\nold" {
		t.Fatalf("CRLF lines: %q %v", c.Token, err)
	}
	if _, _, err := parseSecrets(t, "--keys-file", spaced); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("a key with a space: %v", err)
	}
	if _, _, err := parseSecrets(t, "--token", "x", "--token-file", file); err == nil || !strings.Contains(err.Error(), "--token and --token-file") {
		t.Fatalf("both: %v", err)
	}
	if _, _, err := parseSecrets(t, "--token-file", empty); !errors.Is(err, kongx.ErrEmptySecret) {
		t.Fatalf("empty file: %v", err)
	}
	if _, _, err := parseSecrets(t, "--keys-file", empty); !errors.Is(err, kongx.ErrEmptySecret) {
		t.Fatalf("empty keys file: %v", err)
	}
	t.Setenv(kongx.CredentialsDirEnv, dir)
	if c, set, err := parseSecrets(t); err != nil || c.Token != "from-credentials" || !set["token"] {
		t.Fatalf("from $CREDENTIALS_DIRECTORY: %+v %v %v", c, set, err)
	}
	if c, _, err := parseSecrets(t, "--token", "given"); err != nil || c.Token != "given" {
		t.Fatalf("given beside $CREDENTIALS_DIRECTORY: %+v %v", c, err)
	}
	for _, content := range []string{"", "\n"} {
		creds := t.TempDir()
		if content != "" {
			os.WriteFile(filepath.Join(creds, "token"), []byte(content), 0o600)
		}
		t.Setenv(kongx.CredentialsDirEnv, creds)
		if c, set, err := parseSecrets(t); err != nil || c.Token != "" || set["token"] {
			t.Fatalf("credential absent or empty (%q): %+v %v %v", content, c, set, err)
		}
	}
}
