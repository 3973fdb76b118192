package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
)

// Attack 9 on 1557051 (changelog/standby.go follow): a standby whose take
// of partition 0's key landed without its answer takes the key naming its
// own run at once. Two owners at once, or a run taking a key another
// process wrote, would be the faults.

// ownerRecordTime is the time of p's first owner record for part at or
// after since (zero if none).
func ownerRecordTime(p *proc, part int, since time.Time) time.Time {
	rec, ok := p.record(roleSince("owner", part, since))
	if !ok {
		return time.Time{}
	}
	return recordTime(rec)
}

// 9a. The owner SIGKILLed, the standby's take of partition 0 lands with
// its answer held; the trap released once the take ended without its
// answer (the standby then owns through its own landed take), and the
// killed host started again at once. Three rounds under traffic. The
// standby owns within a bounded time; the restarted host stands by and
// never logs owner of partition 0 while the other owns; every event once.
func TestOpsAttack9OwnTakeThenOtherRestarted(t *testing.T) {
	aaLong(t)
	a := newA2(t, "PAY")
	env, traps, key := a.trappedUnderTraffic(t, 500)
	var times []time.Duration
	for round := range 3 {
		s := a.killOwnerTrapped(t, env, traps, key, round)
		o := 1 - s
		killed := time.Now()
		consumertest.Eventually(t, time.Minute, hostNames[s]+" saying its take had no answer", func() bool {
			return records(env.hosts[s], func(r map[string]any) bool { // this round's take, not an earlier round's
				msg, _ := r["msg"].(string)
				return strings.HasPrefix(msg, "changelog: the standby cannot reach") && r["partition"] == float64(0) &&
					strings.Contains(fmt.Sprint(r["err"]), "take lease") && !recordTime(r).Before(killed)
			}) > 0
		})
		pid := env.hosts[s].cmd.Process.Pid
		h0, _ := a.r.leaseHolder(0)
		named := strings.Contains(h0, fmt.Sprintf(":%d:", pid))
		traps[s].release()
		at := time.Now()
		env.hosts[o] = a.startVia(hostNames[o], env.dirs[o], traps[o].URL(), env.flags[o]...)
		w := -1
		consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("round %d: partition 0 owned again", round), func() bool {
			for i, p := range env.hosts {
				if roleRecordsSince(p, "owner", 0, at) > 0 {
					w = i
					return true
				}
			}
			return false
		})
		rec := ownerRecordTime(env.hosts[w], 0, at)
		own := said(env.hosts[s], "changelog: the partition had no owner: taking it over", []string{fmt.Sprintf(":%d:", pid)}, 0)
		times = append(times, rec.Sub(at))
		t.Logf("round %d: partition 0's key at the release %q (names the standby %s, pid %d: %v; the take ended %v after the SIGKILL); %s owned partition 0 %v after the release; %s took the key naming itself: %v",
			round, h0, hostNames[s], pid, named, at.Sub(killed).Round(time.Millisecond), hostNames[w], rec.Sub(at).Round(time.Millisecond), hostNames[s], own)
		if named && w != s {
			t.Errorf("round %d: the key named %s at the release, yet the restarted %s owned partition 0", round, hostNames[s], hostNames[w])
		}
		if named && rec.Sub(at) > 2*time.Second {
			t.Errorf("round %d: %s owned partition 0 only %v after its take ended without its answer (the key naming it stood by for)", round, hostNames[s], rec.Sub(at).Round(time.Millisecond))
		}
		a.ownersOf(fmt.Sprintf("round %d: both running again", round), env.hosts...)
		if x := a.ownerOf(fmt.Sprintf("round %d", round), 0, env.hosts...); x != w {
			t.Errorf("round %d: partition 0 owned by %s, after %s logged owner first", round, hostNames[x], hostNames[w])
		}
		consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("round %d: %s standing by for partition 0", round, hostNames[1-w]), func() bool {
			return standsBy(env.hosts[1-w], 0) || roleRecordsSince(env.hosts[1-w], "owner", 0, at) > 0
		})
		if r := ownerRecordTime(env.hosts[1-w], 0, at); !r.IsZero() {
			t.Errorf("round %d: %s logged owner of partition 0 at %v while %s owned it from %v", round, hostNames[1-w], r.Format(time.RFC3339Nano), hostNames[w], rec.Format(time.RFC3339Nano))
		}
	}
	for i, p := range env.hosts { // the final runs: at most one owner record of partition 0 between them since both run
		t.Logf("%s's owner records of partition 0: %d", hostNames[i], roleRecords(p, "owner", 0))
	}
	t.Logf("take-over times after the trap's release: %v", times)
	a.settleWebhookPair(t, "after the own takes", env.tr, env.dest, env.dirs, env.hosts, env.evs)
}

