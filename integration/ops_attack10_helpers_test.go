package integration

import (
	"bytes"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
)

// entryTrap is a proxy between a host and one node that, once armed,
// holds the host's chunk carrying a publish to a subject (a changelog
// entry) and everything after it on that connection (its TCP stalls one
// way; other connections flow), until released: then the chunk is
// dropped with every connection reset, or let through late.
type entryTrap struct {
	*consumertest.Proxy
	mu     sync.Mutex
	pat    []byte
	armed  bool
	sprung chan struct{}
	gate   chan struct{}
	drop   bool
	open   bool // gate not closed yet
}

func newEntryTrap(t *testing.T, target string) *entryTrap {
	p := &entryTrap{}
	p.Proxy = consumertest.NewProxy(t, target, consumertest.ProxyHooks{Before: p.chunk})
	t.Cleanup(func() { p.release(true) })
	return p
}

// arm springs the trap at the host's next publish to subject.
func (p *entryTrap) arm(subject string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pat, p.armed, p.sprung, p.gate, p.open, p.drop = []byte("PUB "+subject+" "), true, make(chan struct{}), make(chan struct{}), true, false
	return p.sprung
}

func (p *entryTrap) chunk(up bool, _ int64, data []byte) consumertest.Verdict {
	if !up {
		return consumertest.Pass
	}
	p.mu.Lock()
	if !p.armed || !bytes.Contains(data, p.pat) {
		p.mu.Unlock()
		return consumertest.Pass
	}
	p.armed = false
	close(p.sprung)
	gate := p.gate
	p.mu.Unlock()
	<-gate
	p.mu.Lock()
	drop := p.drop
	p.mu.Unlock()
	if drop {
		return consumertest.ResetAll
	}
	return consumertest.Pass
}

// release ends a hold: the held chunk dropped (drop) or let through.
func (p *entryTrap) release(drop bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = false
	if p.open {
		p.open, p.drop = false, drop
		close(p.gate)
	}
}

// entryTrappedPair is slowWebhookPair (or startPair without a webhook)
// with each host connected to its own node through an entryTrap.
func (a *a2) entryTrappedPair(t *testing.T, webhook bool) (env opsEnv, traps []*entryTrap) {
	t.Helper()
	f := []string{"--standby"}
	if webhook {
		env.dest = webhooktest.NewDestination(t, false)
		env.dest.SetDelay(5 * time.Millisecond)
		f = append(f, "--outbox-workers", "4")
		env.flags = [][]string{webhookArgs(env.dest, append([]string{"--changelog"}, f...)...), webhookArgs(env.dest, f...)}
	} else {
		env.flags = [][]string{append([]string{"--changelog"}, f...), f}
	}
	env.dirs = []string{t.TempDir(), t.TempDir()}
	for i := range 2 {
		traps = append(traps, newEntryTrap(t, "127.0.0.1:"+strconv.Itoa(a.r.c.nodes[i].port)))
	}
	env.hosts = []*proc{a.startVia("A", env.dirs[0], traps[0].URL(), env.flags[0]...), nil}
	a.r.waitRole(env.hosts[0], "A", "owner", 0, 1)
	env.hosts[1] = a.startVia("B", env.dirs[1], traps[1].URL(), env.flags[1]...)
	a.r.waitStandsBy(env.hosts[1], "B")
	return env, traps
}

// heldUnderTraffic begins a round of an attack on a held entry: the last
// round's traffic finished, the owner o of partition 0 found, its trap
// armed on subject (its changelog's) at began, evs sent, and its first
// entry of partition 0 held.
func (a *a2) heldUnderTraffic(t *testing.T, env *opsEnv, traps []*entryTrap, subject string, round int, evs []event) (o int, began time.Time) {
	if env.tr != nil {
		env.tr.wait(t)
	}
	o = a.ownerOf(fmt.Sprintf("round %d", round), 0, env.hosts...)
	base := fullestRows(env.dirs)
	began = time.Now()
	sprung := traps[o].arm(subject)
	env.tr = a.traffic(evs, 5, 10*time.Millisecond)
	a.atLeast(fmt.Sprintf("round %d: more applied", round), base+10, env.dirs...)
	select {
	case <-sprung:
	case <-time.After(time.Minute):
		t.Fatalf("round %d: %s published no entry of partition 0 within a minute", round, hostNames[o])
	}
	return o, began
}
