package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
)

// dialGate is a host's network to one node: the connections it has go
// on, and while refuse is set each new one is reset at once (a firewall
// rejecting new connections, a server at its connection limit), so a
// dial fails in no time.
type dialGate struct {
	l       net.Listener
	target  string
	refuse  atomic.Bool
	refused atomic.Int64
	held    atomic.Int64 // connections accepted while stalled
	mu      sync.Mutex
	open    chan struct{} // closed while traffic flows; stall makes a new one
	conns   []net.Conn
	wg      sync.WaitGroup
}

func newDialGate(t *testing.T, target string) *dialGate {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &dialGate{l: l, target: target, open: make(chan struct{})}
	close(g.open)
	g.wg.Add(1)
	go g.accept()
	t.Cleanup(g.close)
	return g
}

func (g *dialGate) url() string { return "nats://" + g.l.Addr().String() }

func (g *dialGate) accept() {
	defer g.wg.Done()
	for {
		c, err := g.l.Accept()
		if err != nil {
			return
		}
		if g.refuse.Load() {
			g.refused.Add(1)
			c.(*net.TCPConn).SetLinger(0) //nolint:errcheck // a RST
			c.Close()
			continue
		}
		g.wg.Add(1)
		go g.pair(c)
	}
}

// pair joins c to the target once traffic flows, and copies both ways,
// each chunk held while the host's network stalls.
func (g *dialGate) pair(c net.Conn) {
	defer g.wg.Done()
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	select {
	case <-open:
	default:
		g.held.Add(1)
	}
	g.wait()
	s, err := net.Dial("tcp", g.target)
	if err != nil {
		c.Close()
		return
	}
	g.mu.Lock()
	g.conns = append(g.conns, c, s)
	g.mu.Unlock()
	g.wg.Add(2)
	for _, d := range [][2]net.Conn{{s, c}, {c, s}} {
		go func() {
			defer g.wg.Done()
			buf := make([]byte, 32<<10)
			for {
				n, err := d[1].Read(buf)
				g.wait()
				if n > 0 {
					if _, werr := d[0].Write(buf[:n]); werr != nil {
						err = werr
					}
				}
				if err != nil {
					break
				}
			}
			d[0].Close()
			d[1].Close()
		}()
	}
}

// wait returns once traffic flows.
func (g *dialGate) wait() {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	<-open
}

// stall holds all the host's traffic, new connections too, until heal.
func (g *dialGate) stall() {
	g.mu.Lock()
	g.open = make(chan struct{})
	g.mu.Unlock()
}

// heal lets the host's traffic flow again.
func (g *dialGate) heal() {
	g.mu.Lock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
	g.mu.Unlock()
}

func (g *dialGate) close() {
	g.heal()
	g.l.Close()
	g.mu.Lock()
	for _, c := range g.conns {
		c.Close()
	}
	g.mu.Unlock()
	g.wg.Wait()
}

// deleteLeaseKeys deletes both partitions' lease keys: their owner's
// next renewal finds its key gone, and it loses the partitions.
func (a *a2) deleteLeaseKeys(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := a.r.c.js.KeyValue(ctx, changelog.LeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ownedDurables {
		if err := kv.Delete(ctx, a.r.stream+"."+d); err != nil {
			t.Fatal(err)
		}
	}
}

// lostPerSecond counts p's "lost the partition's ownership" records
// logged in [from, to), by partition and second: the most in one
// second, and all of them.
func lostPerSecond(p *proc, from, to time.Time) (most, all int, sample string) {
	per := map[string]int{}
	for _, l := range strings.Split(p.output(), "\n") {
		var r map[string]any
		if json.Unmarshal([]byte(l), &r) != nil {
			continue
		}
		msg, _ := r["msg"].(string)
		at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(r["time"]))
		if err != nil || !strings.HasPrefix(msg, "lost the partition's ownership") || at.Before(from) || !at.Before(to) {
			continue
		}
		k := fmt.Sprintf("p%v@%d", r["partition"], at.Unix())
		per[k]++
		all++
		most = max(most, per[k])
		if sample == "" {
			sample = l
		}
	}
	return most, all, sample
}

