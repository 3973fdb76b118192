package integration

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
)

// Attack 10 on b3fd162 (pipelined batches: an owner commits a batch
// locally while its changelog entry is published; acks wait for the
// entry; an entry that never lands is undone when the file is settled).
// Operations: the owner SIGKILLed again and again, SIGSTOPped with a
// batch in flight, the log and the lease bucket deleted under a busy
// owner, an older build beside a new owner, a standby replaced empty.

// a10Bad are lines no host may log merely for being killed, paused or
// restarted: a copy ahead of its log, or changes that do not fit.
var a10Bad = []string{"the log lost entries this file alone holds", "do not fit"}

// a10Check fails the test for every bad line any process of a logged.
func (a *a2) a10Check(t *testing.T, when string) {
	t.Helper()
	a.mu.Lock()
	procs := append([]*a2proc(nil), a.procs...)
	a.mu.Unlock()
	for _, ap := range procs {
		out := ap.p.output()
		for _, bad := range a10Bad {
			if strings.Contains(out, bad) {
				t.Errorf("%s: %s (pid %d) logged %q:\n%s", when, ap.name, ap.p.cmd.Process.Pid, bad, grepLines(out, bad))
			}
		}
	}
}

// a10Finish logs the settle records, lets the traffic and the webhook
// (dest, if any) finish, checks every event once on both copies and
// nothing sent twice, and that no process logged a bad line; it returns
// the batches undone.
func (a *a2) a10Finish(t *testing.T, when string, tr *traffic, dest *webhooktest.Destination, dirs []string, hosts []*proc, evs []event) (undone int) {
	t.Helper()
	undone, kept := a.a10Settled()
	t.Logf("settle records over all runs: %d undone, %d kept", undone, kept)
	if dest != nil {
		a.settleWebhookPair(t, when, tr, dest, dirs, hosts, evs)
	} else {
		tr.wait(t)
		a.finishApplied(t, dirs, hosts, evs)
	}
	a.a10Check(t, "end")
	return undone
}

// a10Settled counts, over every process of a, the settle records (undone, kept).
func (a *a2) a10Settled() (undone, kept int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ap := range a.procs {
		out := ap.p.output()
		undone += strings.Count(out, "never reached the log: undone")
		kept += strings.Count(out, "cannot be told apart: kept")
	}
	return undone, kept
}

// a10Pair starts an attack's two hosts: with a webhook effect per event
// (4 workers, each send 5 ms) for kind "webhook", else without one.
func (a *a2) a10Pair(t *testing.T, kind string) (dest *webhooktest.Destination, dirs []string, flags [][]string, hosts []*proc) {
	if kind == "webhook" {
		return a.slowWebhookPair(t, 5*time.Millisecond, 4)
	}
	dirs, flags, hosts = a.startPair()
	return nil, dirs, flags, hosts
}

// a10Round begins a round: the last round's traffic finished, the owner
// of partition 0 and the fullest copy's rows, then evs sent.
func (a *a2) a10Round(t *testing.T, round int, last *traffic, evs []event, dirs []string, hosts []*proc) (tr *traffic, owner, base int) {
	if last != nil {
		last.wait(t)
	}
	owner = a.ownerOf(fmt.Sprintf("round %d", round), 0, hosts...)
	base = fullestRows(dirs)
	return a.traffic(evs, 5, 5*time.Millisecond), owner, base
}

// a10PauseUntilTakenOver SIGSTOPs owner o until the other host owns both
// partitions and has applied 10 more events (at most upTo), and returns
// when o was paused.
func (a *a2) a10PauseUntilTakenOver(t *testing.T, round, o, upTo int, dirs []string, hosts []*proc) time.Time {
	s := 1 - o
	hosts[o].signal(syscall.SIGSTOP)
	consumertest.Eventually(t, 10*time.Second, "stopped", func() bool { return isStopped(hosts[o]) })
	paused := time.Now()
	consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("round %d: %s owning both partitions", round, hostNames[s]), func() bool {
		return roleRecordsSince(hosts[s], "owner", 0, paused) > 0 && roleRecordsSince(hosts[s], "owner", 1, paused) > 0
	})
	// The new owner writes over the paused one's position.
	a.atLeast(fmt.Sprintf("round %d: applied by the new owner", round), min(fullestRows([]string{dirs[s]})+10, upTo), dirs[s])
	return paused
}

