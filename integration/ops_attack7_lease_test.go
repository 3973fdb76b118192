package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
)

// keysNaming lists the partitions whose lease key names pid right now
// (a bucket that is gone names nobody).
func (a *a2) keysNaming(pid int) (parts []int, holders []string) {
	for i := range ownedDurables {
		h, err := a.r.leaseHolder(i)
		if err != nil {
			holders = append(holders, "error: "+err.Error())
			continue
		}
		holders = append(holders, h)
		if strings.Contains(h, fmt.Sprintf(":%d:", pid)) {
			parts = append(parts, i)
		}
	}
	return parts, holders
}

// stopClean SIGTERMs host h, wants exit 0 and no lease key naming it
// after the exit; it returns when the stop was sent.
func (a *a2) stopClean(t *testing.T, env opsEnv, h int, when string) time.Time {
	t.Helper()
	p := env.hosts[h]
	pid := p.cmd.Process.Pid
	p.signal(syscall.SIGTERM)
	stopped := time.Now()
	code := p.wait(time.Minute)
	kept, holders := a.keysNaming(pid)
	t.Logf("%s: %s (pid %d) exited %d %v after SIGTERM; keys then %q; its last lines:\n%s", when, hostNames[h], pid, code,
		time.Since(stopped).Round(time.Millisecond), holders, grepLines(p.output(), "jetledger run:"))
	if code != 0 {
		t.Errorf("%s: %s exited %d on a clean SIGTERM:\n%s", when, hostNames[h], code, tail(p.output()))
	}
	if len(kept) > 0 {
		t.Errorf("%s: %s stopped cleanly (exit %d) with the lease keys of partitions %v still naming it: %q", when, hostNames[h], code, kept, holders)
	}
	return stopped
}

// 4. The lease bucket deleted under traffic and the owner SIGTERMed right
// after: at once, the moment it said it makes the bucket again (taking its
// keys back), the moment the bucket exists again. It exits 0 leaving no
// key naming it, the other host owns both partitions, the owner comes
// back as standby.
func TestOpsAttack7LeaseBucketDeletedThenOwnerStopped(t *testing.T) {
	aaLong(t)
	a := newA2(t, "PAY")
	env := a.opsPair(t, 900)
	for round, when := range []string{"at-once", "said-made-again", "bucket-again", "said-made-again", "bucket-again", "at-once"} {
		a.atLeast(fmt.Sprintf("round %d", round), 100+100*round, env.dirs...)
		h := a.ownerOf(fmt.Sprintf("round %d: before the deletion", round), 0, env.hosts...)
		deleted := time.Now()
		a.deleteLeaseBucket()
		consumertest.Eventually(t, time.Minute, "the owner at "+when, func() bool {
			switch when {
			case "said-made-again":
				return roleless(env.hosts[h], "changelog: the lease bucket was deleted and is made again", deleted)
			case "bucket-again":
				_, err := a.r.leaseHolder(0)
				return err == nil
			}
			return true
		})
		stopped := a.stopClean(t, env, h, fmt.Sprintf("round %d: the lease bucket deleted, stopped %s", round, when))
		a.r.waitRole(env.hosts[1-h], hostNames[1-h]+" after the owner's stop", "owner", 0, 1)
		consumertest.Eventually(t, 2*time.Minute, "the other host owns both partitions", func() bool {
			return a.holderPid(0) == env.hosts[1-h].cmd.Process.Pid && a.holderPid(1) == env.hosts[1-h].cmd.Process.Pid
		})
		t.Logf("round %d (%s): %s held both keys %v after the owner's SIGTERM; the bucket: %s; its lease lines since the deletion:\n%s", round, when, hostNames[1-h],
			time.Since(stopped).Round(time.Millisecond), a.leaseBucketInfo(), linesSince(env.hosts[1-h], "lease", deleted))
		a.restart(env, h, hostNames[h])
		a.r.waitStandsBy(env.hosts[h], hostNames[h]+" again")
	}
	a.settleWebhookPair(t, "after the lease bucket's deletions", env.tr, env.dest, env.dirs, env.hosts, env.evs)
}

