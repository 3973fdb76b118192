package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// edgePruning are run's flags of the paced edge run: the stream drops
// messages after a minute and the ledger prunes their rows every 20 s, so
// that a long run at a steady rate reaches a steady state, as a site does.
// The window is set, since one of 2m (the default without --memory-limit)
// is refused as longer than the age.
var edgePruning = []string{"--max-age", "1m", "--duplicate-window", "30s", "--retention", "30s", "--prune-interval", "20s"}

// edgeRSS runs the edge default as a user would: `jetledger run` with its
// embedded server (and --memory-limit cfg.EdgeMemoryLimit), while
// `jetledger publish` sends it cfg.RSSMessages lines, cfg.RSSRate a second
// if set (with edgePruning). It returns the rate from the first publish to
// the last commit and run's peak RSS in MiB, at the end and at half time.
func edgeRSS(ctx context.Context, cfg Config) (rate, peak, half float64, err error) {
	n := cfg.RSSMessages
	url, err := freeURL()
	if err != nil {
		return 0, 0, 0, err
	}
	args := []string{"--listen", url[len("nats://"):], "--stream", "EDGE", "--subjects", "edge.pay"}
	if cfg.SyncInterval != "" {
		args = append(args, "--sync-interval", cfg.SyncInterval)
	}
	if cfg.EdgeMemoryLimit != "" {
		args = append(args, "--memory-limit", cfg.EdgeMemoryLimit)
	}
	if cfg.RSSRate > 0 {
		args = append(args, edgePruning...)
	}
	run, err := startRun(ctx, cfg, "edge", args...)
	if err != nil {
		return 0, 0, 0, err
	}
	defer stop(run)
	js, closeConn, err := connectWhenUp(ctx, url, run)
	if err != nil {
		return 0, 0, 0, err
	}
	defer closeConn()
	pub := exec.CommandContext(ctx, cfg.Binary, "publish", "--nats", url, "--subject", "edge.pay", "--id-field", "n", "--log-level", "warn")
	pub.Stderr = os.Stderr
	in, err := pub.StdinPipe()
	if err != nil {
		return 0, 0, 0, err
	}
	start := time.Now()
	if err := pub.Start(); err != nil {
		return 0, 0, 0, err
	}
	go writeLines(in, n, cfg.PayloadBytes, cfg.RSSRate)
	var pubErr error
	exited := make(chan struct{})
	go func() { pubErr = pub.Wait(); close(exited) }()
	defer func() {
		pub.Process.Signal(syscall.SIGTERM) //nolint:errcheck // it may have exited
		<-exited
	}()
	peak, half, err = samplePeak(ctx, run.Process.Pid, func() (bool, error) {
		select {
		case <-exited:
			if pubErr != nil {
				return false, fmt.Errorf("jetledger publish: %w", pubErr)
			}
			return ackedThrough(ctx, js, "EDGE", uint64(n)), nil
		default:
			return false, nil // still publishing
		}
	})
	if err != nil {
		return 0, 0, 0, err
	}
	return float64(n) / time.Since(start).Seconds(), peak, half, nil
}

// writeLines writes n payload lines, as the other runs publish them; rate
// a second if it is above 0, each 10 ms's lines flushed together.
func writeLines(w io.WriteCloser, n, size, rate int) {
	defer w.Close()
	bw := bufio.NewWriterSize(w, 64<<10)
	rng := rand.New(rand.NewPCG(1, 1))
	start := time.Now()
	for i := 0; i < n; i++ {
		if _, err := bw.Write(append(payload(rng, i, size), '\n')); err != nil {
			return // the publisher died; its exit status says why
		}
		if rate > 0 && (i+1)%max(1, rate/100) == 0 {
			if bw.Flush() != nil {
				return
			}
			due := start.Add(time.Duration(i+1) * time.Second / time.Duration(rate))
			time.Sleep(time.Until(due)) // pacing the offered load, not synchronising
		}
	}
	bw.Flush() //nolint:errcheck // as above
}

// connectWhenUp connects to the child's embedded server once it has
// created the stream, or fails if the child exits first.
func connectWhenUp(ctx context.Context, url string, child *exec.Cmd) (jetstream.JetStream, func(), error) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if child.Process.Signal(syscall.Signal(0)) != nil { // signal 0: is it alive (Linux only, as the RSS figures)
			return nil, nil, errors.New("jetledger run exited while starting")
		}
		if nc, err := nats.Connect(url, nats.Timeout(time.Second)); err == nil {
			js, err := jetstream.New(nc)
			if err == nil {
				if _, err = js.Consumer(ctx, "EDGE", consumer.DurableDefault); err == nil {
					return js, nc.Close, nil
				}
			}
			nc.Close()
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil, nil, errors.New("jetledger run did not start within a minute")
}

// freeURL returns a loopback URL with a port that was free just now.
func freeURL() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return "nats://" + l.Addr().String(), nil
}

// stop ends a child with SIGTERM and waits for it.
func stop(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck // it may have exited
	cmd.Wait()                          //nolint:errcheck // exit status is not the measurement
}
