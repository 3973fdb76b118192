package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/stream"
	"github.com/nats-io/nats.go/jetstream"
)

// The stream limit flags are refused before anything is done when they are
// negative, not sizes, given without --subjects (they apply only to the
// stream it creates) or shorter than the duplicate window (which the
// server would refuse).
func TestStreamLimitFlagsUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "l.db")
	tests := []struct {
		args []string
		want string // the start of the message
	}{
		{[]string{"--subjects", "ev.>", "--max-age", "-1h"}, "--max-age -1h0m0s: must not be negative"},
		{[]string{"--subjects", "ev.>", "--max-msgs", "-5"}, "--max-msgs -5: want a positive number"},
		{[]string{"--subjects", "ev.>", "--max-bytes", "lots"}, "--max-bytes"},
		{[]string{"--max-age", "1h"}, "--max-age applies to the stream run creates (with --subjects or --hub-url)"},
		{[]string{"--max-bytes", "1GiB"}, "--max-bytes applies to the stream run creates (with --subjects or --hub-url)"},
		{[]string{"--max-msgs", "10"}, "--max-msgs applies to the stream run creates (with --subjects or --hub-url)"},
		{[]string{"--replicas", "3"}, "--replicas applies to the stream run creates (with --subjects or --hub-url)"},
		{[]string{"--subjects", "ev.>", "--replicas", "7"}, "--replicas 7: want 1 to 5"},
		{[]string{"--subjects", "ev.>", "--max-age", "1m"}, "--max-age 1m0s is shorter than the duplicate window 2m0s"},
		{[]string{"--subjects", "ev.>", "--duplicate-window", "10m", "--max-age", "5m"}, "--max-age 5m0s is shorter than the duplicate window 10m0s"},
	}
	for _, tt := range tests {
		args := append([]string{"run", "--db", db}, tt.args...)
		if got := usageMessage(t, args...); !strings.HasPrefix(got, tt.want) {
			t.Errorf("%q: %q, want it to start with %q", args, got, tt.want)
		}
	}
	assertEmpty(t, dir, nil)
	// Within the window set by --memory-limit (30s), a minute is enough.
	if root, err := parseArgs("run", "--subjects", "ev.>", "--memory-limit", "96MiB", "--max-age", "1m"); err != nil {
		t.Fatal(err)
	} else if err := root.Run.consumeFlags.validate(); err != nil {
		t.Fatalf("--max-age 1m with --memory-limit: %v", err)
	}
}

// startUntilBound runs `run` with args until it is consuming (it logs
// so once it has bound its durable), stops it, and returns its log.
func startUntilBound(t *testing.T, args ...string) []logRecord {
	t.Helper()
	p := startCommand(t, append(args, "--log-format", "json")...)
	consumertest.Eventually(t, 30*time.Second, "run is consuming", func() bool {
		p.failIfExited(t)
		return len(withMsg(p.records(), "consuming")) > 0
	})
	if code := p.stop(t); code != exitOK {
		t.Fatalf("%q: exit %d\n%s", args, code, p.stderr)
	}
	return p.records()
}

// run --subjects creates the stream with the limits given, a description
// and the metadata that names jetledger and its version; a later run with
// other limits warns, naming both values and the nats command, and leaves
// the stream as it is.
func TestRunCreatesTheStreamWithLimits(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	db := filepath.Join(t.TempDir(), "l.db")
	args := []string{"run", "--nats", srv.ClientURL(), "--db", db, "--stream", "EV", "--subjects", "ev.>", "--max-bytes", "1MiB", "--max-msgs", "1000"}

	logs := startUntilBound(t, append(args, "--max-age", "1h")...)
	s, err := js.Stream(context.Background(), "EV")
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	if cfg.MaxAge != time.Hour || cfg.MaxBytes != 1<<20 || cfg.MaxMsgs != 1000 {
		t.Fatalf("stream limits: max age %s, bytes %d, msgs %d", cfg.MaxAge, cfg.MaxBytes, cfg.MaxMsgs)
	}
	if cfg.Metadata[consumer.MetadataCreatedBy] != "jetledger" || cfg.Metadata[consumer.MetadataVersion] != version() || cfg.Description == "" {
		t.Fatalf("stream metadata %v, description %q", cfg.Metadata, cfg.Description)
	}
	if w := withMsg(logs, stream.MsgUnlimited); len(w) != 0 || len(withMsg(logs, stream.MsgLimitsDiffer)) != 0 {
		t.Fatalf("warned about the limits of a stream with limits: %v", w)
	}

	logs = startUntilBound(t, append(args, "--max-age", "2h")...)
	w := withMsg(logs, stream.MsgLimitsDiffer)
	if len(w) != 1 || w[0]["level"] != "WARN" || w[0].duration("max_age") != time.Hour || w[0].duration("max_age_flag") != 2*time.Hour ||
		w[0]["edit"] != "nats stream edit EV --max-age 2h0m0s" || w[0]["max_bytes"] != nil || w[0]["max_msgs"] != nil {
		t.Fatalf("other limits warned as %v; want one warning of max age 1h against 2h", w)
	}
	if s, err = js.Stream(context.Background(), "EV"); err != nil || s.CachedInfo().Config.MaxAge != time.Hour {
		t.Fatalf("the existing stream was edited: %v, %v", s.CachedInfo().Config.MaxAge, err)
	}
}

// run warns once at start when the stream it consumes keeps every message
// (no age, size or count limit), since the ledger can then never be
// pruned; not when the stream drops messages by itself.
func TestRunWarnsOfAStreamWithoutLimits(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "WORK", Subjects: []string{"work.>"}, Retention: jetstream.WorkQueuePolicy})
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "PERSUBJECT", Subjects: []string{"ps.>"}, MaxMsgsPerSubject: 10})
	dir := t.TempDir()
	tests := []struct {
		stream string
		args   []string
		warn   bool
	}{
		{stream: "OPEN", args: []string{"--subjects", "open.>"}, warn: true},
		{stream: "AGED", args: []string{"--subjects", "aged.>", "--max-age", "24h"}},
		{stream: "WORK"},
		{stream: "PERSUBJECT"},
	}
	for _, tt := range tests {
		args := append([]string{"run", "--nats", srv.ClientURL(), "--db", filepath.Join(dir, tt.stream+".db"), "--stream", tt.stream}, tt.args...)
		w := withMsg(startUntilBound(t, args...), stream.MsgUnlimited)
		switch {
		case !tt.warn && len(w) != 0:
			t.Errorf("%s: warned %v", tt.stream, w)
		case tt.warn && (len(w) != 1 || w[0]["level"] != "WARN" || w[0]["edit"] != "nats stream edit "+tt.stream+" --max-age 7d"):
			t.Errorf("%s: warned %v, want one warning with the command", tt.stream, w)
		}
	}
}
