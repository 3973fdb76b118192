package integration

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
)

// Attack 11 on 3e0c1a5 (runOwned settles a lost run's file, settleLost,
// whatever comes next, also when the process stops at the same moment;
// its own 10 s context). Operations: a SIGTERM landing at the loss (a
// paused owner woken and stopped at once; the log deleted under a busy
// owner; the owner's connection stalled so the log is out of reach).

// a11Exit waits for p's exit after a signal sent at sent and returns its
// code and how long it took; past limit is a finding (t.Errorf).
func a11Exit(t *testing.T, p *proc, who string, sent time.Time, limit time.Duration) (int, time.Duration) {
	t.Helper()
	code := p.wait(2 * time.Minute)
	took := time.Since(sent)
	if took > limit {
		t.Errorf("%s took %v to exit after SIGTERM (limit %v):\n%s", who, took.Round(time.Millisecond), limit, grepLines(p.output(), "jetledger run:"))
	}
	return code, took
}

// a11Lines are p's lines holding any of subs.
func a11Lines(p *proc, subs ...string) string {
	var out []string
	for _, l := range strings.Split(p.output(), "\n") {
		for _, s := range subs {
			if strings.Contains(l, s) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// 1. The owner SIGSTOPped under traffic until the standby owns both
// partitions, then SIGCONT and at once SIGTERM: the woken run finds its
// lease lost (settleLost) while the stop comes in. It must exit 0 in
// bounded time, ack nothing of its in-flight batch; started again on its
// files, every event once, copies equal, nothing sent twice.
func TestOpsAttack11SIGTERMAtTheLoss(t *testing.T) {
	aaLong(t)
	for _, kind := range []string{"webhook", "plain"} {
		t.Run(kind, func(t *testing.T) {
			a := newA2(t, "PAY")
			dest, dirs, flags, hosts := a.a10Pair(t, kind)
			const rounds, per = 5, 200
			evs := makeEvents(randFor(t), a.r.pub, rounds*per)
			var tr *traffic
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 111))
			var exits []string
			for round := range rounds {
				var o, base int
				tr, o, base = a.a10Round(t, round, tr, evs[round*per:(round+1)*per], dirs, hosts)
				a.atLeast(fmt.Sprintf("round %d: more applied", round), base+5+rng.IntN(60), dirs...)
				paused := a.a10PauseUntilTakenOver(t, round, o, (round+1)*per, dirs, hosts)
				hosts[o].signal(syscall.SIGCONT)
				hosts[o].signal(syscall.SIGTERM)
				sent := time.Now()
				code, took := a11Exit(t, hosts[o], hostNames[o], sent, 15*time.Second)
				exits = append(exits, fmt.Sprintf("%s exit %d in %v", hostNames[o], code, took.Round(time.Millisecond)))
				t.Logf("round %d: %s exited %d %v after SIGCONT+SIGTERM; its lines: %s", round, hostNames[o], code, took.Round(time.Millisecond),
					a11Lines(hosts[o], "the ledger's last batch", "while stopping", "\"role\":\"lost\"", "jetledger run:"))
				if code != 0 {
					t.Errorf("round %d: %s exited %d on SIGTERM after its loss:\n%s", round, hostNames[o], code, tail(hosts[o].output()))
				}
				if r := ownerRecordTime(hosts[o], 0, paused); !r.IsZero() {
					t.Errorf("round %d: the woken %s logged owner of partition 0 at %v", round, hostNames[o], r)
				}
				at := time.Now()
				hosts[o] = a.start(hostNames[o], dirs[o], flags[o]...)
				hosts[o] = a.a10Follows(t, fmt.Sprintf("round %d", round), hosts[o], hostNames[o], dirs[o], at, flags[o]...)
				t.Logf("round %d: %s restarted: %s", round, hostNames[o], grepLines(hosts[o].output(), "the ledger's last batch"))
				a.a10Check(t, fmt.Sprintf("round %d", round))
			}
			t.Logf("exits: %s", strings.Join(exits, "; "))
			a.a10Finish(t, "after the SIGTERMs at the loss", tr, dest, dirs, hosts, evs)
		})
	}
}

// 2. Both logs deleted under a busy owner with a webhook effect, and the
// owner SIGTERMed right after: exit 0 in bounded time, the lease keys
// not left naming it (the standby owns within a few seconds), and the
// owner started again on its files: every event once, nothing sent twice.
func TestOpsAttack11SIGTERMRightAfterLogsDeletedBusy(t *testing.T) {
	aaLong(t)
	a := newA2(t, "PAY")
	dest, dirs, flags, hosts := a.a10Pair(t, "webhook")
	const rounds, per = 3, 200
	evs := makeEvents(randFor(t), a.r.pub, rounds*per)
	var tr *traffic
	for round := range rounds {
		var o, base int
		tr, o, base = a.a10Round(t, round, tr, evs[round*per:(round+1)*per], dirs, hosts)
		s := 1 - o
		a.atLeast(fmt.Sprintf("round %d: busy", round), base+40, dirs...)
		// The standby's copy close behind (it begins the new log only
		// holding every message the durable acknowledged).
		a.atLeast(fmt.Sprintf("round %d: %s's copy caught up", round, hostNames[s]), fullestRows([]string{dirs[o]}), dirs[s])
		pid := hosts[o].cmd.Process.Pid
		a.deleteLogs(0, 1)
		hosts[o].signal(syscall.SIGTERM)
		sent := time.Now()
		code, took := a11Exit(t, hosts[o], hostNames[o], sent, 15*time.Second)
		var keys []string
		for part := range ownedDurables {
			h, _ := a.r.leaseHolder(part)
			keys = append(keys, fmt.Sprintf("%d:%q", part, h))
			if strings.Contains(h, fmt.Sprintf(":%d:", pid)) {
				t.Errorf("round %d: %s (pid %d) exited %d with partition %d's key still naming it (%q)", round, hostNames[o], pid, code, part, h)
			}
		}
		if code != 0 {
			t.Errorf("round %d: %s exited %d:\n%s", round, hostNames[o], code, tail(hosts[o].output()))
		}
		t.Logf("round %d: %s exited %d %v after SIGTERM; keys then %s; %s's lines: %s", round, hostNames[o], code,
			took.Round(time.Millisecond), strings.Join(keys, " "), hostNames[o],
			a11Lines(hosts[o], "the ledger's last batch", "while stopping", "\"role\":\"lost\"", "jetledger run:", "took the log over"))
		at := time.Now()
		hosts[o] = a.start(hostNames[o], dirs[o], flags[o]...)
		_ = at
		t.Logf("round %d: %s restarted: %s", round, hostNames[o], grepLines(hosts[o].output(), "the ledger's last batch"))
		a.ownersOf(fmt.Sprintf("round %d: both partitions owned", round), hosts...)
		// Who took each partition after the SIGTERM: the standby (its copy
		// full enough to begin the new log) or the restarted host.
		for part := range ownedDurables {
			if r := ownerRecordTime(hosts[s], part, sent); !r.IsZero() {
				t.Logf("round %d: p%d taken by %s %v after the SIGTERM", round, part, hostNames[s], r.Sub(sent).Round(time.Millisecond))
			} else {
				t.Logf("round %d: p%d not taken by %s (%s); owned by the restarted %s; %s's waits: %d", round, part, hostNames[s], hostNames[s], hostNames[o], hostNames[s],
					strings.Count(linesSince(hosts[s], copyWaits, sent), fmt.Sprintf("\"partition\":%d", part)))
			}
		}
		a.a10Check(t, fmt.Sprintf("round %d", round))
	}
	a.a10Finish(t, "after the deletions and SIGTERMs", tr, dest, dirs, hosts, evs)
}

// 3. The log out of reach as the owner loses: its connection stalled at
// a changelog entry (entryTrap, never released while it runs), so its
// lease lapses and the standby owns; the run's settleLost cannot reach
// the log (10 s). SIGTERM then: exit within ~10 s + the drain; the next
// start (through the trap, released) settles the file; every event once.
func TestOpsAttack11SIGTERMWithTheLogOutOfReach(t *testing.T) {
	aaLong(t)
	for _, webhook := range []bool{false, true} {
		t.Run(fmt.Sprint("webhook=", webhook), func(t *testing.T) {
			a := newA2(t, "PAY")
			env, traps := a.entryTrappedPair(t, webhook)
			_, subject := changelog.Names(a.r.stream, ownedDurables[0])
			const rounds, per = 2, 200
			env.evs = makeEvents(randFor(t), a.r.pub, rounds*per)
			for round := range rounds {
				o, began := a.heldUnderTraffic(t, &env, traps, subject, round, env.evs[round*per:(round+1)*per])
				s := 1 - o
				consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("round %d: %s owning partition 0 while %s's connection is held", round, hostNames[s], hostNames[o]), func() bool {
					return roleRecordsSince(env.hosts[s], "owner", 0, began) > 0
				})
				// The SIGTERM lands while the held run's loss settles (or
				// just before): its Settle cannot reach the log.
				env.hosts[o].signal(syscall.SIGTERM)
				sent := time.Now()
				code, took := a11Exit(t, env.hosts[o], hostNames[o], sent, 25*time.Second)
				t.Logf("round %d: %s exited %d %v after SIGTERM with its connection held; its lines: %s", round, hostNames[o], code, took.Round(time.Millisecond),
					a11Lines(env.hosts[o], "the ledger's last batch", "while stopping", "\"role\":\"lost\"", "jetledger run:"))
				traps[o].release(true)
				at := time.Now()
				env.hosts[o] = a.startVia(hostNames[o], env.dirs[o], traps[o].URL(), env.flags[o]...)
				consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("round %d: %s started again standing by", round, hostNames[o]), func() bool {
					return standsBySince(env.hosts[o], 0, at) && standsBySince(env.hosts[o], 1, at) || !running(env.hosts[o])
				})
				alive(t, env.hosts[o], hostNames[o])
				t.Logf("round %d: %s restarted, settle lines: %s", round, hostNames[o], grepLines(env.hosts[o].output(), "the ledger's last batch"))
				if r := ownerRecordTime(env.hosts[o], 0, at); !r.IsZero() && a.holderPid(0) != env.hosts[o].cmd.Process.Pid {
					t.Logf("round %d: %s owned partition 0 at %v after its restart", round, hostNames[o], r)
				}
				a.a10Check(t, fmt.Sprintf("round %d", round))
			}
			if undone := a.a10Finish(t, "after the held connections", env.tr, env.dest, env.dirs, env.hosts, env.evs); undone == 0 {
				t.Logf("NOTE: no batch was undone")
			}
		})
	}
}
