package integration

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
)

// Two `run`s on one --db with different --listen used to start two embedded
// servers on one JetStream store, and messages acked as stored by one were
// lost to the other. The second is refused, naming the holder's pid; a
// SIGKILLed holder does not block a restart.
func TestEmbeddedStoreLockRefusesSecondRun(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "ledger.db")
	runOn := func(addr string) *proc {
		return start(t, nil, "run", "--db", db, "--listen", addr, "--stream", "S", "--subjects", "s.>", "--log-format", "json")
	}
	addrA := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	first := runOn(addrA)
	waitServing(t, first, addrA)

	addrB := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	second := runOn(addrB)
	select {
	case <-second.done:
	case <-time.After(15 * time.Second):
		serving := "not serving"
		if c, err := net.DialTimeout("tcp", addrB, time.Second); err == nil {
			c.Close()
			serving = "serving on " + addrB
		}
		t.Fatalf("second run on the same --db still running after 15s (%s): two embedded servers on one store\n%s",
			serving, tail(second.output()))
	}
	if code := second.wait(time.Second); code != 1 {
		t.Fatalf("second run: exit %d, want 1\n%s", code, tail(second.output()))
	}
	if pid := strconv.Itoa(first.cmd.Process.Pid); !strings.Contains(second.output(), pid) {
		t.Fatalf("second run's output does not name the holder's pid %s:\n%s", pid, tail(second.output()))
	}

	// The kernel drops a flock with its process; the lock file left behind
	// must not refuse the restart.
	first.kill()
	third := runOn(addrA)
	waitServing(t, third, addrA)
	third.signal(syscall.SIGTERM)
	if code := third.wait(30 * time.Second); code != 0 {
		t.Fatalf("restart after SIGKILL: exit %d\n%s", code, tail(third.output()))
	}
}

// Consumers connected with --nats start no embedded server and take no
// lock: two may share one database file, as the README promises.
func TestEmbeddedLockNotTakenWithNats(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 2*time.Minute)
	evs := makeEvents(randFor(t), w.pub, 300)
	a := w.runConsumer(nil)
	// b starts once a has migrated the new ledger and bound the durable:
	// two processes migrating one new file at once is another matter.
	consumertest.Eventually(t, 30*time.Second, "first consumer bound", func() bool {
		_, err := w.js.Consumer(context.Background(), stream, "jetledger")
		return err == nil
	})
	b := w.runConsumer(nil)
	w.publish(evs)
	w.waitDrained(60 * time.Second)
	for _, p := range []*proc{a, b} {
		select {
		case <-p.done:
			t.Fatalf("a consumer sharing the database exited early: exit %d\n%s", p.wait(time.Second), tail(p.output()))
		default:
		}
	}
	w.finish(a, 30*time.Second)
	w.finish(b, 30*time.Second)
	w.checkExact(w.ledgerDB(), evs)
}

// waitServing waits until p accepts NATS connections on addr, failing early
// if p exits first.
func waitServing(t testing.TB, p *proc, addr string) {
	t.Helper()
	consumertest.Eventually(t, 30*time.Second, "embedded server listening on "+addr, func() bool {
		select {
		case <-p.done:
			t.Fatalf("run exited before serving on %s: exit %d\n%s", addr, p.wait(time.Second), tail(p.output()))
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
}