// standsBySince says whether p logged standing by for part at or after since.
func standsBySince(p *proc, part int, since time.Time) bool {
	return records(p, func(r map[string]any) bool {
		msg, _ := r["msg"].(string)
		return strings.HasPrefix(msg, "changelog: standing by") && r["partition"] == float64(part) && !recordTime(r).Before(since)
	}) > 0
}

// a10Follows waits until p stands by for both partitions since since, or
// exits (then it is started again on its files, once), and returns p or
// its replacement.
func (a *a2) a10Follows(t *testing.T, what string, p *proc, name, dir string, since time.Time, flags ...string) *proc {
	t.Helper()
	consumertest.Eventually(t, 2*time.Minute, what+": "+name+" standing by for both partitions, or exiting", func() bool {
		return !running(p) || standsBySince(p, 0, since) && standsBySince(p, 1, since)
	})
	if !running(p) {
		t.Errorf("%s: %s exited %d instead of standing by:\n%s", what, name, p.wait(0), tail(p.output()))
		p = a.start(name, dir, flags...)
		a.r.waitStandsBy(p, name+" started again")
	}
	return p
}

// a. The owner SIGKILLed at random moments under steady traffic with a
// webhook effect per event, started again on its files at once, the
// standby owning in between; six rounds. Every event once, nothing sent
// twice, copies equal, no bad line, the killed host stands by again.
func TestOpsAttack10KillOwnerRepeatedly(t *testing.T) {
	aaLong(t)
	for _, kind := range []string{"plain", "webhook"} {
		t.Run(kind, func(t *testing.T) {
			a := newA2(t, "PAY")
			dest, dirs, flags, hosts := a.a10Pair(t, kind)
			const rounds, per = 8, 150
			evs := makeEvents(randFor(t), a.r.pub, rounds*per)
			var tr *traffic
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 10))
			for round := range rounds {
				var o, base int
				tr, o, base = a.a10Round(t, round, tr, evs[round*per:(round+1)*per], dirs, hosts)
				n := base + 5 + rng.IntN(per-20)
				a.atLeast(fmt.Sprintf("round %d: more applied", round), n, dirs...)
				hosts[o].kill()
				killed := time.Now()
				s := 1 - o
				consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("round %d: %s owning both partitions", round, hostNames[s]), func() bool {
					return roleRecordsSince(hosts[s], "owner", 0, killed) > 0 && roleRecordsSince(hosts[s], "owner", 1, killed) > 0 ||
						logged(hosts[s], "owner", 0) && logged(hosts[s], "owner", 1) && a.holderPid(0) == hosts[s].cmd.Process.Pid && a.holderPid(1) == hosts[s].cmd.Process.Pid
				})
				at := time.Now()
				hosts[o] = a.start(hostNames[o], dirs[o], flags[o]...)
				hosts[o] = a.a10Follows(t, fmt.Sprintf("round %d", round), hosts[o], hostNames[o], dirs[o], at, flags[o]...)
				t.Logf("round %d: %s killed at %d rows; restarted: %s", round, hostNames[o], n, grepLines(hosts[o].output(), "the ledger's last batch"))
				a.a10Check(t, fmt.Sprintf("round %d", round))
			}
			a.a10Finish(t, "after the SIGKILLs", tr, dest, dirs, hosts, evs)
		})
	}
}

