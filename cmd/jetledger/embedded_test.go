package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/alecthomas/kong"
)

// The embedded store is the system of record: by default it syncs every
// write before the publish is acked; --sync-interval trades that for speed.
// The server's own JetStream config is read back, not the flag.
func TestEmbeddedSyncInterval(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		args         []string
		wantAlways   bool
		wantInterval time.Duration
		wantErr      bool
	}{
		{name: "default", wantAlways: true, wantInterval: 2 * time.Minute},
		{name: "always", args: []string{"--sync-interval", "always"}, wantAlways: true, wantInterval: 2 * time.Minute},
		{name: "2m", args: []string{"--sync-interval", "2m"}, wantInterval: 2 * time.Minute},
		{name: "10s", args: []string{"--sync-interval", "10s"}, wantInterval: 10 * time.Second},
		{name: "not a duration", args: []string{"--sync-interval", "soon"}, wantErr: true},
		{name: "zero", args: []string{"--sync-interval", "0s"}, wantErr: true},
		{name: "negative", args: []string{"--sync-interval", "-1m"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root, err := parseArgs(append([]string{"run"}, tt.args...)...)
			if tt.wantErr {
				if !errors.As(err, new(*kong.ParseError)) {
					t.Fatalf("parse %v: err %v, want a parse error (exit 2)", tt.args, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sync := root.Run.Embedded.SyncInterval
			srv, err := startEmbedded(embeddedConfig{Listen: "127.0.0.1:0", StoreDir: filepath.Join(t.TempDir(), "nats"), Sync: sync.interval}, quiet)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(srv.Close)
			cfg := srv.srv.JetStreamConfig()
			if cfg == nil {
				t.Fatal("embedded server has no JetStream")
			}
			if cfg.SyncAlways != tt.wantAlways || cfg.SyncInterval != tt.wantInterval {
				t.Fatalf("JetStream SyncAlways %t, SyncInterval %s; want %t, %s",
					cfg.SyncAlways, cfg.SyncInterval, tt.wantAlways, tt.wantInterval)
			}
		})
	}
}

// --sync-interval says how the embedded server syncs; with --nats there is
// none, and the flag is refused rather than silently ignored.
func TestRunSyncIntervalUsage(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "l.db")
	for _, args := range [][]string{
		{"run", "--db", db, "--sync-interval", "soon"},
		{"run", "--db", db, "--nats", "nats://127.0.0.1:1", "--sync-interval", "2m"},
	} {
		var stdout, stderr bytes.Buffer
		if code := mainExit(context.Background(), args, &stdout, &stderr); code != exitUsage {
			t.Fatalf("%v: exit %d, want %d; stderr %s", args, code, exitUsage, stderr.String())
		}
	}
}

// One embedded server per store: a second is refused with the owner named,
// before it starts a server; the lock goes with Close, and a lock file left
// behind by a dead owner refuses nobody.
func TestEmbeddedStoreLock(t *testing.T) {
	t.Parallel()
	if !storeLockSupported {
		t.Skip("no flock on this OS")
	}
	dir := filepath.Join(t.TempDir(), "nats")
	start := func() (*embedded, error) {
		return startEmbedded(embeddedConfig{Listen: "127.0.0.1:0", StoreDir: dir}, quiet)
	}
	first, err := start()
	if err != nil {
		t.Fatal(err)
	}
	second, err := start()
	var inUse *storeInUseError
	if !errors.As(err, &inUse) {
		if second != nil {
			second.Close()
		}
		t.Fatalf("second server on one store: err %v, want *storeInUseError", err)
	}
	if inUse.PID != os.Getpid() || inUse.URL != first.URL() || inUse.Dir != dir {
		t.Fatalf("refusal names pid %d, url %q, dir %q; want %d, %q, %q", inUse.PID, inUse.URL, inUse.Dir, os.Getpid(), first.URL(), dir)
	}
	first.Close()

	again, err := start()
	if err != nil {
		t.Fatalf("after Close: %v", err)
	}
	again.Close()

	// What a SIGKILLed owner leaves: the file with its pid, no lock.
	if err := os.WriteFile(filepath.Join(dir, storeLockFile), []byte("999999\nnats://127.0.0.1:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stale, err := start()
	if err != nil {
		t.Fatalf("stale lock file refused the start: %v", err)
	}
	stale.Close()
}
