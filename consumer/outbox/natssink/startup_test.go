package natssink_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/natssink"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// New waits for a server that cannot answer yet (run starting during a
// cluster's election, issue 14) and finds the stream once it does; a
// subject no stream captures is an answer, not waited for.
func TestNewWaitsForTheServer(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, &server.Options{StoreDir: dir}, time.Minute, jetstream.StreamConfig{})
	port := e.srv.Addr().(*net.TCPAddr).Port
	e.srv.Shutdown()
	e.srv.WaitForShutdown()

	log := &consumertest.WaitLog{}
	done := make(chan error, 1)
	var s *natssink.Sink
	go func() {
		var err error
		s, err = natssink.New(t.Context(), e.js, e.nc, natssink.Config{Subject: "effects.site1", Logger: slog.New(log)})
		done <- err
	}()
	consumertest.Eventually(t, 30*time.Second, "New to say it waits", func() bool { return log.Waits() > 0 })
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

	quiet := &consumertest.WaitLog{}
	// Bounded, so that an answer waited for fails the test, not hangs it.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := natssink.New(ctx, e.js, e.nc, natssink.Config{Subject: "nowhere.x", Logger: slog.New(quiet)}); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("New for a subject no stream captures: %v, want ErrStreamNotFound", err)
	}
	if quiet.Waits() != 0 {
		t.Fatalf("waited for an answer:\n%s", quiet)
	}
}