// b. The owner SIGSTOPped with batches in flight until the standby owns
// both partitions, then SIGCONTed: it must not ack its in-flight batch,
// its file settles and it stands by again. Four rounds under a busy
// traffic with a webhook effect per event.
func TestOpsAttack10StopOwnerInFlight(t *testing.T) {
	aaLong(t)
	for _, kind := range []string{"plain", "webhook"} {
		t.Run(kind, func(t *testing.T) {
			a := newA2(t, "PAY")
			dest, dirs, flags, hosts := a.a10Pair(t, kind)
			const rounds, per = 6, 200
			evs := makeEvents(randFor(t), a.r.pub, rounds*per)
			var tr *traffic
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
			for round := range rounds {
				var o, base int
				tr, o, base = a.a10Round(t, round, tr, evs[round*per:(round+1)*per], dirs, hosts)
				a.atLeast(fmt.Sprintf("round %d: more applied", round), base+5+rng.IntN(60), dirs...)
				a.a10PauseUntilTakenOver(t, round, o, (round+1)*per, dirs, hosts)
				woke := time.Now()
				hosts[o].signal(syscall.SIGCONT)
				consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("round %d: %s standing by again, or exiting", round, hostNames[o]), func() bool {
					return !running(hosts[o]) || standsBySince(hosts[o], 0, woke) && standsBySince(hosts[o], 1, woke)
				})
				if !running(hosts[o]) {
					code := hosts[o].wait(0)
					t.Logf("round %d: %s exited %d after its pause: %s", round, hostNames[o], code, grepLines(hosts[o].output(), "jetledger run:"))
					if code == 0 {
						t.Errorf("round %d: %s exited 0 after its pause", round, hostNames[o])
					}
					at := time.Now()
					hosts[o] = a.start(hostNames[o], dirs[o], flags[o]...)
					hosts[o] = a.a10Follows(t, fmt.Sprintf("round %d restarted", round), hosts[o], hostNames[o], dirs[o], at, flags[o]...)
				}
				if r := ownerRecordTime(hosts[o], 0, woke); !r.IsZero() {
					t.Errorf("round %d: the woken %s logged owner of partition 0 at %v", round, hostNames[o], r)
				}
				var lines []string
				for _, l := range strings.Split(hosts[o].output(), "\n") {
					if strings.Contains(l, "the ledger's last batch") || strings.Contains(l, "lost") && strings.Contains(l, "role") {
						var rec map[string]any
						if json.Unmarshal([]byte(l), &rec) == nil && !recordTime(rec).Before(woke) {
							lines = append(lines, l)
						}
					}
				}
				t.Logf("round %d: %s woken; since: %s", round, hostNames[o], strings.Join(lines, "\n"))
				a.a10Check(t, fmt.Sprintf("round %d", round))
			}
			a.a10Finish(t, "after the pauses", tr, dest, dirs, hosts, evs)
		})
	}
}

// c. The changelog streams (or the lease bucket) deleted under an owner
// committing batches at a high rate, twice; then both hosts SIGKILLed
// and started again. Every event once, nothing sent twice, no bad line.
func TestOpsAttack10DeleteUnderBusyOwner(t *testing.T) {
	aaLong(t)
	for _, what := range []string{"log", "lease"} {
		t.Run(what, func(t *testing.T) {
			a := newA2(t, "PAY")
			dest, dirs, flags, hosts := a.slowWebhookPair(t, 2*time.Millisecond, 4)
			evs := makeEvents(randFor(t), a.r.pub, 800)
			tr := a.traffic(evs, 10, 5*time.Millisecond)
			for round := range 2 {
				a.atLeast(fmt.Sprintf("round %d: busy", round), 150+250*round, dirs...)
				since := time.Now()
				if what == "log" {
					a.deleteLogs(0, 1)
				} else {
					a.deleteLeaseBucket()
				}
				consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("round %d: both partitions owned again after the deletion", round), func() bool {
					for part := range ownedDurables {
						if roleRecordsSince(hosts[0], "owner", part, since)+roleRecordsSince(hosts[1], "owner", part, since) == 0 &&
							!(running(hosts[0]) && logged(hosts[0], "owner", part) && a.holderPid(part) == hosts[0].cmd.Process.Pid) &&
							!(running(hosts[1]) && logged(hosts[1], "owner", part) && a.holderPid(part) == hosts[1].cmd.Process.Pid) {
							return false
						}
					}
					return true
				})
				a.atLeast(fmt.Sprintf("round %d: applied after the deletion", round), min(fullestRows(dirs)+30, len(evs)), dirs...)
				hosts[0].kill()
				hosts[1].kill()
				hosts[0] = a.start("A", dirs[0], flags[0]...)
				hosts[1] = a.start("B", dirs[1], flags[1]...)
				a.ownersOf(fmt.Sprintf("round %d: both restarted", round), hosts...)
				a.a10Check(t, fmt.Sprintf("round %d", round))
			}
			a.a10Finish(t, "after the deletions", tr, dest, dirs, hosts, evs)
		})
	}
}

