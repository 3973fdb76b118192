package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
)

// faultProxy is a TCP proxy between a client and a server that can add
// latency, hold traffic (a partition: nothing is lost, nothing moves, as
// TCP behaves while it retransmits) one way, the client's to the server,
// so the client works on messages it can no longer ack, or both ways, and
// reset every connection.
type faultProxy struct {
	*consumertest.Proxy
	delay  atomic.Int64 // per chunk, each way
	mu     sync.Mutex
	held   bool
	both   bool          // the hold stops the server's traffic too
	heal   chan struct{} // closed when a hold ends
	trap   []byte        // reset when the client sends this, dropping it
	sprung chan struct{} // closed when the trap resets
}

func newFaultProxy(t testing.TB, target string) *faultProxy {
	t.Helper()
	p := &faultProxy{heal: make(chan struct{})}
	close(p.heal)
	p.Proxy = consumertest.NewProxy(t, target, consumertest.ProxyHooks{Before: p.chunk})
	t.Cleanup(p.release) // before the proxy closes (cleanups run last first): no chunk waits on a hold then
	return p
}

// chunk springs the trap, waits out holds if it carries the client's
// traffic (up), and adds the delay.
func (p *faultProxy) chunk(up bool, _ int64, data []byte) consumertest.Verdict {
	if up && p.sprang(data) {
		return consumertest.ResetAll
	}
	p.mu.Lock()
	heal, wait := p.heal, up || p.both
	p.mu.Unlock()
	if wait {
		<-heal
	}
	if d := time.Duration(p.delay.Load()); d > 0 {
		time.Sleep(d) // the fault itself: latency on the wire
	}
	return consumertest.Pass
}

// resetOn arms a reset for the moment the client sends pattern: the chunk
// that carries it is dropped, so what it held (acks, a pull request) never
// reaches the server. The returned channel closes when it fired.
func (p *faultProxy) resetOn(pattern string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.trap, p.sprung = []byte(pattern), make(chan struct{})
	return p.sprung
}

// sprang disarms the trap if chunk springs it: every connection is to be
// reset.
func (p *faultProxy) sprang(chunk []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.trap == nil || !bytes.Contains(chunk, p.trap) {
		return false
	}
	p.trap = nil
	close(p.sprung)
	return true
}

// hold stops the client's traffic until release, and the server's too if
// both.
func (p *faultProxy) hold(both bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.held {
		p.held, p.both, p.heal = true, both, make(chan struct{})
	}
}

func (p *faultProxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held {
		p.held = false
		close(p.heal)
	}
}

// waitSprung waits for an armed reset to fire.
func waitSprung(t *testing.T, sprung <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-sprung:
		t.Logf("reset as %s left run", what)
	case <-time.After(30 * time.Second):
		t.Fatalf("run sent no %s through the proxy within 30s", what)
	}
}

// healthz returns the status code of run's /healthz.
func healthz(addr string) int {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + "/healthz")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body) //nolint:errcheck // the status is the answer
	return resp.StatusCode
}

