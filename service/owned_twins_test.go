package service

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/natsconn"
	"github.com/jetledger/jetledger/node"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Two owned runs on one host's ledger file (two processes started on one
// --db: helper-24's twins): the second is refused at once, naming the
// first's pid and the lock, and touches nothing; the first owns on and,
// once stopped, the file is free for a run again. Without the lock both
// ran, each restoring, setting aside and opening the file under the
// other's feet.
func TestASecondOwnedRunOnOneLedgerFileIsRefused(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	cfg := testConfig(t, t.TempDir())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.NATS, cfg.Metrics = &natsconn.Config{URL: srv.ClientURL()}, l
	cfg.Owner = &Owner{Name: "a", Standby: true}
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	waitGauges(t, "http://"+l.Addr().String()+"/metrics", "jetledger_changelog_owner 1")

	twin := cfg
	twin.Metrics, twin.Owner = nil, &Owner{Name: "b", Standby: true}
	twinCtx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err = Run(twinCtx, twin)
	var held *node.PathInUseError
	if !errors.As(err, &held) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(held.PID)) || held.PID == 0 ||
		!strings.Contains(err.Error(), cfg.DB+LedgerLockSuffix) {
		t.Fatalf("a second run on the owner's file: %v, want it refused naming the holder's pid and the lock", err)
	}

	publish(t, js, 0, 10)
	consumertest.Eventually(t, time.Minute, "the first run still owns and commits 10", func() bool { return processed(t, cfg.DB) == 10 })
	stop()
	if err := <-done; err != nil {
		t.Fatalf("the owner's run: %v", err)
	}
	release, err := node.LockPath(cfg.DB + LedgerLockSuffix)
	if err != nil {
		t.Fatalf("after the owner stopped, its file's lock: %v", err)
	}
	release()
}

// The owner's own connection failing as its run begins (a server that
// stalls right after the take-over: helper-24's whole-host stall) is a
// partition lost for now, not the end of the process: the run stands by,
// takes the partition again and consumes. It ended the run before ("connect
// to NATS at ...: i/o timeout", exit 1, both partitions with it).
func TestAnOwnersConnectionFailingAsItBeginsIsNotTheEnd(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	cfg := testConfig(t, t.TempDir())
	cfg.NATS, cfg.Owner = &natsconn.Config{URL: srv.ClientURL()}, &Owner{Name: "a", Standby: true}
	var dials atomic.Int32
	cfg.Dial = func(ctx context.Context, c natsconn.Config) (*nats.Conn, jetstream.JetStream, error) {
		if dials.Add(1) == 2 { // the run's own connection is the second: the owner's the first to fail
			return nil, nil, &natsconn.ConnectError{Op: "connect", URL: c.URL, Err: errors.New("i/o timeout")}
		}
		return natsconn.Connect(ctx, c)
	}
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	publish(t, js, 0, 10)
	consumertest.Eventually(t, 2*time.Minute, "the owner, its connection failed once, commits 10", func() bool {
		select {
		case err := <-done:
			t.Fatalf("the run ended: %v", err)
		default:
		}
		return processed(t, cfg.DB) == 10
	})
	if n := dials.Load(); n < 3 {
		t.Fatalf("%d dials: the failing one was never made", n)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("the owner's run: %v", err)
	}
}