// 8.6 The only host (--changelog --standby, through one node) loses its
// partitions (their lease keys deleted) while its network rejects every
// new connection: each owner's run it begins fails at its own dial
// (connectFailed), round after round. Its old connection goes on, so the
// lease is taken again at once: the rounds must not spin (at most 5
// "lost" records per partition and second), the process must not exit,
// and once new connections are let through again it owns both, every
// event once.
func TestOpsAttack8DialRefusedRounds(t *testing.T) {
	aaLong(t)
	a := newA2(t, "PAY")
	gate, host, dir, evs, tr := a.gatedAlone(t, 500)
	for round := range 2 {
		a.atLeast(fmt.Sprintf("round %d", round), 100+150*round, dir)
		refusedBefore := gate.refused.Load()
		gate.refuse.Store(true)
		cut := time.Now()
		a.deleteLeaseKeys(t)
		consumertest.Eventually(t, 3*time.Minute, fmt.Sprintf("round %d: 40 dials refused, or A exited", round), func() bool {
			return gate.refused.Load()-refusedBefore >= 40 || !running(host)
		})
		gate.refuse.Store(false)
		healed := time.Now()
		most, all, sample := lostPerSecond(host, cut, healed)
		t.Logf("round %d: %v without new connections, %d dials refused; %d lost records, at most %d for a partition in one second; the first:\n%s",
			round, healed.Sub(cut).Round(time.Millisecond), gate.refused.Load()-refusedBefore, all, most, sample)
		alive(t, host, "A")
		if most > 5 {
			t.Errorf("round %d: %d lost records for one partition in one second: the connectFailed rounds spin", round, most)
		}
		consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("round %d: A owning both again", round), func() bool {
			return roleRecordsSince(host, "owner", 0, healed) > 0 && roleRecordsSince(host, "owner", 1, healed) > 0
		})
		_, after, _ := lostPerSecond(host, healed, time.Now())
		t.Logf("round %d: owning both %v after the network came back (%d lost records since)", round, time.Since(healed).Round(time.Millisecond), after)
	}
	a.settleAlone(t, tr, host, dir, evs)
}

// 8.6c The only host's whole network stalls (every byte both ways held,
// new connections too) until it lost both partitions, and goes on
// stalling through 3 retries said (its connections do not see the stall
// before their pings fail, minutes; a dial would hang): the run must not spin while its dials
// hang, must not exit, and must own both once the network is back.
func TestOpsAttack8WholeHostStallOwnsAgain(t *testing.T) {
	aaLong(t)
	a := newA2(t, "PAY")
	gate, host, dir, evs, tr := a.gatedAlone(t, 400)
	for round := range 2 {
		a.atLeast(fmt.Sprintf("round %d", round), 100+120*round, dir)
		gate.stall()
		cut := time.Now()
		consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("round %d: A losing both partitions in the stall", round), func() bool {
			return roleRecordsSince(host, "lost", 0, cut) > 0 && roleRecordsSince(host, "lost", 1, cut) > 0 || !running(host)
		})
		lostAt, held := time.Since(cut), gate.held.Load()
		consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("round %d: 3 retries said in the stall", round), func() bool {
			return records(host, func(r map[string]any) bool {
				return r["msg"] == "JetStream cannot answer yet (a leader being elected, a server restarting?); trying again until it does" && recordTime(r).After(cut)
			}) >= 3 || !running(host)
		})
		gate.heal()
		healed := time.Now()
		most, all, _ := lostPerSecond(host, cut, healed)
		t.Logf("round %d: stalled %v (both lost after %v), %d dials held (before: %d); %d lost records, at most %d for a partition in one second", round, healed.Sub(cut).Round(time.Millisecond), lostAt.Round(time.Millisecond), gate.held.Load(), held, all, most)
		alive(t, host, "A")
		if most > 5 {
			t.Errorf("round %d: %d lost records for one partition in one second in the stall", round, most)
		}
		consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("round %d: A owning both again", round), func() bool {
			return roleRecordsSince(host, "owner", 0, healed) > 0 && roleRecordsSince(host, "owner", 1, healed) > 0
		})
		t.Logf("round %d: owning both %v after the network came back", round, time.Since(healed).Round(time.Millisecond))
	}
	a.settleAlone(t, tr, host, dir, evs)
}

