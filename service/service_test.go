package service

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/node"
	"github.com/jetledger/jetledger/sqlhandler"
	"github.com/jetledger/jetledger/stream"
)

var quiet = slog.New(slog.DiscardHandler)

// testConfig is a run on an embedded node of its own, in dir.
func testConfig(tb testing.TB, dir string) Config {
	tb.Helper()
	return Config{DB: filepath.Join(dir, "l.db"), Node: node.Config{Listen: "127.0.0.1:0"}, Logger: quiet,
		Stream:   stream.Config{Name: "S", Subjects: []string{"s.>"}, Limits: stream.Limits{MaxAge: time.Hour}},
		Consumer: consumer.Config{Durable: "d", Plan: ackwait.Plan{Deadline: 5 * time.Second, BatchSize: 10}}}
}

// Each refusal names its step, so that a caller says it in its own terms;
// a refusal before the server answers leaves no database behind.
func TestRefusalsNameTheirStep(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		edit     func(*Config)
		wantStep Step
		wantErr  error
		noDB     bool
	}{
		{"bad SQL", func(c *Config) { c.SQL = sqlhandler.Config{Apply: "INSERT INTO nowhere VALUES (:data)"} }, StepSQL, sqlhandler.ErrApplyInvalid, true},
		{"no stream", func(c *Config) { c.Stream.Subjects, c.Stream.Limits = nil, stream.Limits{} }, StepStream, ErrNoStream, false},
		{"no effects stream", func(c *Config) { c.Effects = &Effects{Subject: "fx.x", Timeout: time.Second} }, StepEffects, ErrNoEffectsStream, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(t, t.TempDir())
			tt.edit(&cfg)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			err := Run(ctx, cfg)
			var st *StepError
			if !errors.As(err, &st) || st.Step != tt.wantStep || !errors.Is(err, tt.wantErr) {
				t.Fatalf("Run: %v (%#v), want step %s and %v", err, st, tt.wantStep, tt.wantErr)
			}
			if _, err := os.Stat(cfg.DB); tt.noDB && !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the ledger exists after the refusal (%v)", err)
			}
		})
	}
}

// RunPartitions refuses a stream without a partition mapping, before any
// partition runs.
func TestRunPartitionsRefusesAStreamNotPartitioned(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir())
	ran := false
	err := RunPartitions(t.Context(), cfg, Partitions{Run: func(context.Context, Partition) error { ran = true; return nil }})
	var pc *PartitionCountError
	if !errors.As(err, &pc) || pc.Have != 0 || !errors.Is(err, ErrNotPartitioned) || ran {
		t.Fatalf("RunPartitions: %v (ran %t), want ErrNotPartitioned", err, ran)
	}
}

// A run with metrics and the pruner serves /healthz, and on ctx's end
// returns nil with every goroutine it started stopped (goleak, TestMain).
func TestRunServesHealthAndStopsCleanly(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	summaries := make(chan struct{}, 1)
	cfg.Metrics, cfg.SummaryInterval, cfg.Logger = l, 10*time.Millisecond, slog.New(onMessage{"summary", summaries})
	cfg.Prune = Prune{Interval: 10 * time.Millisecond, Retention: time.Hour}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	url := "http://" + l.Addr().String() + "/healthz"
	consumertest.Eventually(t, 30*time.Second, "/healthz 200", func() bool {
		resp, err := http.Get(url) //nolint:noctx // a test's probe
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	select {
	case <-summaries: // consuming: the start is over
	case err := <-done:
		t.Fatalf("Run returned before its first summary: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after ctx's end: %v", err)
	}
}

// onMessage is a slog handler that signals on c each record whose message
// is msg, and drops every record.
type onMessage struct {
	msg string
	c   chan struct{}
}

func (h onMessage) Enabled(context.Context, slog.Level) bool { return true }
func (h onMessage) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		select {
		case h.c <- struct{}{}:
		default:
		}
	}
	return nil
}
func (h onMessage) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h onMessage) WithGroup(string) slog.Handler      { return h }
