package integration

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
)

// Attack 7 (operations on 069630b, c6366ef, f363250): a pair of hosts
// (owner A, standby B) with a webhook destination that does not honour
// keys, traffic flowing, on a 3-node cluster; each operation ends with
// both partitions owned by a live run, every event once in the owners'
// ledgers and the copies, and no key sent twice (settleWebhookPair).

// opsPair starts slowWebhookPair (20ms, 4 workers) and traffic of n
// events, 5 every 150ms (about 30 a second: flowing through the rounds).
func (a *a2) opsPair(t *testing.T, n int) (env opsEnv) {
	t.Helper()
	env.dest, env.dirs, env.flags, env.hosts = a.slowWebhookPair(t, 20*time.Millisecond, 4)
	env.evs = makeEvents(randFor(t), a.r.pub, n)
	env.tr = a.traffic(env.evs, 5, 150*time.Millisecond)
	return env
}

// restart starts host h again on its directory with its flags.
func (a *a2) restart(env opsEnv, h int, name string) {
	env.hosts[h] = a.start(name, env.dirs[h], env.flags[h]...)
}

var hostNames = []string{"A", "B"}

// opsEnv is one attack's pair under traffic.
type opsEnv struct {
	dest  *webhooktest.Destination
	dirs  []string
	flags [][]string
	hosts []*proc
	evs   []event
	tr    *traffic
}

// 1. Both hosts SIGKILLed at the same moment under traffic and started
// again together, three rounds: both partitions owned again, every event
// once, nothing sent twice.
func TestOpsAttack7KillBothRestartBoth(t *testing.T) {
	aaLong(t)
	a := newA2(t, "PAY")
	env := a.opsPair(t, 500)
	for round := range 3 {
		a.atLeast(fmt.Sprintf("round %d", round), 80+100*round, env.dirs...)
		env.hosts[0].signal(syscall.SIGKILL)
		env.hosts[1].signal(syscall.SIGKILL)
		env.hosts[0].kill()
		env.hosts[1].kill()
		a.restart(env, 0, "A")
		a.restart(env, 1, "B")
		a.ownersOf(fmt.Sprintf("round %d: both restarted", round), env.hosts...)
		alive(t, env.hosts[0], "A")
		alive(t, env.hosts[1], "B")
	}
	a.settleWebhookPair(t, "after the kills", env.tr, env.dest, env.dirs, env.hosts, env.evs)
}

// 2. The owner's disk replaced with an empty directory (SIGKILL, its data
// gone, started again at once) under traffic: the standby takes over, the
// empty host restores the snapshot and stands by; then the standby that
// took over is SIGKILLed, so the restored copy must own, and the same
// again the other way. Nothing lost, nothing doubled.
func TestOpsAttack7OwnerDiskReplacedEmpty(t *testing.T) {
	aaLong(t)
	a := newA2(t, "PAY")
	env := a.opsPair(t, 500)
	for round := range 2 {
		a.atLeast(fmt.Sprintf("round %d", round), 100+150*round, env.dirs...)
		h := a.ownerOf(fmt.Sprintf("round %d: before the replacement", round), 0, env.hosts...)
		env.hosts[h].kill()
		wipe(t, env.dirs[h])
		a.restart(env, h, hostNames[h]+" (empty)")
		// Either may take a partition over: the empty host restores the
		// snapshot and stands by, and may be the first to see a key free.
		a.ownersOf(fmt.Sprintf("round %d: after the owner's replacement", round), env.hosts...)
		consumertest.Eventually(t, 2*time.Minute, hostNames[h]+" (empty) standing by or owning", func() bool {
			return (standsBy(env.hosts[h], 0) || logged(env.hosts[h], "owner", 0)) && (standsBy(env.hosts[h], 1) || logged(env.hosts[h], "owner", 1))
		})
		if restores(env.hosts[h]) == 0 {
			t.Errorf("round %d: %s on an empty disk stood by without restoring a snapshot", round, hostNames[h])
		}
		a.atLeast(fmt.Sprintf("round %d: more applied", round), 180+150*round, env.dirs...)
		env.hosts[1-h].kill() // the restored copy must now own
		a.ownersOf(fmt.Sprintf("round %d: %s (restored) after the other's SIGKILL", round, hostNames[h]), env.hosts[h])
		a.restart(env, 1-h, hostNames[1-h])
		a.r.waitStandsBy(env.hosts[1-h], hostNames[1-h])
	}
	a.settleWebhookPair(t, "after the replacements", env.tr, env.dest, env.dirs, env.hosts, env.evs)
}

// 3. The changelog purged (not deleted) under traffic, then one host
// SIGKILLed and started again at once: the owner, or the standby. Every
// partition owned again, every event once, nothing sent twice.
func TestOpsAttack7LogPurgedThenRestart(t *testing.T) {
	aaLong(t)
	for _, which := range []string{"owner", "standby"} {
		t.Run(which, func(t *testing.T) {
			a := newA2(t, "PAY")
			env := a.opsPair(t, 400)
			a.atLeast("the first 100 applied", 100, env.dirs...)
			a.r.purgeLog(0)
			a.r.purgeLog(1)
			h := a.ownerOf("after the purge", 0, env.hosts...)
			if which == "standby" {
				h = 1 - h
			}
			env.hosts[h].kill()
			a.restart(env, h, hostNames[h])
			a.ownersOf("after the purge and the restart", env.hosts...)
			a.settleWebhookPair(t, "after the purge and the restart of the "+which, env.tr, env.dest, env.dirs, env.hosts, env.evs)
		})
	}
}
