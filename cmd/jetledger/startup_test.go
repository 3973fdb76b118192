package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/jsretry"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/stream"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// outage is a server the test shuts down and starts again on the same port
// and store, with a client that reconnects meanwhile.
type outage struct {
	t    *testing.T
	dir  string
	port int
	srv  *server.Server
	js   jetstream.JetStream
}

func newOutage(t *testing.T) *outage {
	t.Helper()
	o := &outage{t: t, dir: t.TempDir()}
	o.srv = consumertest.RunServerWithOptions(t, &server.Options{StoreDir: o.dir})
	o.port = o.srv.Addr().(*net.TCPAddr).Port
	nc, err := nats.Connect(o.srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if o.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	return o
}

func (o *outage) down() {
	o.srv.Shutdown()
	o.srv.WaitForShutdown()
}

func (o *outage) up() {
	o.srv = consumertest.RunServerWithOptions(o.t, &server.Options{Port: o.port, StoreDir: o.dir})
}

// during runs call while the server is down, brings it back once the log
// says call waits for what, and returns call's error.
func (o *outage) during(what string, log *consumertest.WaitLog, call func() error) error {
	o.t.Helper()
	o.down()
	done := make(chan error, 1)
	go func() { done <- call() }()
	consumertest.Eventually(o.t, 30*time.Second, "a wait for "+what, func() bool { return log.WaitedFor(what) })
	o.up()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		o.t.Fatalf("%s did not return within 30s of the server's return", what)
		return nil
	}
}

// run's start-up calls wait for a server that cannot answer (a cluster
// electing a leader, a restart) until it does, and take a definite answer
// at once. Issue 14.
func TestStartupWaitsForTheServer(t *testing.T) {
	t.Parallel()
	o := newOutage(t)
	ctx := context.Background()
	consumertest.CreateStream(t, o.js, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.>"}, Duplicates: time.Minute})

	log := &consumertest.WaitLog{}
	var info *jetstream.StreamInfo
	err := o.during("look up stream EV", log, func() (err error) {
		info, err = stream.Ensure(ctx, o.js, stream.Config{Name: "EV", Logger: slog.New(log)})
		return err
	})
	if err != nil || info.Config.Name != "EV" {
		t.Fatalf("stream.Ensure after the outage: %+v, %v", info, err)
	}

	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p := pruner(st, o.js, streamFlags{Stream: "EV", Durable: "jetledger"}, retentionFlags{Retention: time.Hour}, slog.New(log))
	if err := o.during("prune check of EV/jetledger", log, func() error { return checkRetention(ctx, p) }); err != nil {
		t.Fatalf("prune check after the outage: %v", err)
	}

	// Answers: a missing stream without --subjects, a retention shorter
	// than the window. Neither is waited for.
	quiet := &consumertest.WaitLog{}
	// Bounded, so that an answer waited for fails the test, not hangs it.
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := stream.Ensure(ctx, o.js, stream.Config{Name: "NONE", Logger: slog.New(quiet)}); !errors.Is(err, stream.ErrNotFound) {
		t.Fatalf("stream.Ensure of a missing stream without subjects: %v, want ErrNotFound", err)
	}
	p.Retention, p.Logger = time.Second, slog.New(quiet)
	if err := checkRetention(ctx, p); err == nil {
		t.Fatal("a retention shorter than the duplicate window passed the check")
	}
	if quiet.Waits() != 0 {
		t.Fatalf("waited for the answers:\n%s", quiet)
	}
}

// run stopped (SIGINT, SIGTERM) while it waits for a server that cannot
// answer yet is a clean stop, exit 0: here one node of a three-node cluster
// whose peers never come, so JetStream has no quorum ("temporarily
// unavailable").
func TestRunStoppedWhileWaitingForTheServer(t *testing.T) {
	t.Parallel()
	peers := []*url.URL{{Scheme: "nats-route", Host: fmt.Sprintf("127.0.0.1:%d", consumertest.FreePort(t))}, {Scheme: "nats-route", Host: fmt.Sprintf("127.0.0.1:%d", consumertest.FreePort(t))}}
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true, ServerName: "n1",
		JetStream: true, StoreDir: t.TempDir(), Cluster: server.ClusterOpts{Name: "c", Host: "127.0.0.1", Port: -1}, Routes: peers})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	p := startCommand(t, "run", "--nats", srv.ClientURL(), "--db", filepath.Join(t.TempDir(), "l.db"), "--stream", "EV", "--log-format", "json")
	// Its first wait: the durable's lease (a run on a shared server holds
	// it), else the stream.
	consumertest.Eventually(t, 30*time.Second, "run to say it waits for the server", func() bool {
		p.failIfExited(t)
		_, ok := p.record(func(r map[string]any) bool {
			return r[jsretry.KeyWaitingFor] == "look up stream EV" || r[jsretry.KeyWaitingFor] == "open the lease of jetledger"
		})
		return ok
	})
	if code := p.stop(t); code != exitOK {
		t.Fatalf("stopped while waiting: exit %d, want 0; stderr:\n%s", code, p.stderr)
	}
}

// A server without JetStream is a definite answer: run says so and exits 1
// at once, rather than wait for it as for a cluster electing a leader.
func TestRunRefusesAServerWithoutJetStream(t *testing.T) {
	opts := &server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true}
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	start := time.Now()
	code, _, errOut := runMain("run", "--nats", srv.ClientURL(), "--db", filepath.Join(t.TempDir(), "l.db"), "--subjects", "ev.>")
	if code != exitFailure || !strings.Contains(errOut, "has no JetStream for this account") || time.Since(start) > 15*time.Second {
		t.Fatalf("run against a server without JetStream: exit %d after %s\n%s", code, time.Since(start), errOut)
	}
}
