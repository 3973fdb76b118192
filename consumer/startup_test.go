package consumer_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// outageJS shuts the server down (a real outage: the client reconnects,
// its requests go unanswered) at the first call of the kind named, before
// making it.
type outageJS struct {
	jetstream.JetStream
	srv  *server.Server
	at   string // "Stream", "Consumer" or "UpdateConsumer"
	once *sync.Once
}

func (o outageJS) off(kind string) {
	if kind == o.at {
		o.once.Do(func() {
			o.srv.Shutdown()
			o.srv.WaitForShutdown()
		})
	}
}

func (o outageJS) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	o.off("Stream")
	return o.JetStream.Stream(ctx, name)
}

func (o outageJS) Consumer(ctx context.Context, stream, name string) (jetstream.Consumer, error) {
	o.off("Consumer")
	return o.JetStream.Consumer(ctx, stream, name)
}

func (o outageJS) UpdateConsumer(ctx context.Context, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	o.off("UpdateConsumer")
	return o.JetStream.UpdateConsumer(ctx, stream, cfg)
}

// New waits for a server that cannot answer, at the stream's lookup as at
// the durable's, saying what it waits for, and binds once it answers: a
// start during a cluster's election is not fatal (issue 14).
func TestNewWaitsForJetStream(t *testing.T) {
	for _, tc := range []struct {
		at, what string
	}{
		{"Stream", "look up stream EV"},
		{"Consumer", "bind EV/d"},
		{"UpdateConsumer", "bind EV/d"}, // raising the AckWait of a durable made for a smaller plan
	} {
		t.Run(tc.at, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			srv := consumertest.RunServerWithOptions(t, &server.Options{StoreDir: dir})
			port := srv.Addr().(*net.TCPAddr).Port // the same after the restart
			e := newEnvOn(t, srv)
			plan := ackwait.Plan{Deadline: time.Second, BatchSize: 10}
			if tc.at == "UpdateConsumer" {
				if _, err := consumer.New(context.Background(), e.js, e.st, consumer.Config{Stream: "EV", Durable: "d", Handler: record, Plan: plan}); err != nil {
					t.Fatal(err)
				}
				plan.Deadline = 5 * time.Second
			}
			log := &consumertest.WaitLog{}
			js := outageJS{JetStream: e.js, srv: srv, at: tc.at, once: &sync.Once{}}
			done := make(chan error, 1)
			go func() {
				_, err := consumer.New(context.Background(), js, e.st, consumer.Config{Stream: "EV", Durable: "d", Handler: record,
					Plan: plan, Logger: slog.New(log)})
				done <- err
			}()
			consumertest.Eventually(t, 30*time.Second, "New to say it waits for "+tc.what, func() bool { return log.WaitedFor(tc.what) })
			consumertest.RunServerWithOptions(t, &server.Options{Port: port, StoreDir: dir})
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("New after the outage: %v\nlog:\n%s", err, log)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("New did not return within 30s of JetStream's return")
			}
			if got := e.consumerConfig(t, "d").AckWait; got != plan.AckWait() {
				t.Fatalf("durable's AckWait %s after New, want the plan's %s", got, plan.AckWait())
			}
		})
	}
}

// A definite answer is not waited for: a missing stream fails New at once.
func TestNewDoesNotWaitForAnAnswer(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	log := &consumertest.WaitLog{}
	_, err := consumer.New(ctx, e.js, e.st, consumer.Config{Stream: "NONE", Handler: record, Logger: slog.New(log)})
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("err = %v, want ErrStreamNotFound", err)
	}
	if log.Waits() != 0 {
		t.Fatalf("waited:\n%s", log)
	}
}

// newEnvOn is newEnv on a server the test holds, with a client that
// reconnects when it restarts.
func newEnvOn(t testing.TB, srv *server.Server) *env {
	t.Helper()
	nc, js := consumertest.Connect(t, srv, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	return envWith(t, nc, js)
}

// nats-server answers the first update of a consumer after its leader took
// over (here a restart; in a cluster an election) with what it held then:
// New must not take that answer for the server's state and refuse the
// durable it has just raised.
func TestNewRaisesTheDurableAfterAServerRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := consumertest.RunServerWithOptions(t, &server.Options{StoreDir: dir})
	port := srv.Addr().(*net.TCPAddr).Port
	e := newEnvOn(t, srv)
	plan := ackwait.Plan{Deadline: time.Second, BatchSize: 10}
	if _, err := consumer.New(context.Background(), e.js, e.st, consumer.Config{Stream: "EV", Durable: "d", Handler: record, Plan: plan}); err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	srv.WaitForShutdown()
	consumertest.RunServerWithOptions(t, &server.Options{Port: port, StoreDir: dir})
	plan.Deadline = 5 * time.Second
	if _, err := consumer.New(context.Background(), e.js, e.st, consumer.Config{Stream: "EV", Durable: "d", Handler: record, Plan: plan}); err != nil {
		t.Fatalf("New with a longer plan after the server's restart: %v", err)
	}
	if got := e.consumerConfig(t, "d").AckWait; got != plan.AckWait() {
		t.Fatalf("durable's AckWait %s, want %s", got, plan.AckWait())
	}
}