// 8.6d As 8.6b, but the healthy standby B starts only once A is in its
// connectFailed rounds (it holds the keys it takes again each round): A
// cannot consume, so B must own both within a minute.
func TestOpsAttack8DialRefusedStandbyStartsLate(t *testing.T) {
	aaLong(t)
	a := newA2(t, "PAY")
	env, gate := a.gatedOwner(t)
	env.evs = makeEvents(randFor(t), a.r.pub, 400)
	env.tr = a.traffic(env.evs, 5, 150*time.Millisecond)
	a.atLeast("before the cut", 100, env.dirs[0])
	gate.refuse.Store(true)
	cut := time.Now()
	a.deleteLeaseKeys(t)
	consumertest.Eventually(t, 2*time.Minute, "A in its connectFailed rounds", func() bool { return gate.refused.Load() >= 10 })
	env.hosts[1] = a.start("B", env.dirs[1], env.flags[1]...)
	bPid, started := env.hosts[1].cmd.Process.Pid, time.Now()
	consumertest.Eventually(t, time.Minute, "B (a healthy standby) owning both while A cannot dial", func() bool {
		return roleRecords(env.hosts[1], "owner", 0) > 0 && roleRecords(env.hosts[1], "owner", 1) > 0
	})
	took := time.Since(started)
	gate.refuse.Store(false)
	healed := time.Now()
	most, all, _ := lostPerSecond(env.hosts[0], cut, healed)
	t.Logf("%v without new connections for A, %d dials refused; A: %d lost records (at most %d for a partition in one second); B (pid %d) owned both %v after its start; holders then %d %d; B standing by %v %v",
		healed.Sub(cut).Round(time.Millisecond), gate.refused.Load(), all, most, bPid, took.Round(time.Millisecond), a.holderPid(0), a.holderPid(1), standsBy(env.hosts[1], 0), standsBy(env.hosts[1], 1))
	alive(t, env.hosts[0], "A")
	a.ownersOf("after the network came back", env.hosts...)
	a.settleWebhookPair(t, "after A's refused dials", env.tr, env.dest, env.dirs, env.hosts, env.evs)
}

// gatedOwner starts A (--changelog --standby, a webhook) through a dial
// gate to one node, and waits until it owns both partitions; B's place in
// env is left for the test.
func (a *a2) gatedOwner(t *testing.T) (opsEnv, *dialGate) {
	t.Helper()
	var env opsEnv
	gate := newDialGate(t, "127.0.0.1:"+strconv.Itoa(a.r.c.nodes[0].port))
	env.dest, env.dirs = webhooktest.NewDestination(t, false), []string{t.TempDir(), t.TempDir()}
	f := []string{"--standby", "--outbox-workers", "4"}
	env.flags = [][]string{webhookArgs(env.dest, append([]string{"--changelog"}, f...)...), webhookArgs(env.dest, f...)}
	env.hosts = []*proc{a.startVia("A", env.dirs[0], gate.url(), env.flags[0]...), nil}
	a.r.waitRole(env.hosts[0], "A", "owner", 0, 1)
	return env, gate
}

// settleAlone ends a test of one host: the traffic published, every event
// applied, the host stopped cleanly, each event once in its ledgers.
func (a *a2) settleAlone(t *testing.T, tr *traffic, host *proc, dir string, evs []event) {
	t.Helper()
	tr.wait(t)
	a.r.waitApplied("every event applied", len(evs), dir)
	stopOK(t, host, "A")
	checkPartitionedExact(t, openLedgers(t, partDB(dir, 0), partDB(dir, 1)), evs)
}

// gatedAlone starts the only host, A (--changelog --standby), through a
// dial gate to one node, waits until it owns both partitions, and starts
// n events of traffic.
func (a *a2) gatedAlone(t *testing.T, n int) (*dialGate, *proc, string, []event, *traffic) {
	t.Helper()
	dir := t.TempDir()
	gate := newDialGate(t, "127.0.0.1:"+strconv.Itoa(a.r.c.nodes[0].port))
	host := a.startVia("A", dir, gate.url(), "--changelog", "--standby")
	a.r.waitRole(host, "A", "owner", 0, 1)
	evs := makeEvents(randFor(t), a.r.pub, n)
	return gate, host, dir, evs, a.traffic(evs, 5, 150*time.Millisecond)
}
