package bench

import (
	"cmp"
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
	if _, _, err := publish(ctx, cfg.JS, "RSS", "rss.pay", n, cfg.PayloadBytes, cmp.Or(cfg.IDKind, IDULID)); err != nil {
		return 0, 0, err
	}
	cmd, err := startRun(ctx, cfg, "rss", "--nats", cfg.URL, "--stream", "RSS")
	if err != nil {
		return 0, 0, err
	}
	defer stop(cmd)
	start := time.Now()
	peak, _, err := samplePeak(ctx, cmd.Process.Pid, func() (bool, error) {
		return ackedThrough(ctx, cfg.JS, "RSS", uint64(n)), nil
	})
	if err != nil {
		return 0, 0, err
	}
	return float64(n) / time.Since(start).Seconds(), peak, nil
}

// startRun starts `jetledger run` as a child with the balance handler, its
// database and schema named after name in cfg.Dir, and args.
func startRun(ctx context.Context, cfg Config, name string, args ...string) (*exec.Cmd, error) {
	schema := filepath.Join(cfg.Dir, name+"-schema.sql")
	if err := os.WriteFile(schema, []byte(Schema), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, cfg.Binary, append([]string{"run", "--db", filepath.Join(cfg.Dir, name+".db"),
		"--schema", schema, "--apply", Apply, "--batch", "500", "--log-level", "warn"}, args...)...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd, nil
}

// samplePeak samples pid's peak RSS every 200 ms until done says so (or
// fails), and once more then. It returns the peak, and the peak at half
// the time it took: growth after that is the second half's.
func samplePeak(ctx context.Context, pid int, done func() (bool, error)) (peak, half float64, err error) {
	start := time.Now()
	type rise struct { // when the peak rose, and to what
		at   time.Duration
		peak float64
	}
	var rises []rise
	for {
		if rss, err := vmHWM(pid); err == nil && rss > peak {
			peak = rss
			rises = append(rises, rise{time.Since(start), rss})
		}
		finished, err := done()
		if err != nil {
			return 0, 0, err
		}
		if finished {
			if rss, err := vmHWM(pid); err == nil {
				peak = max(peak, rss)
			}
			mid := time.Since(start) / 2
			for _, r := range rises {
				if r.at <= mid {
					half = r.peak
				}
			}
			return peak, half, nil
		}
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
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