// 6. The owner SIGKILLed, and the standby SIGTERMed in the middle of its
// take-over: the moment the dead run's key is free, the moment the key
// names the standby, the moment it logs that it takes over. The clean
// stop must leave no key naming it; both started again, both partitions
// owned, every event once, nothing sent twice.
func TestOpsAttack7StopMidTakeOver(t *testing.T) {
	aaLong(t)
	a := newA2(t, "PAY")
	env := a.opsPair(t, 1200)
	triggers := []string{"key-free", "key-names-it", "taking-logged"}
	for round := range 12 {
		trigger := triggers[round%len(triggers)]
		a.atLeast(fmt.Sprintf("round %d", round), 80+80*round, env.dirs...)
		o := a.ownerOf(fmt.Sprintf("round %d (%s)", round, trigger), 0, env.hosts...)
		s := 1 - o
		dead, sp := env.hosts[o].cmd.Process.Pid, env.hosts[s]
		env.hosts[o].kill()
		killed := time.Now()
		a.waitTrigger(t, trigger, dead, sp)
		t.Logf("round %d (%s): trigger met %v after the owner's SIGKILL", round, trigger, time.Since(killed).Round(time.Millisecond))
		a.stopClean(t, env, s, fmt.Sprintf("round %d (%s)", round, trigger))
		a.restart(env, o, hostNames[o])
		a.restart(env, s, hostNames[s])
		a.ownersOf(fmt.Sprintf("round %d: both started again", round), env.hosts...)
	}
	a.settleWebhookPair(t, "after the stops mid take-over", env.tr, env.dest, env.dirs, env.hosts, env.evs)
}

// waitTrigger polls, without pause, until partition 0 reaches trigger.
func (a *a2) waitTrigger(t *testing.T, trigger string, dead int, p *proc) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		switch trigger {
		case "key-free":
			h, err := a.r.leaseHolder(0)
			if err == nil && !strings.Contains(h, fmt.Sprintf(":%d:", dead)) {
				return
			}
		case "key-names-it":
			if a.holderPid(0) == p.cmd.Process.Pid {
				return
			}
		case "taking-logged":
			if said(p, "changelog: the partition had no owner: taking it over", nil, 0) {
				return
			}
		}
		if !running(p) {
			t.Fatalf("the standby exited before %s:\n%s", trigger, tail(p.output()))
		}
	}
	t.Fatalf("partition 0 never reached %s within a minute", trigger)
}

// 5. Two processes of the same host (one directory, one host name) started
// at the same moment, as a supervisor started twice: in place of the
// owner, of the standby, and of the owner on an empty disk (both restore
// into the same files). Whatever each does (one refused, one waiting),
// the partitions are owned, every event once, nothing sent twice; the
// twin second to the ledger's lock is refused; the other is stopped
// cleanly before the end.
func TestOpsAttack7TwinsOnOneHostAtOnce(t *testing.T) {
	aaLong(t)
	a := newA2(t, "PAY")
	env := a.opsPair(t, 700)
	for round, which := range []string{"owner-empty", "standby", "owner-empty"} {
		a.atLeast(fmt.Sprintf("round %d", round), 100+150*round, env.dirs...)
		h := a.ownerOf(fmt.Sprintf("round %d", round), 0, env.hosts...)
		if which == "standby" {
			h = 1 - h
		}
		env.hosts[h].kill()
		if which == "owner-empty" {
			wipe(t, env.dirs[h])
		}
		a.restart(env, h, hostNames[h]+" (twin 1)")
		twin := a.start(hostNames[h]+" (twin 2)", env.dirs[h], env.flags[h]...)
		a.ownersOf(fmt.Sprintf("round %d (%s): twins started", round, which), env.hosts[0], env.hosts[1], twin)
		a.atLeast(fmt.Sprintf("round %d: more applied beside the twins", round), 180+150*round, env.dirs...)
		// One run per ledger file: the twin second to its lock is refused
		// (both ran before, restoring and opening the files under each
		// other).
		consumertest.Eventually(t, time.Minute, fmt.Sprintf("round %d: one twin refused for the ledger's lock", round), func() bool {
			n := 0
			for _, p := range []*proc{env.hosts[h], twin} {
				if !running(p) && strings.Contains(p.output(), "is in use by pid") {
					n++
				}
			}
			return n == 1 && (running(env.hosts[h]) || running(twin))
		})
		for i, p := range []*proc{env.hosts[h], twin} {
			t.Logf("round %d (%s): twin %d running %v; owner records %d %d; standing by %v %v; restores %d; its run lines:\n%s", round, which, i+1, running(p),
				roleRecords(p, "owner", 0), roleRecords(p, "owner", 1), standsBy(p, 0), standsBy(p, 1), restores(p), twinLines(p))
		}
		if running(twin) {
			stopOK(t, twin, "twin 2")
		}
		if !running(env.hosts[h]) {
			a.restart(env, h, hostNames[h])
		}
		a.ownersOf(fmt.Sprintf("round %d: one twin left", round), env.hosts...)
	}
	a.settleWebhookPair(t, "after the twins", env.tr, env.dest, env.dirs, env.hosts, env.evs)
}

