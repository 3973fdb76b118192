package integration

import (
	"bytes"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
)

// answerTrap is a proxy between a host and one node that, once armed,
// lets the host's write of a lease key through (it lands) and then holds
// the server's answer to it (and what follows it on that connection; the
// host's other connections flow) until the host asks anything else about
// that key (the take ended without its answer: a retry's read, or a
// stop's release).
type answerTrap struct {
	*consumertest.Proxy
	mu     sync.Mutex
	key    []byte
	armed  bool
	held   bool
	reply  []byte // the held write's reply subject
	all    bool   // hold all the server sends the host (its network stalls one way)
	heal   chan struct{}
	sprung chan struct{}
}

func newAnswerTrap(t *testing.T, target string) *answerTrap {
	p := &answerTrap{heal: make(chan struct{})}
	close(p.heal)
	p.Proxy = consumertest.NewProxy(t, target, consumertest.ProxyHooks{Before: p.chunk})
	t.Cleanup(p.release)
	return p
}

// arm springs the trap at the host's next write of subject's key.
func (p *answerTrap) arm(subject string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.key, p.armed, p.sprung = []byte(subject), true, make(chan struct{})
	return p.sprung
}

func (p *answerTrap) chunk(up bool, _ int64, data []byte) consumertest.Verdict {
	p.mu.Lock()
	if up {
		switch {
		case p.armed && bytes.Contains(data, append([]byte("PUB "), p.key...)) && !bytes.Contains(data, []byte("KV-Operation")):
			rest := data[bytes.Index(data, append([]byte("PUB "), p.key...))+len(p.key)+4:]
			if f := bytes.Fields(bytes.SplitN(rest, []byte("\r\n"), 2)[0]); len(f) > 0 {
				p.reply = append([]byte("MSG "+string(f[0])), ' ')
			}
			p.armed, p.held, p.heal = false, true, make(chan struct{})
			close(p.sprung)
		case p.held && bytes.Contains(data, p.key):
			p.held = false
			close(p.heal)
		}
		p.mu.Unlock()
		return consumertest.Pass
	}
	heal, hold := p.heal, p.held && (p.all || bytes.Contains(data, p.reply))
	p.mu.Unlock()
	if hold {
		<-heal
	}
	return consumertest.Pass
}

func (p *answerTrap) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = false
	if p.held {
		p.held = false
		close(p.heal)
	}
}

// trappedPair is slowWebhookPair with each host connected to its own node
// through an answerTrap.
func (a *a2) trappedPair(t *testing.T) (env opsEnv, traps []*answerTrap) {
	t.Helper()
	env.dest = webhooktest.NewDestination(t, false)
	env.dest.SetDelay(20 * time.Millisecond)
	env.dirs = []string{t.TempDir(), t.TempDir()}
	f := []string{"--standby", "--outbox-workers", "4"}
	env.flags = [][]string{webhookArgs(env.dest, append([]string{"--changelog"}, f...)...), webhookArgs(env.dest, f...)}
	for i := range 2 {
		traps = append(traps, newAnswerTrap(t, "127.0.0.1:"+strconv.Itoa(a.r.c.nodes[i].port)))
	}
	env.hosts = []*proc{a.startVia("A", env.dirs[0], traps[0].URL(), env.flags[0]...), nil}
	a.r.waitRole(env.hosts[0], "A", "owner", 0, 1)
	env.hosts[1] = a.startVia("B", env.dirs[1], traps[1].URL(), env.flags[1]...)
	a.r.waitStandsBy(env.hosts[1], "B")
	return env, traps
}

// trappedUnderTraffic is trappedPair with n events sent in chunks of 5
// as it goes, and the subject of partition 0's lease key, which the traps
// are armed for.
func (a *a2) trappedUnderTraffic(t *testing.T, n int) (opsEnv, []*answerTrap, string) {
	env, traps := a.trappedPair(t)
	env.evs = makeEvents(randFor(t), a.r.pub, n)
	env.tr = a.traffic(env.evs, 5, 150*time.Millisecond)
	return env, traps, "$KV." + changelog.LeaseBucket + "." + a.r.stream + "." + ownedDurables[0]
}

// startVia is start through the server at url alone.
func (a *a2) startVia(name, dir, url string, flags ...string) *proc {
	p := a.r.run(dir, url, flags...)
	a.mu.Lock()
	a.procs = append(a.procs, &a2proc{name: name, dir: dir, p: p})
	a.mu.Unlock()
	return p
}