// d. A new-build owner beside an OLD-build standby (restoring the new
// owner's snapshot, a file of schema 20), under traffic; the new owner
// SIGKILLed mid-traffic: the old standby takes over (or says why not).
// Then the new host started again on its files. Every event once, or a
// clear refusal.
func TestOpsAttack10OldStandbyTakesOverFromKilledNewOwner(t *testing.T) {
	aaLong(t)
	for _, old := range oldBins(t) {
		t.Run("old", func(t *testing.T) {
			a := newA2(t, "PAY")
			dirs := []string{t.TempDir(), t.TempDir()}
			flags := [][]string{{"--changelog", "--standby"}, {"--standby"}}
			hosts := []*proc{a.start("A(new)", dirs[0], flags[0]...), nil}
			a.r.waitRole(hosts[0], "A (new)", "owner", 0, 1)
			evs := makeEvents(randFor(t), a.r.pub, 600)
			a.r.publish(evs[:100])
			a.r.waitApplied("100 applied", 100, dirs[0])
			hosts[1] = a.startBin("B(old)", old, dirs[1], flags[1]...)
			var standing bool
			consumertest.Eventually(t, 2*time.Minute, "the old standby standing by, or exiting", func() bool {
				standing = standsBy(hosts[1], 0) && standsBy(hosts[1], 1)
				return standing || !running(hosts[1])
			})
			if !standing {
				t.Logf("the old standby given the new owner's snapshot exited %d:\n%s", hosts[1].wait(0), tail(hosts[1].output()))
				return
			}
			tr := a.traffic(evs[100:], 10, 10*time.Millisecond)
			a.atLeast("busy", 250, dirs[0])
			hosts[0].kill()
			killed := time.Now()
			took := true
			consumertest.Eventually(t, 2*time.Minute, "the old standby owning both, or exiting", func() bool {
				if !running(hosts[1]) {
					took = false
					return true
				}
				return roleRecordsSince(hosts[1], "owner", 0, killed) > 0 && roleRecordsSince(hosts[1], "owner", 1, killed) > 0
			})
			if !took {
				t.Fatalf("the old standby exited %d when its new owner was SIGKILLed:\n%s", hosts[1].wait(0), tail(hosts[1].output()))
			}
			at := time.Now()
			hosts[0] = a.start("A(new) again", dirs[0], flags[0]...)
			hosts[0] = a.a10Follows(t, "A (new) again", hosts[0], "A(new) again", dirs[0], at, flags[0]...)
			t.Logf("A (new) again settled: %s", grepLines(hosts[0].output(), "the ledger's last batch"))
			tr.wait(t)
			a.r.waitApplied("every event applied", len(evs), dirs...)
			a.a10Check(t, "end")
			a.finish(t, dirs, hosts, evs, nil)
		})
	}
}

// d2. As d, but the killed new owner's host started again on the OLD
// build (a rollback) on its file of schema 20 that may hold a batch that
// never reached the log.
func TestOpsAttack10RollbackKilledNewOwner(t *testing.T) {
	aaLong(t)
	for _, old := range oldBins(t) {
		t.Run("old", func(t *testing.T) {
			a := newA2(t, "PAY")
			dirs, flags, hosts := a.startPair()
			evs := makeEvents(randFor(t), a.r.pub, 600)
			tr := a.traffic(evs, 10, 10*time.Millisecond)
			a.atLeast("busy", 150, dirs...)
			hosts[0].kill()
			a.ownersOf("B taking over", hosts...)
			hosts[0] = a.startBin("A(old)", old, dirs[0], flags[0]...)
			var standing bool
			consumertest.Eventually(t, 2*time.Minute, "the old A standing by, or exiting", func() bool {
				standing = standsBy(hosts[0], 0) && standsBy(hosts[0], 1)
				return standing || !running(hosts[0])
			})
			if !standing {
				t.Logf("the old A on the new file exited %d:\n%s", hosts[0].wait(0), tail(hosts[0].output()))
				tr.wait(t)
				return
			}
			t.Logf("the old build stands by on the new build's file")
			tr.wait(t)
			a.r.waitApplied("every event applied", len(evs), dirs...)
			a.a10Check(t, "end")
			a.finish(t, dirs, hosts, evs, nil)
		})
	}
}

