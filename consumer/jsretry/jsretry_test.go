package jsretry_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/jsretry"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fast makes a wait cost milliseconds; restored when the test ends.
func fast(t *testing.T) {
	t.Cleanup(jsretry.SetTimings(ackwait.Backoff{Base: 10 * time.Millisecond, Max: 50 * time.Millisecond}, 200*time.Millisecond, time.Hour))
}

// records keeps the log records Call makes, by level.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return nil
}

// with counts the records at level that carry key.
func (r *records) with(level slog.Level, key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rec := range r.recs {
		rec.Attrs(func(a slog.Attr) bool {
			if rec.Level == level && a.Key == key {
				n++
			}
			return true
		})
	}
	return n
}

func TestTransient(t *testing.T) {
	api := func(code jetstream.ErrorCode) error {
		return fmt.Errorf("look up: %w", &jetstream.APIError{Code: 503, ErrorCode: code})
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"a try's timeout", fmt.Errorf("x: %w", context.DeadlineExceeded), true},
		{"nats timeout", nats.ErrTimeout, true},
		{"no responders", nats.ErrNoResponders, true},
		{"reconnecting", nats.ErrConnectionReconnecting, true},
		{"JetStream system temporarily unavailable", api(10008), true},
		{"cluster can not handle request", api(10009), true},
		{"stream offline", api(10118), true},
		{"consumer offline", api(10119), true},
		{"stream not found", fmt.Errorf("x: %w", jetstream.ErrStreamNotFound), false},
		{"consumer not found", jetstream.ErrConsumerNotFound, false},
		{"name in use", jetstream.ErrStreamNameAlreadyInUse, false},
		{"consumer create refused", jetstream.ErrConsumerCreate, false},
		{"JetStream not enabled", jetstream.ErrJetStreamNotEnabled, false},
		{"permissions", nats.ErrPermissionViolation, false},
		{"cancelled", context.Canceled, false},
		{"closed", nats.ErrConnectionClosed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := jsretry.Transient(tc.err); got != tc.want {
				t.Fatalf("Transient(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// A definite answer from a real server is returned at the first try,
// without a warning.
func TestCallReturnsAnAnswerAtOnce(t *testing.T) {
	fast(t)
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	log := &records{}
	var tries atomic.Int32
	// Bounded, so that a retried answer fails the test instead of hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := jsretry.Call(ctx, slog.New(log), "look up stream NONE", func(ctx context.Context) (jetstream.Stream, error) {
		tries.Add(1)
		return js.Stream(ctx, "NONE")
	})
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("err = %v, want ErrStreamNotFound", err)
	}
	if n := tries.Load(); n != 1 {
		t.Fatalf("%d tries, want 1: a definite answer was retried", n)
	}
	if n := log.with(slog.LevelWarn, jsretry.KeyWaitingFor); n != 0 {
		t.Fatalf("%d waiting warnings for a definite answer", n)
	}
}

// A server without JetStream: its API has no responders. Call keeps
// trying, warns once, and returns ctx's end with the count of tries.
func TestCallWaitsUntilCtxEnds(t *testing.T) {
	fast(t)
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	defer func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	}()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	_, js := consumertest.Connect(t, srv)
	if _, err := js.Stream(context.Background(), "EV"); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("a server without JetStream: %v, want no responders", err)
	}
	log := &records{}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var tries atomic.Int32
	_, err = jsretry.Call(ctx, slog.New(log), "look up stream EV", func(ctx context.Context) (jetstream.Stream, error) {
		tries.Add(1)
		return js.Stream(ctx, "EV")
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the caller's deadline", err)
	}
	if n := tries.Load(); n < 3 {
		t.Fatalf("%d tries in 500ms, want several", n)
	}
	if n := log.with(slog.LevelWarn, jsretry.KeyWaitingFor); n != 1 {
		t.Fatalf("%d waiting warnings over %d tries, want 1", n, tries.Load())
	}
}

// A server restarting: the client's tries time out while it reconnects;
// once the server is back, Call returns its answer and says so at info.
func TestCallRidesOutARestart(t *testing.T) {
	fast(t)
	dir := t.TempDir()
	srv := consumertest.RunServerWithOptions(t, &server.Options{StoreDir: dir})
	port := srv.Addr().(*net.TCPAddr).Port // the same port after the restart
	_, js := consumertest.Connect(t, srv, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.>"}})
	srv.Shutdown()
	srv.WaitForShutdown()

	log := &records{}
	var tries atomic.Int32
	done := make(chan error, 1)
	go func() {
		_, err := jsretry.Call(context.Background(), slog.New(log), "look up stream EV", func(ctx context.Context) (jetstream.Stream, error) {
			tries.Add(1)
			return js.Stream(ctx, "EV")
		})
		done <- err
	}()
	consumertest.Eventually(t, 10*time.Second, "a few failed tries", func() bool { return tries.Load() >= 3 })
	consumertest.RunServerWithOptions(t, &server.Options{Port: port, StoreDir: dir})
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("after the restart: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Call did not return within 10s of the restart")
	}
	if n := log.with(slog.LevelWarn, jsretry.KeyWaitingFor); n != 1 {
		t.Fatalf("%d waiting warnings, want 1", n)
	}
	if n := log.with(slog.LevelInfo, jsretry.KeyAnswered); n != 1 {
		t.Fatalf("%d answered records, want 1", n)
	}
	t.Logf("answered after %d tries", tries.Load())
}

// Stopped while waiting: the error wraps context.Canceled, so a program
// tells a stop from a failure.
func TestCallStopsWithCtx(t *testing.T) {
	fast(t)
	ctx, cancel := context.WithCancel(context.Background())
	var tries atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- jsretry.Do(ctx, slog.New(&records{}), "wait", func(context.Context) error {
			tries.Add(1)
			return nats.ErrNoResponders
		})
	}()
	consumertest.Eventually(t, 10*time.Second, "a few tries", func() bool { return tries.Load() >= 2 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}
