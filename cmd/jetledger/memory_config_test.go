package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --memory-limit the other ways every flag is given (cli.go: every flag has
// JETLEDGER_<NAME> and a --config key): the environment, a TOML string, a
// TOML integer (a number of bytes), and an empty or negative value, which
// are usage errors as on the command line. Not parallel: t.Setenv.
func TestMemoryLimitFromEnvAndConfig(t *testing.T) {
	dir := t.TempDir()
	cfgStr := filepath.Join(dir, "s.toml")
	cfgInt := filepath.Join(dir, "i.toml")
	if err := os.WriteFile(cfgStr, []byte("[run]\nmemory-limit = \"96MiB\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgInt, []byte("[run]\nmemory-limit = 100663296\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want byteSize
	}{
		{"toml string", []string{"--config", cfgStr, "run"}, 96 << 20},
		{"toml integer", []string{"--config", cfgInt, "run"}, 96 << 20},
		{"flag over file", []string{"--config", cfgStr, "run", "--memory-limit", "128MiB"}, 128 << 20},
		{"zero", []string{"run", "--memory-limit", "0"}, 0},
	} {
		root, err := parseArgs(tc.args...)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := root.Run.MemoryLimit; got != tc.want {
			t.Errorf("%s: memory limit %d, want %d", tc.name, got, tc.want)
		}
	}
	t.Setenv("JETLEDGER_MEMORY_LIMIT", "200MB")
	root, err := parseArgs("run")
	if err != nil || root.Run.MemoryLimit != 200_000_000 {
		t.Errorf("JETLEDGER_MEMORY_LIMIT=200MB: %d, %v", root.Run.MemoryLimit, err)
	}
	os.Unsetenv("JETLEDGER_MEMORY_LIMIT") // t.Setenv restores it
	db := filepath.Join(dir, "l.db")
	for _, args := range [][]string{
		{"run", "--db", db, "--memory-limit="},
		{"run", "--db", db, "--memory-limit", "-96MiB"},
		{"run", "--db", db, "--memory-limit", "79MiB"}, // one below node.MemoryLimitMin
	} {
		if code, _, stderr := runMain(args...); code != exitUsage || !strings.Contains(stderr, "memory-limit") {
			t.Errorf("%v: exit %d, want %d naming the flag; stderr %s", args, code, exitUsage, stderr)
		}
	}
}