// 6b. The owner SIGKILLed; the moment its key is free the lease's leader
// node is paused (SIGSTOP), so the standby's take gets no answer (a
// request to the paused node, or a write routed to it); the standby is
// SIGTERMed at once, or once it said it cannot reach its lease; then the
// node is woken. The clean stop exits 0, and a key naming the stopped
// run lasts no longer than a write that landed late plus its TTL; both
// started again, both owned, every event once, nothing sent twice.
func TestOpsAttack7StopWhileTakeUnanswered(t *testing.T) {
	aaLong(t)
	a := newA2(t, "PAY")
	env := a.opsPair(t, 900)
	for round := range 6 {
		a.atLeast(fmt.Sprintf("round %d", round), 80+100*round, env.dirs...)
		o := a.ownerOf(fmt.Sprintf("round %d", round), 0, env.hosts...)
		s := 1 - o
		dead, sp := env.hosts[o].cmd.Process.Pid, env.hosts[s]
		n := max(a.r.c.leaderOf("KV_"+changelog.LeaseBucket), 0)
		env.hosts[o].kill()
		a.waitTrigger(t, "key-free", dead, sp)
		node := a.r.c.nodes[n].p
		node.signal(syscall.SIGSTOP)
		paused := time.Now()
		if round%2 == 1 {
			consumertest.Eventually(t, time.Minute, "the standby saying it cannot reach its lease", func() bool {
				return roleless(sp, "changelog: the standby cannot reach its log or its lease now", paused) || !running(sp)
			})
		}
		pid := sp.cmd.Process.Pid
		sp.signal(syscall.SIGTERM)
		code := sp.wait(2 * time.Minute)
		node.signal(syscall.SIGCONT)
		woke := time.Now()
		t.Logf("round %d: node %d paused %v; %s (pid %d) exited %d; its lines:\n%s", round, n, woke.Sub(paused).Round(time.Millisecond),
			hostNames[s], pid, code, grepLines(sp.output(), "lease"))
		if code != 0 {
			t.Errorf("round %d: %s exited %d on a clean SIGTERM while its take had no answer:\n%s", round, hostNames[s], code, tail(sp.output()))
		}
		a.keyNamesFor(t, round, pid, woke)
		a.restart(env, o, hostNames[o])
		a.restart(env, s, hostNames[s])
		a.ownersOf(fmt.Sprintf("round %d: both started again", round), env.hosts...)
	}
	a.settleWebhookPair(t, "after the stops with takes unanswered", env.tr, env.dest, env.dirs, env.hosts, env.evs)
}

// roleless says whether p logged a record whose msg starts with prefix at or after since.
func roleless(p *proc, prefix string, since time.Time) bool {
	return records(p, func(r map[string]any) bool {
		msg, _ := r["msg"].(string)
		return strings.HasPrefix(msg, prefix) && !recordTime(r).Before(since)
	}) > 0
}

// keyNamesFor reads the keys for 20s after woke (the cluster answering
// again) and fails when a key names pid 10s after woke: a write that
// landed late expires after its TTL (about 2.8s).
func (a *a2) keyNamesFor(t *testing.T, round, pid int, woke time.Time) {
	t.Helper()
	var last time.Time
	seen := 0
	for time.Since(woke) < 20*time.Second {
		if kept, _ := a.keysNaming(pid); len(kept) > 0 {
			last = time.Now()
			seen++
		}
	}
	if seen > 0 {
		t.Logf("round %d: a key named the stopped run (pid %d) on %d reads, the last %v after the node woke", round, pid, seen, last.Sub(woke).Round(time.Millisecond))
	}
	if !last.IsZero() && last.Sub(woke) > 10*time.Second {
		_, holders := a.keysNaming(pid)
		t.Errorf("round %d: a key still named the cleanly stopped run (pid %d) %v after the node woke: %q", round, pid, last.Sub(woke).Round(time.Millisecond), holders)
	}
}

// twinLines are p's records of restores, files set aside, take-overs and
// its end.
func twinLines(p *proc) string {
	var out []string
	for _, sub := range []string{"restoring the partition", "set aside", "took the log over", "jetledger run:", "standby cannot"} {
		if l := grepLines(p.output(), sub); l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// leaseBucketInfo is the lease bucket's creation time, age and metadata.
func (a *a2) leaseBucketInfo() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := a.r.c.js.Stream(ctx, "KV_"+changelog.LeaseBucket)
	if err != nil {
		return err.Error()
	}
	i := st.CachedInfo()
	return fmt.Sprintf("created %s (%v ago), metadata %v", i.Created.Format(time.RFC3339Nano), i.TimeStamp.Sub(i.Created).Round(time.Millisecond), i.Config.Metadata)
}

// linesSince are p's lines holding sub logged at or after since.
func linesSince(p *proc, sub string, since time.Time) string {
	var out []string
	for _, l := range strings.Split(grepLines(p.output(), sub), "\n") {
		var r map[string]any
		if json.Unmarshal([]byte(l), &r) != nil {
			continue
		}
		if !recordTime(r).Before(since) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