// 9b. The standby's take of partition 0 lands with its answer held; the
// standby SIGKILLed before it owns and a NEW run started on its directory
// at once (a new owner name), the killed owner's host too. Nobody owns a
// partition while its key names the dead run; one host owns once the key
// expired. Two rounds under traffic, every event once.
func TestOpsAttack9OwnTakeThenSIGKILLed(t *testing.T) {
	aaLong(t)
	a := newA2(t, "PAY")
	env, traps, key := a.trappedUnderTraffic(t, 400)
	for round := range 2 {
		s := a.killOwnerTrapped(t, env, traps, key, round)
		o := 1 - s
		dead := env.hosts[s].cmd.Process.Pid
		env.hosts[s].kill()
		killed := time.Now()
		traps[s].release()
		h0, _ := a.r.leaseHolder(0)
		t.Logf("round %d: %s (pid %d) SIGKILLed with its take landed, answer held; partition 0's key: %q", round, hostNames[s], dead, h0)
		if !strings.Contains(h0, fmt.Sprintf(":%d:", dead)) {
			t.Logf("round %d: the key does not name the dead run (its take did not land, or the key expired already)", round)
		}
		env.hosts[s] = a.startVia(hostNames[s], env.dirs[s], traps[s].URL(), env.flags[s]...)
		env.hosts[o] = a.startVia(hostNames[o], env.dirs[o], traps[o].URL(), env.flags[o]...)
		var lastDead [2]time.Time
		consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("round %d: partition 0 owned by a new run", round), func() bool {
			for part := range ownedDurables {
				// The logs first, then the key: an owner record read while
				// the key still names the dead run was logged under it.
				owners := roleRecordsSince(env.hosts[0], "owner", part, killed) + roleRecordsSince(env.hosts[1], "owner", part, killed)
				before := time.Now()
				if a.holderPid(part) == dead {
					lastDead[part] = before
					if owners > 0 {
						h, _ := a.r.leaseHolder(part)
						t.Errorf("round %d: a new run logged owner of partition %d while its key still names the dead run %d (%q):\nA: %s\nB: %s", round, part, dead, h,
							grepLines(env.hosts[0].output(), "taking it over"), grepLines(env.hosts[1].output(), "taking it over"))
						return true
					}
				}
			}
			return roleRecordsSince(env.hosts[0], "owner", 0, killed)+roleRecordsSince(env.hosts[1], "owner", 0, killed) > 0
		})
		a.ownersOf(fmt.Sprintf("round %d: both running again", round), env.hosts...)
		w := a.ownerOf(fmt.Sprintf("round %d", round), 0, env.hosts...)
		rec := ownerRecordTime(env.hosts[w], 0, killed)
		t.Logf("round %d: %s (pid %d) owns partition 0 from %v after the SIGKILL; the key named the dead run until %v after it", round, hostNames[w], env.hosts[w].cmd.Process.Pid,
			rec.Sub(killed).Round(time.Millisecond), lastDead[0].Sub(killed).Round(time.Millisecond))
		if !lastDead[0].IsZero() && rec.Before(lastDead[0]) {
			t.Errorf("round %d: %s logged owner of partition 0 at %v, before the dead run's key was last seen at %v", round, hostNames[w], rec.Format(time.RFC3339Nano), lastDead[0].Format(time.RFC3339Nano))
		}
		for i, p := range env.hosts {
			if roleRecordsSince(p, "owner", 0, killed) > 0 && i != w {
				t.Errorf("round %d: both new runs logged owner of partition 0", round)
			}
		}
	}
	a.settleWebhookPair(t, "after the SIGKILLed own takes", env.tr, env.dest, env.dirs, env.hosts, env.evs)
}
