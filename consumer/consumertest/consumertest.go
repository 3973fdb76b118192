// Package consumertest runs real NATS JetStream servers for tests, in the
// manner of net/http/httptest: an embedded nats-server per test, its store
// in the test's temporary directory, shut down by t.Cleanup.
package consumertest

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/jsretry"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// RunServer starts an embedded JetStream server on a free loopback port.
func RunServer(tb testing.TB) *server.Server {
	tb.Helper()
	return RunServerWithOptions(tb, &server.Options{})
}

// RunServerWithOptions starts an embedded JetStream server from opts, filling
// in a free loopback port and a temporary store when they are unset.
func RunServerWithOptions(tb testing.TB, opts *server.Options) *server.Server {
	tb.Helper()
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.Port == 0 {
		opts.Port = -1
	}
	if opts.StoreDir == "" {
		opts.StoreDir = tb.TempDir()
	}
	opts.JetStream = true
	opts.NoSigs = true
	opts.NoLog = true
	s, err := server.NewServer(opts)
	if err != nil {
		tb.Fatalf("consumertest: new server: %v", err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		tb.Fatal("consumertest: server not ready within 10s")
	}
	tb.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// Connect connects to s and returns the connection and its JetStream API;
// the connection is closed by tb.Cleanup.
func Connect(tb testing.TB, s *server.Server, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	tb.Helper()
	nc, err := nats.Connect(s.ClientURL(), opts...)
	if err != nil {
		tb.Fatalf("consumertest: connect: %v", err)
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatalf("consumertest: jetstream: %v", err)
	}
	return nc, js
}

// CreateStream creates a file-backed stream with the given subjects.
func CreateStream(tb testing.TB, js jetstream.JetStream, cfg jetstream.StreamConfig) jetstream.Stream {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := jsretry.CreateStream(ctx, js, cfg) // a stream just deleted may be made again
	if err != nil {
		tb.Fatalf("consumertest: create stream %s: %v", cfg.Name, err)
	}
	return st
}

// Eventually polls cond every few milliseconds until it is true, failing the
// test with msg when timeout passes first. It is how tests wait: never a sleep.
func Eventually(tb testing.TB, timeout time.Duration, msg string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", timeout, msg)
		}
		time.Sleep(5 * time.Millisecond) // poll interval, not synchronisation
	}
}

// RunConsumer runs c until the test ends, then stops it and fails the test
// if Run returned an error.
func RunConsumer(tb testing.TB, c *consumer.Consumer) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("Run: %v", err)
		}
	})
}

// ConfBlock is the one ```conf block of the Markdown page at path: the
// nats-server configuration the page gives, for a test to run as written.
func ConfBlock(t testing.TB, path string) string {
	t.Helper()
	page, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(page), "```conf\n")
	conf, _, closed := strings.Cut(rest, "```")
	if !ok || !closed || strings.Contains(rest[len(conf):], "```conf") {
		t.Fatalf("%s: want one ```conf block", path)
	}
	return conf
}