// e. The standby replaced with an empty disk while the owner runs at a
// high rate, three times; then the owner SIGKILLed: the replaced standby
// takes over from the copy it restored. Every event once.
func TestOpsAttack10ReplaceStandbyEmptyBusy(t *testing.T) {
	aaLong(t)
	a := newA2(t, "PAY")
	dest, dirs, flags, hosts := a.slowWebhookPair(t, 2*time.Millisecond, 4)
	evs := makeEvents(randFor(t), a.r.pub, 900)
	tr := a.traffic(evs, 10, 5*time.Millisecond)
	for round := range 3 {
		a.atLeast(fmt.Sprintf("round %d: busy", round), 100+200*round, dirs[0])
		hosts[1].kill()
		wipe(t, dirs[1])
		hosts[1] = a.start("B", dirs[1], flags[1]...)
		a.r.waitStandsBy(hosts[1], fmt.Sprintf("round %d: B replaced", round))
		a.a10Check(t, fmt.Sprintf("round %d", round))
	}
	hosts[0].kill()
	killed := time.Now()
	consumertest.Eventually(t, 2*time.Minute, "B owning both partitions", func() bool {
		return roleRecordsSince(hosts[1], "owner", 0, killed) > 0 && roleRecordsSince(hosts[1], "owner", 1, killed) > 0
	})
	at := time.Now()
	hosts[0] = a.start("A", dirs[0], flags[0]...)
	hosts[0] = a.a10Follows(t, "A again", hosts[0], "A", dirs[0], at, flags[0]...)
	a.settleWebhookPair(t, "after the replacements", tr, dest, dirs, hosts, evs)
	a.a10Check(t, "end")
}

// f. The owner's publish of a batch's entry held on the wire (its
// connection stalls from that chunk on) while the batch is committed
// locally: the standby takes the partition over; then the held chunk is
// dropped with the owner running (drop-live), dropped with the owner
// SIGKILLed first and started again on its files (drop-kill), or let
// through late, after the new owner wrote (late). The owner's batch was
// never acked: its file settles (undone), it stands by, every event once,
// nothing sent twice. Three rounds each, under traffic.
func TestOpsAttack10EntryHeld(t *testing.T) {
	aaLong(t)
	for _, c := range []struct {
		how     string
		webhook bool
	}{{"drop-live", false}, {"drop-kill", false}, {"late", false}, {"drop-live", true}, {"late", true}} {
		name := c.how
		if c.webhook {
			name += "-webhook"
		}
		t.Run(name, func(t *testing.T) {
			a := newA2(t, "PAY")
			env, traps := a.entryTrappedPair(t, c.webhook)
			t.Cleanup(func() {
				if !t.Failed() {
					return
				}
				for i, p := range env.hosts {
					var keep []string
					for _, l := range strings.Split(p.output(), "\n") {
						if strings.Contains(l, `"level":"WARN"`) || strings.Contains(l, `"level":"ERROR"`) || strings.Contains(l, "changelog:") || strings.Contains(l, "role") {
							keep = append(keep, l)
						}
					}
					t.Logf("%s (pid %d) at the failure, last notable lines:\n%s", hostNames[i], p.cmd.Process.Pid, strings.Join(keep[max(0, len(keep)-40):], "\n"))
				}
			})
			_, subject := changelog.Names(a.r.stream, ownedDurables[0])
			const rounds, per = 3, 200
			env.evs = makeEvents(randFor(t), a.r.pub, rounds*per)
			for round := range rounds {
				o, began := a.heldUnderTraffic(t, &env, traps, subject, round, env.evs[round*per:(round+1)*per])
				s := 1 - o
				held := time.Now()
				consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("round %d: %s owning partition 0 while %s's entry is held", round, hostNames[s], hostNames[o]), func() bool {
					return roleRecordsSince(env.hosts[s], "owner", 0, began) > 0 // it may have taken it just before the trap sprang
				})
				a.atLeast(fmt.Sprintf("round %d: applied by the new owner", round), min(fullestRows([]string{env.dirs[s]})+10, (round+1)*per), env.dirs[s])
				at := time.Now()
				switch c.how {
				case "drop-live":
					traps[o].release(true)
				case "drop-kill":
					env.hosts[o].kill()
					traps[o].release(true)
					at = time.Now()
					env.hosts[o] = a.startVia(hostNames[o], env.dirs[o], traps[o].URL(), env.flags[o]...)
				case "late":
					traps[o].release(false)
				}
				var exited bool
				consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("round %d: %s standing by for partition 0 again, or exiting", round, hostNames[o]), func() bool {
					if !running(env.hosts[o]) {
						exited = true
						return true
					}
					return standsBySince(env.hosts[o], 0, at) // partition 1 may stay as it was
				})
				if exited {
					code := env.hosts[o].wait(0)
					t.Logf("round %d: %s exited %d: %s", round, hostNames[o], code, grepLines(env.hosts[o].output(), "jetledger run:"))
					if code == 0 {
						t.Errorf("round %d: %s exited 0", round, hostNames[o])
					}
					at = time.Now()
					env.hosts[o] = a.startVia(hostNames[o], env.dirs[o], traps[o].URL(), env.flags[o]...)
					consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("round %d: %s started again standing by", round, hostNames[o]), func() bool {
						return standsBySince(env.hosts[o], 0, at)
					})
				}
				if r := ownerRecordTime(env.hosts[o], 0, held); !r.IsZero() {
					t.Errorf("round %d: %s logged owner of partition 0 at %v while %s owned it", round, hostNames[o], r, hostNames[s])
				}
				t.Logf("round %d (%s): %s's settle lines: %s", round, c.how, hostNames[o], grepLines(env.hosts[o].output(), "the ledger's last batch"))
				a.a10Check(t, fmt.Sprintf("round %d", round))
				// A reset (or a stale connection) sends the host's client to
				// other nodes it learned of, past its trap: started again
				// (SIGTERM, exit 0) to go through the trap in the next round.
				stopOK(t, env.hosts[o], hostNames[o])
				at = time.Now()
				env.hosts[o] = a.startVia(hostNames[o], env.dirs[o], traps[o].URL(), env.flags[o]...)
				consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("round %d: %s started again standing by", round, hostNames[o]), func() bool {
					return standsBySince(env.hosts[o], 0, at) && standsBySince(env.hosts[o], 1, at) || logged(env.hosts[o], "owner", 1)
				})
			}
			if undone := a.a10Finish(t, "after the held entries", env.tr, env.dest, env.dirs, env.hosts, env.evs); undone == 0 {
				t.Logf("NOTE: no batch was undone: the held entry was not a pipelined batch's, or it landed")
			}
		})
	}
}

