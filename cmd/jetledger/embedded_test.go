package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/alecthomas/kong"
	"github.com/jetledger/jetledger/node"
	"github.com/jetledger/jetledger/service"
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
			srv, err := startEmbedded(t.Context(), node.Config{Listen: "127.0.0.1:0", StoreDir: filepath.Join(t.TempDir(), "nats"), SyncInterval: sync.interval, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(srv.Close)
			cfg := srv.Server().JetStreamConfig()
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

// startEmbedded starts the embedded server (node.Start), saying its
// refusals in the command line's terms (service.Config.Say), as run's
// start through the service does.
func startEmbedded(ctx context.Context, cfg node.Config) (*node.Node, error) {
	n, err := node.Start(ctx, cfg)
	if err != nil {
		return nil, configUsage(service.Config{Node: node.Config{Listen: cfg.Listen}, Names: runNames}.Say(err))
	}
	return n, nil
}
