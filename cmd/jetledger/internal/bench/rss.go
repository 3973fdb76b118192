package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/nats-io/nats.go/jetstream"
)

// runRSS runs `jetledger run` as a child over cfg.RSSMessages messages of a
// fresh stream and returns its rate and peak RSS (VmHWM) in MiB.
func runRSS(ctx context.Context, cfg Config) (float64, float64, error) {
	n := cfg.RSSMessages
	if _, err := publish(ctx, cfg.JS, "RSS", "rss.pay", n); err != nil {
		return 0, 0, err
	}
	schema := filepath.Join(cfg.Dir, "rss-schema.sql")
	if err := os.WriteFile(schema, []byte(Schema), 0o600); err != nil {
		return 0, 0, err
	}
	cmd := exec.CommandContext(ctx, cfg.Binary, "run", "--nats", cfg.URL, "--db", filepath.Join(cfg.Dir, "rss.db"), "--stream", "RSS",
		"--schema", schema, "--apply", Apply, "--batch", "500", "--log-level", "warn")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	defer stop(cmd)
	start := time.Now()
	peak := 0.0
	for !ackedThrough(ctx, cfg.JS, "RSS", uint64(n)) {
		if rss, err := vmHWM(cmd.Process.Pid); err == nil {
			peak = max(peak, rss)
		}
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	rate := float64(n) / time.Since(start).Seconds()
	if rss, err := vmHWM(cmd.Process.Pid); err == nil {
		peak = max(peak, rss)
	}
	return rate, peak, nil
}

// ackedThrough says whether run's durable on stream has acked through seq last.
func ackedThrough(ctx context.Context, js jetstream.JetStream, stream string, last uint64) bool {
	cons, err := js.Consumer(ctx, stream, consumer.DurableDefault)
	if err != nil {
		return false
	}
	info, err := cons.Info(ctx)
	return err == nil && info.AckFloor.Stream >= last
}

// vmHWM reads a process's peak resident set size from /proc, in MiB.
func vmHWM(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, err := strconv.ParseFloat(f[1], 64)
			return kb / 1024, err
		}
	}
	return 0, errors.New("no VmHWM in /proc status")
}

func selfPeakRSS() float64 {
	rss, err := vmHWM(os.Getpid())
	if err != nil {
		return 0
	}
	return rss
}