// d3. The old build's standby on its own copy (schema 19, made by the old
// build) beside a new-build owner (upgradedOwnerBesideOldStandby); the
// new owner SIGKILLed mid-traffic: the old standby takes over from its
// copy; the new host started again on its file (which may hold a batch
// the log lacks) must settle it and follow the old owner's entries.
func TestOpsAttack10OldCopyTakesOverFromKilledNewOwner(t *testing.T) {
	aaLong(t)
	for _, old := range oldBins(t) {
		t.Run("old", func(t *testing.T) {
			a := newA2(t, "PAY")
			dirs, flags, hosts, evs, tr := a.upgradedOwnerBesideOldStandby(t, old)
			var standing bool
			consumertest.Eventually(t, 2*time.Minute, "the old standby standing by, or exiting", func() bool {
				standing = standsBy(hosts[1], 0) && standsBy(hosts[1], 1)
				return standing || !running(hosts[1])
			})
			if !standing {
				t.Logf("the old standby on its copy beside the new owner exited %d:\n%s", hosts[1].wait(0), tail(hosts[1].output()))
				tr.wait(t)
				return
			}
			tr.wait(t)
			more := makeEvents(randFor(t), a.r.pub, 400)
			tr2 := a.traffic(more, 10, 5*time.Millisecond)
			a.atLeast("busy on the new owner", len(evs)+100, dirs[0])
			hosts[0].kill()
			killed := time.Now()
			took := true
			consumertest.Eventually(t, 2*time.Minute, "the old standby owning both, or exiting", func() bool {
				if !running(hosts[1]) {
					took = false
					return true
				}
				return roleRecordsSince(hosts[1], "owner", 0, killed) > 0 && roleRecordsSince(hosts[1], "owner", 1, killed) > 0
			})
			if !took {
				t.Fatalf("the old standby exited %d when its new owner was SIGKILLed:\n%s", hosts[1].wait(0), tail(hosts[1].output()))
			}
			at := time.Now()
			hosts[0] = a.start("A(new) again", dirs[0], flags[0]...)
			hosts[0] = a.a10Follows(t, "A (new) again", hosts[0], "A(new) again", dirs[0], at, flags[0]...)
			t.Logf("A (new) again settled: %s", grepLines(hosts[0].output(), "the ledger's last batch"))
			tr2.wait(t)
			all := append(append([]event(nil), evs...), more...)
			a.r.waitApplied("every event applied", len(all), dirs...)
			a.a10Check(t, "end")
			a.finish(t, dirs, hosts, all, nil)
		})
	}
}