// Network faults between `jetledger run` and a separate nats-server: added
// latency, connections reset at random moments (mid-fetch, mid-batch,
// between a commit and its acks), and a partition longer than AckWait
// while a second consumer on the same durable and database takes over.
// Lost acks cost a redelivery each, a duplicate; nothing is lost or
// applied twice, and /healthz reports the partition. run exits only when
// a partition outlasted its lease and the second run took it (exit 1,
// naming the lease; a supervisor starts it again, as here).
func TestNetworkFaults(t *testing.T) {
	resets := 3
	partitions := 2
	if os.Getenv("JETLEDGER_NETFAULTS") == "long" {
		resets, partitions = 20, 5
	}
	rng := rand.New(rand.NewPCG(4, 4))
	b, w := newBrokerWorld(t)
	ctx, pub := context.Background(), w.pub
	dest := webhooktest.NewDestination(t, false)
	proxy := newFaultProxy(t, fmt.Sprintf("127.0.0.1:%d", b.port))
	metrics := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	// A few ms of work per message keeps a batch in hand most of the time,
	// so a partition finds acks to hold back.
	slowApply := balanceApply + `; SELECT count(*) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 4000) SELECT x FROM c)`
	args := func(url string, extra ...string) []string {
		return append(append([]string{"run", "--nats", url, "--db", w.db, "--stream", stream, "--schema", w.schema,
			"--apply", slowApply, "--log-format", "json", "--batch", "20", "--max-deliver", "-1"},
			append(fastPlan, webhookArgs(dest)...)...), extra...)
	}
	primary := start(t, nil, args(proxy.URL(), "--metrics", metrics)...)
	consumertest.Eventually(t, time.Minute, "run healthy", func() bool { return healthz(metrics) == http.StatusOK })

	// Publish directly to the server all along, recording what it acked.
	evs := makeEvents(rng, pub, 3000)
	stop := make(chan struct{})
	pubs, pubDone := publishPaced(ctx, pub, evs, 5*time.Millisecond, stop)

	// The moments of the faults are the experiment's variable.
	proxy.delay.Store(int64(20 * time.Millisecond))
	time.Sleep(2 * time.Second)
	proxy.delay.Store(0)
	// Resets: at a random moment; as the acks of a committed batch leave
	// (they are lost: redeliveries, which are duplicates); as a pull
	// request leaves (the fetch is lost mid-way).
	for i := 0; i < resets; i++ {
		time.Sleep(time.Duration(200+rng.IntN(800)) * time.Millisecond)
		consumertest.Eventually(t, 30*time.Second, "run reconnected through the proxy", func() bool { return proxy.Open() > 0 })
		switch i % 3 {
		case 0:
			t.Logf("reset %d at random: %d connections", i+1, proxy.Reset())
		case 1:
			// "+ACK", not "$JS.ACK.": an in-progress "+WPI" goes there too.
			waitSprung(t, proxy.resetOn("+ACK"), "acks")
		case 2:
			waitSprung(t, proxy.resetOn("$JS.API.CONSUMER.MSG.NEXT."), "a pull request")
		}
	}
	secondDups, firstDups := 0.0, 0.0
	for i := 0; i < partitions; i++ {
		time.Sleep(time.Duration(200+rng.IntN(800)) * time.Millisecond)
		// One way (run's acks and pull requests stop, the server's
		// messages still arrive) or both ways, in turn.
		proxy.hold(i%2 == 1)
		// Past AckWait (about 1.75s): the server redelivers what the
		// partitioned run holds, to it or, once its lease lapsed, to a
		// second run on the same database.
		second := start(t, nil, args(b.url())...)
		consumertest.Eventually(t, 30*time.Second, "/healthz reports the partition", func() bool {
			return healthz(metrics) == http.StatusServiceUnavailable
		})
		time.Sleep(2 * time.Second)
		mark := leaseMark(w.js)
		proxy.release()
		// The lease decides who consumes after the partition: run, which
		// renews it (the second waits), or the second, which took it as
		// the partition let it lapse (run finds it taken and exits 1).
		consumertest.Eventually(t, time.Minute, "run renews the lease alone, or finds it taken", func() bool {
			return exited(primary) || renewedAlone(w.js, primary, second, mark)
		})
		second.stop()
		// Waiting for the lease longer than two TTLs, it was refused.
		if code := second.wait(time.Minute); code == 0 {
			secondDups += second.stopped()["duplicates"]
		} else if !strings.Contains(second.output(), "one run per durable") {
			t.Errorf("second run exited %d:\n%s", code, second.output())
		}
		if exited(primary) {
			firstDups += leaseTaken(t, primary)
			primary = start(t, nil, args(proxy.URL(), "--metrics", metrics)...)
		}
		consumertest.Eventually(t, time.Minute, "/healthz recovers after the partition", func() bool {
			return healthz(metrics) == http.StatusOK
		})
	}
	close(stop)
	<-pubDone
	select {
	case <-primary.done:
		t.Fatalf("run exited on a transient network fault:\n%s", primary.output())
	default:
	}
	db := w.drainAndStop(primary, 3*time.Minute)
	var rep soakReport
	checkSoak(t, db, dest, pubs.published, pubs.uncertain, &rep)
	totals := primary.stopped()
	t.Logf("run totals: %v", totals)
	dups := totals["duplicates"] + firstDups
	t.Logf("network faults: %d resets, %d partitions; %d published, %d applied, duplicates acked: %.0f by run, %.0f by the second run; %d in review",
		resets, partitions, rep.Published, rep.Applied, dups, secondDups, rep.Review)
	if rep.Lost != 0 || rep.AppliedTwice != 0 || rep.SentTwice != 0 {
		t.Fatalf("%d lost, %d applied twice, %d sent twice", rep.Lost, rep.AppliedTwice, rep.SentTwice)
	}
	// The dropped acks and the held ones came back as redeliveries, which
	// the ledger caught: the faults hit what they were meant to.
	if dups+secondDups == 0 {
		t.Fatal("no redelivery was acked as a duplicate: the resets and the partition lost no ack")
	}
}

// leaseTaken checks that run exits 1 for the lease a second run took once
// a partition let it lapse (a plain run has no fence: it stops, and a
// supervisor starts it again), and returns the duplicates it acked.
func leaseTaken(t *testing.T, run *proc) float64 {
	t.Helper()
	if code := run.wait(0); code != 1 || !strings.Contains(run.output(), "another run took the durable's lease") {
		t.Fatalf("run exited %d on a transient network fault, not for the lease a second run took:\n%s", code, run.output())
	}
	t.Logf("the partition outlasted run's lease, which the second run took: run exited 1 and starts again")
	return run.stopped()["duplicates"]
}
