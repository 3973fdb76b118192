package service

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/jsretry"
	"github.com/jetledger/jetledger/natsconn"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Two owned runs of one partition in one process: the first owns it, the
// second stands by, each says so in its metrics (the standby's served
// while its Service does not run), the standby's copy holds what the
// owner committed and its lag gauge is back to 0; once the owner stops,
// the standby owns the partition and consumes on.
func TestOwnedRunsServeTheirRoleAndLag(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	owned := func(name string) (Config, string) {
		cfg := testConfig(t, t.TempDir())
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		cfg.NATS, cfg.Metrics = &natsconn.Config{URL: srv.ClientURL()}, l
		cfg.Owner = &Owner{Name: name, Standby: true}
		return cfg, "http://" + l.Addr().String() + "/metrics"
	}
	run := func(ctx context.Context, cfg Config) chan error {
		done := make(chan error, 1)
		go func() { done <- Run(ctx, cfg) }()
		return done
	}
	cfgA, metricsA := owned("a")
	ctxA, stopA := context.WithCancel(t.Context())
	defer stopA()
	doneA := run(ctxA, cfgA)
	waitGauges(t, metricsA, "jetledger_changelog_owner 1", `jetledger_changelog_role{role="owner"} 1`)
	cfgB, metricsB := owned("b")
	ctxB, stopB := context.WithCancel(t.Context())
	defer stopB()
	doneB := run(ctxB, cfgB)
	waitGauges(t, metricsB, "jetledger_changelog_owner 0")

	publish(t, js, 0, 20)
	consumertest.Eventually(t, time.Minute, "the owner commits 20", func() bool { return processed(t, cfgA.DB) == 20 })
	consumertest.Eventually(t, time.Minute, "the standby's copy holds 20", func() bool { return processed(t, cfgB.DB) == 20 })
	waitGauges(t, metricsB, "jetledger_changelog_owner 0", "jetledger_changelog_standby_lag_entries 0", `jetledger_changelog_role{role="following"} 1`)

	stopA()
	if err := <-doneA; err != nil {
		t.Fatalf("the owner's run: %v", err)
	}
	waitGauges(t, metricsB, "jetledger_changelog_owner 1", "jetledger_changelog_standby_lag_entries 0", `jetledger_changelog_role{role="owner"} 1`, `jetledger_changelog_role{role="following"} 0`)
	publish(t, js, 20, 30)
	consumertest.Eventually(t, time.Minute, "the new owner commits 30", func() bool { return processed(t, cfgB.DB) == 30 })
	stopB()
	if err := <-doneB; err != nil {
		t.Fatalf("the new owner's run: %v", err)
	}
}

// waitGauges waits until the metrics at url show every line of want.
func waitGauges(t *testing.T, url string, want ...string) {
	t.Helper()
	consumertest.Eventually(t, time.Minute, fmt.Sprintf("%s to show %q", url, want), func() bool {
		resp, err := http.Get(url) //nolint:noctx // a test's probe
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, w := range want {
			if !strings.Contains(string(body), "\n"+w+"\n") {
				return false
			}
		}
		return true
	})
}

// publish sends messages from to to-1 to the test stream, with ids.
func publish(t *testing.T, js jetstream.JetStream, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		m := nats.NewMsg("s.x")
		m.Data = []byte(fmt.Sprintf(`{"n":%d}`, i))
		m.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("m-%d", i))
		// The run makes the stream as it starts: until then, and while a
		// loaded server is slow to answer, the same id is tried again.
		var err error
		consumertest.Eventually(t, time.Minute, "a publish acknowledged", func() bool {
			_, err = js.PublishMsg(t.Context(), m)
			return err == nil || !jsretry.Transient(err)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// processed counts the ledger's processed messages (0 if it cannot be read yet).
func processed(t *testing.T, file string) int {
	db, err := sql.Open("sqlite", "file:"+filepath.ToSlash(file)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n := 0
	_ = db.QueryRow(`SELECT count(*) FROM processed_messages`).Scan(&n)
	return n
}

// The partition's lease held with another timing is refused at once,
// naming both TTLs, not retried (it is no server's passing error); another
// partition's lease of another TTL is not in the way. A run stopped while
// it waits returns nothing to use.
func TestOpenOwnedRefusesAnotherTiming(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	if _, err := changelog.OpenLease(t.Context(), js, "S", "other", "x", 2*time.Hour, 1); err != nil {
		t.Fatalf("another partition's lease of another TTL: %v", err)
	}
	held, err := changelog.OpenLease(t.Context(), js, "S", "d", "x", time.Hour, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := held.Acquire(t.Context()); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, t.TempDir())
	cfg.NATS, cfg.Owner = &natsconn.Config{URL: srv.ClientURL()}, &Owner{Name: "a"}
	cfg, err = cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	log, lease, err := openOwned(ctx, cfg, *cfg.Owner, js, changelog.Config{})
	if !errors.Is(err, changelog.ErrInvalidConfig) || log != nil || lease != nil || !strings.Contains(err.Error(), "1h0m0s") {
		t.Fatalf("the partition's lease held with a TTL of 1h: %v, %v, %v; want ErrInvalidConfig naming the TTL", log, lease, err)
	}
}