// g. The owner's entry held on the wire (as f), then: (log-deleted) the
// partition's changelog deleted while it is held, the hold then dropped:
// the file's unlogged batch names a log instance that is gone; or
// (late-idle) no traffic while it is held, the standby takes over and
// writes nothing, the held entry let through late: it may land right
// after the new owner's position. Two rounds each; every event once,
// copies equal, no bad line.
func TestOpsAttack10EntryHeldThen(t *testing.T) {
	aaLong(t)
	for _, how := range []string{"log-deleted", "late-idle", "log-deleted-kill"} {
		t.Run(how, func(t *testing.T) {
			a := newA2(t, "PAY")
			env, traps := a.entryTrappedPair(t, false)
			_, subject := changelog.Names(a.r.stream, ownedDurables[0])
			const rounds, per = 2, 100
			env.evs = makeEvents(randFor(t), a.r.pub, rounds*per)
			for round := range rounds {
				evs := env.evs[round*per : (round+1)*per]
				o := a.ownerOf(fmt.Sprintf("round %d", round), 0, env.hosts...)
				s := 1 - o
				sprung := traps[o].arm(subject)
				a.r.publish(evs[:8]) // a few: partition 0's batch of them to hold
				select {
				case <-sprung:
				case <-time.After(time.Minute):
					t.Fatalf("round %d: %s published no entry of partition 0 within a minute", round, hostNames[o])
				}
				held := time.Now()
				if strings.HasPrefix(how, "log-deleted") {
					a.deleteLogs(0)
				}
				consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("round %d: partition 0 owned by %s while %s's entry is held", round, hostNames[s], hostNames[o]), func() bool {
					return roleRecordsSince(env.hosts[s], "owner", 0, held) > 0
				})
				at := time.Now()
				switch how {
				case "log-deleted":
					traps[o].release(true)
				case "log-deleted-kill":
					env.hosts[o].kill()
					traps[o].release(true)
					at = time.Now()
					env.hosts[o] = a.startVia(hostNames[o], env.dirs[o], traps[o].URL(), env.flags[o]...)
				case "late-idle":
					traps[o].release(false)
				}
				var exited, stuck bool
				const person = "have a person settle the partition"
				consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("round %d: %s standing by for partition 0 again, exiting, or waiting for a person", round, hostNames[o]), func() bool {
					if !running(env.hosts[o]) {
						exited = true
						return true
					}
					stuck = strings.Contains(env.hosts[o].output(), person)
					return stuck || standsBySince(env.hosts[o], 0, at)
				})
				if stuck {
					var ulog, clog, entry string
					var useq, cseq int64
					db := openLedgers(t, partDB(env.dirs[o], 0))[0]
					uerr := db.QueryRow(`SELECT log, seq, entry FROM jetledger_unlogged`).Scan(&ulog, &useq, &entry)
					cerr := db.QueryRow(`SELECT log, seq FROM jetledger_changelog WHERE id = 1`).Scan(&clog, &cseq)
					t.Fatalf("round %d (%s): %s, whose held entry never reached any log (none of its batch acked), waits for a person instead of undoing the batch:\n%s\nsettle lines: %q\nits file: jetledger_unlogged = (%s, %d, %s) err %v; jetledger_changelog = (%s, %d) err %v",
						round, how, hostNames[o], grepLines(env.hosts[o].output(), person), grepLines(env.hosts[o].output(), "the ledger's last batch"),
						ulog, useq, entry, uerr, clog, cseq, cerr)
				}
				if exited {
					t.Errorf("round %d: %s exited %d: %s", round, hostNames[o], env.hosts[o].wait(0), grepLines(env.hosts[o].output(), "jetledger run:"))
					at = time.Now()
					env.hosts[o] = a.startVia(hostNames[o], env.dirs[o], traps[o].URL(), env.flags[o]...)
				}
				a.r.publish(evs)
				a.r.waitApplied(fmt.Sprintf("round %d: applied", round), (round+1)*per, env.dirs[s])
				t.Logf("round %d (%s): %s's settle lines: %s", round, how, hostNames[o], grepLines(env.hosts[o].output(), "the ledger's last batch"))
				a.a10Check(t, fmt.Sprintf("round %d", round))
				stopOK(t, env.hosts[o], hostNames[o])
				at = time.Now()
				env.hosts[o] = a.startVia(hostNames[o], env.dirs[o], traps[o].URL(), env.flags[o]...)
				consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("round %d: %s started again standing by", round, hostNames[o]), func() bool {
					return standsBySince(env.hosts[o], 0, at) || !running(env.hosts[o])
				})
				alive(t, env.hosts[o], hostNames[o])
			}
			undone, kept := a.a10Settled()
			t.Logf("settle records over all runs: %d undone, %d kept", undone, kept)
			a.finishApplied(t, env.dirs, env.hosts, env.evs)
			a.a10Check(t, "end")
		})
	}
}

