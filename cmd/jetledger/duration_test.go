package main

import (
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
