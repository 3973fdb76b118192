package natssink_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/jsretry"
	"github.com/jetledger/jetledger/consumer/outbox/natssink"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// waits keeps the names of the calls a logger says it waits for.
type waits struct {
	mu    sync.Mutex
	calls []string
}

func (w *waits) Enabled(context.Context, slog.Level) bool { return true }
func (w *waits) WithAttrs([]slog.Attr) slog.Handler       { return w }
func (w *waits) WithGroup(string) slog.Handler            { return w }
func (w *waits) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == jsretry.KeyWaitingFor {
			w.mu.Lock()
			w.calls = append(w.calls, a.Value.String())
			w.mu.Unlock()
		}
		return true
	})
	return nil
}

func (w *waits) n() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.calls)
}

// New waits for a server that cannot answer yet (run starting during a
// cluster's election, issue 14) and finds the stream once it does; a
// subject no stream captures is an answer, not waited for.
func TestNewWaitsForTheServer(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, &server.Options{StoreDir: dir}, time.Minute, jetstream.StreamConfig{})
	port := e.srv.Addr().(*net.TCPAddr).Port
	e.srv.Shutdown()
	e.srv.WaitForShutdown()

	log := &waits{}
	done := make(chan error, 1)
	var s *natssink.Sink
	go func() {
		var err error
		s, err = natssink.New(t.Context(), e.js, e.nc, natssink.Config{Subject: "effects.site1", Logger: slog.New(log)})
		done <- err
	}()
	consumertest.Eventually(t, 30*time.Second, "New to say it waits", func() bool { return log.n() > 0 })
	consumertest.RunServerWithOptions(t, &server.Options{Port: port, StoreDir: dir})
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("New after the outage: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("New did not return within 30s of the server's return")
	}
	if s.Stream() != "EFF" || s.KeyWindow() != time.Minute {
		t.Fatalf("stream %s, window %s; want EFF, 1m", s.Stream(), s.KeyWindow())
	}

	quiet := &waits{}
	// Bounded, so that an answer waited for fails the test, not hangs it.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := natssink.New(ctx, e.js, e.nc, natssink.Config{Subject: "nowhere.x", Logger: slog.New(quiet)}); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("New for a subject no stream captures: %v, want ErrStreamNotFound", err)
	}
	if quiet.n() != 0 {
		t.Fatalf("waited for an answer: %v", quiet.calls)
	}
}