// c2. No trap: the changelog streams deleted under an owner committing
// batches at a high rate and the owner SIGKILLed at once (an operator's
// clean-up racing a crash); the standby begins the new logs; the owner
// started again on its files. Four rounds. The owner must stand by again
// (its file's in-flight batch, never acked, undone), not wait for a person.
func TestOpsAttack10DeleteLogKillOwner(t *testing.T) {
	aaLong(t)
	a := newA2(t, "PAY")
	dirs, flags, hosts := a.startPair()
	const rounds, per = 4, 250
	evs := makeEvents(randFor(t), a.r.pub, rounds*per)
	var tr *traffic
	for round := range rounds {
		if tr != nil {
			tr.wait(t)
		}
		o := a.ownerOf(fmt.Sprintf("round %d", round), 0, hosts...)
		s := 1 - o
		base := fullestRows(dirs)
		tr = a.traffic(evs[round*per:(round+1)*per], 10, 2*time.Millisecond)
		a.atLeast(fmt.Sprintf("round %d: busy", round), base+40, dirs[s])
		a.deleteLogs(0, 1)
		hosts[o].kill()
		killed := time.Now()
		consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("round %d: %s owning both partitions, or waiting for the killed host's copy", round, hostNames[s]), func() bool {
			return roleRecordsSince(hosts[s], "owner", 0, killed) > 0 && roleRecordsSince(hosts[s], "owner", 1, killed) > 0 ||
				records(hosts[s], func(r map[string]any) bool {
					msg, _ := r["msg"].(string)
					return strings.HasPrefix(msg, "changelog: the partition's copy cannot go on yet") && !recordTime(r).Before(killed)
				}) > 0
		})
		at := time.Now()
		hosts[o] = a.start(hostNames[o], dirs[o], flags[o]...)
		a.ownersOf(fmt.Sprintf("round %d: both running again", round), hosts...)
		const stuck = "have a person settle the partition"
		var isStuck bool
		consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("round %d: %s standing by for both, or waiting for a person", round, hostNames[o]), func() bool {
			isStuck = strings.Contains(hosts[o].output(), stuck)
			ok := func(part int) bool {
				return standsBySince(hosts[o], part, at) || roleRecordsSince(hosts[o], "owner", part, at) > 0
			}
			return isStuck || !running(hosts[o]) || ok(0) && ok(1)
		})
		t.Logf("round %d: %s restarted; settle lines: %s", round, hostNames[o], grepLines(hosts[o].output(), "the ledger's last batch"))
		if isStuck {
			t.Fatalf("round %d: %s, started again after its SIGKILL as the log was deleted, waits for a person:\n%s\nits settle lines: %s", round, hostNames[o],
				grepLines(hosts[o].output(), stuck), grepLines(hosts[o].output(), "the ledger's last batch"))
		}
		alive(t, hosts[o], hostNames[o])
		a.a10Check(t, fmt.Sprintf("round %d", round))
	}
	tr.wait(t)
	a.finishApplied(t, dirs, hosts, evs)
	a.a10Check(t, "end")
}