// 6c. The owner SIGKILLed; the standby's take of partition 0 lands but
// its answer is held back: the standby SIGTERMed while it waits for it
// (069630b's doubt: its release must read the key and free it), or left
// to run on (its own landed take names it: it must own within a bounded
// time). Both started again; every event once, nothing sent twice.
func TestOpsAttack7TakeAnswerHeld(t *testing.T) {
	aaLong(t)
	a := newA2(t, "PAY")
	env, traps, key := a.trappedUnderTraffic(t, 900)
	for round := range 6 {
		s := a.killOwnerTrapped(t, env, traps, key, round)
		o := 1 - s
		at := time.Now()
		if round%2 == 0 {
			pid := env.hosts[s].cmd.Process.Pid
			a.stopClean(t, env, s, fmt.Sprintf("round %d: its take's answer held", round))
			traps[s].release()
			a.keyNamesFor(t, round, pid, time.Now())
			env.hosts[s] = a.startVia(hostNames[s], env.dirs[s], traps[s].URL(), env.flags[s]...)
		} else {
			consumertest.Eventually(t, time.Minute, hostNames[s]+" saying its take had no answer", func() bool {
				return said(env.hosts[s], "changelog: the standby cannot reach", []string{"take lease"}, 0)
			})
			traps[s].release() // the take ended without its answer: the rest flows again
			consumertest.Eventually(t, 2*time.Minute, hostNames[s]+" owning partition 0 after its take's answer was held", func() bool {
				return roleRecordsSince(env.hosts[s], "owner", 0, at) > 0
			})
			self := said(env.hosts[s], "changelog: standing by; the partition is owned", []string{fmt.Sprintf(":%d:", env.hosts[s].cmd.Process.Pid)}, 0)
			t.Logf("round %d: %s owned partition 0 %v after its take's answer was held (stood by its own landed take first: %v)", round, hostNames[s], time.Since(at).Round(time.Millisecond), self)
		}
		env.hosts[o] = a.startVia(hostNames[o], env.dirs[o], traps[o].URL(), env.flags[o]...)
		a.ownersOf(fmt.Sprintf("round %d: both running again", round), env.hosts...)
	}
	a.settleWebhookPair(t, "after the held answers", env.tr, env.dest, env.dirs, env.hosts, env.evs)
}

// 6d. As 6c's runs left to go on, but everything the server sends the
// standby's host is held from its take's write until that take ended
// without an answer (its network stalls one way for a few seconds, right
// as it takes both partitions over). A host that exits is started again
// (a supervisor). No illegal move logged (judge), every event once,
// nothing sent twice.
func TestOpsAttack7TakeOverStallsWholeHost(t *testing.T) {
	aaLong(t)
	a := newA2(t, "PAY")
	env, traps := a.trappedPair(t)
	for _, tr := range traps {
		tr.all = true
	}
	env.evs = makeEvents(randFor(t), a.r.pub, 700)
	env.tr = a.traffic(env.evs, 5, 150*time.Millisecond)
	key := "$KV." + changelog.LeaseBucket + "." + a.r.stream + "." + ownedDurables[0]
	exits := 0
	for round := range 4 {
		s := a.killOwnerTrapped(t, env, traps, key, round)
		o := 1 - s
		consumertest.Eventually(t, time.Minute, hostNames[s]+" saying its take had no answer, or exiting", func() bool {
			return said(env.hosts[s], "changelog: the standby cannot reach", []string{"take lease"}, 0) || !running(env.hosts[s])
		})
		traps[s].release()
		if !running(env.hosts[s]) {
			exits++
			t.Logf("round %d: %s exited %d in the stall: %s", round, hostNames[s], env.hosts[s].wait(0), grepLines(env.hosts[s].output(), "jetledger run:"))
			env.hosts[s] = a.startVia(hostNames[s], env.dirs[s], traps[s].URL(), env.flags[s]...)
		}
		for _, line := range []string{"does not allow", "role\":\"lost"} {
			if l := grepLines(env.hosts[s].output(), line); l != "" {
				t.Logf("round %d: %s logged %q:\n%s", round, hostNames[s], line, l)
			}
		}
		env.hosts[o] = a.startVia(hostNames[o], env.dirs[o], traps[o].URL(), env.flags[o]...)
		a.ownersOf(fmt.Sprintf("round %d: both running again", round), env.hosts...)
	}
	t.Logf("%d exits in the stalls, started again", exits)
	a.settleWebhookPair(t, "after the stalls", env.tr, env.dest, env.dirs, env.hosts, env.evs)
}

// killOwnerTrapped waits for round's traffic, arms the standby's trap on
// key, SIGKILLs partition 0's owner and waits until the standby writes
// the key (its take, whose answer the trap holds). It returns the standby.
func (a *a2) killOwnerTrapped(t *testing.T, env opsEnv, traps []*answerTrap, key string, round int) int {
	t.Helper()
	a.atLeast(fmt.Sprintf("round %d", round), 80+100*round, env.dirs...)
	o := a.ownerOf(fmt.Sprintf("round %d", round), 0, env.hosts...)
	s := 1 - o
	sprung := traps[s].arm(key)
	env.hosts[o].kill()
	select {
	case <-sprung:
	case <-time.After(2 * time.Minute):
		t.Fatalf("round %d: %s never wrote partition 0's key after the owner's SIGKILL", round, hostNames[s])
	}
	return s
}
