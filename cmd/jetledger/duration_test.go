package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestDurationFlagsTakeDaysAndWeeks: every duration flag reads days and
// weeks as the nats CLI does, through the one parser, ackwait.ParseDuration.
func TestDurationFlagsTakeDaysAndWeeks(t *testing.T) {
	t.Parallel()
	root, err := parseArgs("run", "--subjects", "ev.>", "--max-age", "7d", "--retention", "30d", "--outbox-retention", "2w", "--prune-interval", "1d12h")
	if err != nil {
		t.Fatal(err)
	}
	day := 24 * time.Hour
	for _, tt := range []struct {
		flag      string
		got, want time.Duration
	}{
		{"--max-age", root.Run.MaxAge, 7 * day},
		{"--retention", root.Run.Retention, 30 * day},
		{"--outbox-retention", root.Run.OutboxRetention, 14 * day},
		{"--prune-interval", root.Run.PruneInterval, 36 * time.Hour},
	} {
		if tt.got != tt.want {
			t.Errorf("%s = %s, want %s", tt.flag, tt.got, tt.want)
		}
	}
	if code, _, stderr := runMain("run", "--subjects", "ev.>", "--max-age", "7x"); code != 2 || !strings.Contains(stderr, "--max-age") {
		t.Errorf("--max-age 7x: exit %d, %q; want a usage error naming the flag", code, stderr)
	}
}

// TestJSONLogDurationsAreStrings: a JSON log writes a duration as people
// read it ("19.1s"), not in nanoseconds, in a group too.
func TestJSONLogDurationsAreStrings(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log, err := logFlags{Level: "info", Format: "json"}.logger(&buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("x", "wait", 19100*time.Millisecond, slog.Group("g", "d", 36*time.Hour), "n", 3)
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	g, _ := rec["g"].(map[string]any)
	if rec["wait"] != "19.1s" || g["d"] != "36h0m0s" || rec["n"] != float64(3) {
		t.Fatalf("record %v: want wait 19.1s, g.d 36h0m0s, n 3", rec)
	}
	if d := logRecord(rec).duration("wait"); d != 19100*time.Millisecond {
		t.Fatalf("logRecord.duration(wait) = %s, want 19.1s", d)
	}
}
