package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/group"
)

// Helper-30's attacks on run --group with operations: restarts, kills,
// replacements, node kills, pauses, deletions, a member of another shape,
// two hosts on one directory, a static run beside the group. Behind
// JETLEDGER_CLUSTER=long: each takes a minute or more.

// h30Long skips the test unless JETLEDGER_CLUSTER=long.
func h30Long(t *testing.T) {
	t.Helper()
	if os.Getenv("JETLEDGER_CLUSTER") != "long" {
		t.Skip("helper-30's group attacks run with JETLEDGER_CLUSTER=long")
	}
}

// h30Unowned is the longest stretch a partition's lease was seen free
// ("no owner") beyond which the group is said to have left it too long.
const h30Unowned = 20 * time.Second

// joinIn starts a host of the group in dir (kept: a restart on the same
// files), with partitions and standbys as given.
func (g *groupWorld) joinIn(dir string, partitions, standbys int) *groupHost {
	return g.joinWith(binPath, dir, partitions, standbys)
}

// unownedWatch samples every partition's lease holder and keeps, per
// partition, the longest stretch it was free.
type unownedWatch struct {
	stopOnce sync.Once
	stopCh   chan struct{}
	done     chan struct{}
	mu       sync.Mutex
	longest  []time.Duration
	at       []time.Time // when the longest stretch began
}

func (g *groupWorld) watchUnowned() *unownedWatch {
	w := &unownedWatch{stopCh: make(chan struct{}), done: make(chan struct{}), longest: make([]time.Duration, g.n), at: make([]time.Time, g.n)}
	js, n, durable := g.c.js, g.n, g.durable
	go func() {
		defer close(w.done)
		since := make([]time.Time, n)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stopCh:
				return
			case <-tick.C:
			}
			for i := range n {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				holder, err := changelog.ReadHolder(ctx, js, groupStream, fmt.Sprintf("%s-p%d", durable, i))
				cancel()
				if err != nil {
					continue // no answer (a node down): no evidence either way
				}
				now := time.Now()
				if holder != "" {
					since[i] = time.Time{}
					continue
				}
				if since[i].IsZero() {
					since[i] = now
				}
				w.mu.Lock()
				if d := now.Sub(since[i]); d > w.longest[i] {
					w.longest[i], w.at[i] = d, since[i]
				}
				w.mu.Unlock()
			}
		}
	}()
	g.t.Cleanup(w.stop)
	return w
}

func (w *unownedWatch) stop() {
	w.stopOnce.Do(func() { close(w.stopCh) })
	<-w.done
}

// check stops the watch and fails the test for a partition free longer than h30Unowned.
func (w *unownedWatch) check(t *testing.T) {
	t.Helper()
	w.stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, d := range w.longest {
		t.Logf("partition %d: longest without a lease holder: %v (from %s)", i, d.Round(10*time.Millisecond), w.at[i].Format("15:04:05.000"))
		if d > h30Unowned {
			t.Errorf("partition %d had no lease holder for %v (from %s): longer than %v", i, d.Round(10*time.Millisecond), w.at[i].Format("15:04:05.000"), h30Unowned)
		}
	}
}

// statusOwned waits for `group status` to exit 0 with every slot owned.
func (g *groupWorld) statusOwned(timeout time.Duration) {
	g.t.Helper()
	var last group.Status
	var code int
	ok := func() bool {
		last, code = g.status()
		return code == 0 && len(last.Slots) == g.n &&
			!slices.ContainsFunc(last.Slots, func(s group.SlotStatus) bool { return s.State != group.SlotOwned })
	}
	if !poll(timeout, ok) {
		g.t.Fatalf("group status never said every partition owned within %v: exit %d, slots %+v", timeout, code, last.Slots)
	}
}

// h30Group is a group of k hosts on n partitions, settled: the hosts
// live (0 to k-1) and each partition's holder.
func h30Group(t *testing.T, n, k int) (*groupWorld, []int, []int) {
	t.Helper()
	g := newGroupWorld(t, n)
	g.joinAll(k)
	var live []int
	for h := range k {
		live = append(live, h)
	}
	return g, live, g.settled(3*time.Minute, time.Time{}, live...)
}

// h30End: every event applied once over the holders held, no partition
// without a holder for long, status owned, the hosts live stopped (exit 0).
func (g *groupWorld) h30End(held []int, evs []event, free *unownedWatch, live ...int) {
	g.t.Helper()
	g.checkOnce(held, evs)
	free.check(g.t)
	g.statusOwned(time.Minute)
	g.stopAll(live...)
}

// stopAll SIGTERMs the hosts live and wants each to exit 0.
func (g *groupWorld) stopAll(live ...int) {
	g.t.Helper()
	for _, h := range live {
		g.hosts[h].p.signal(syscall.SIGTERM)
	}
	for _, h := range live {
		if code := g.hosts[h].p.wait(2 * time.Minute); code != 0 {
			g.t.Errorf("host %d exited %d after SIGTERM:\n%s", h, code, tailH30(g.hosts[h].p.output(), 40))
		}
	}
}

// tail is the last n lines of s.
func tailH30(s string, n int) string {
	lines := 0
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			lines++
			if lines > n {
				return s[i+1:]
			}
		}
	}
	return s
}

func replaceH30(live []int, old, now int) []int {
	out := slices.Clone(live)
	for i, h := range out {
		if h == old {
			out[i] = now
		}
	}
	return out
}

func withoutH30(live []int, gone int) []int {
	return slices.DeleteFunc(slices.Clone(live), func(h int) bool { return h == gone })
}

// mostOwner is the host among live holding the most partitions.
func mostOwnerH30(held []int) int {
	c := map[int]int{}
	best := held[0]
	for _, h := range held {
		c[h]++
		if c[h] > c[best] {
			best = h
		}
	}
	return best
}

// 1. A member SIGTERMed and started again on the same directory 5 times
// in a row under traffic: each stop exits 0, the group settles with it
// back each time, and every event is applied once.
func TestH30GroupMemberRestartedFiveTimes(t *testing.T) {
	h30Long(t)
	g, live, held := h30Group(t, 4, 3)
	evs := makeEvents(randFor(t), g.pub, 3000)
	g.publish(evs[:500])
	free := g.watchUnowned()
	cur, dir := 0, g.hosts[0].dir
	for r := range 5 {
		at := time.Now()
		g.hosts[cur].p.signal(syscall.SIGTERM)
		g.publish(evs[500+r*500 : 500+r*500+250])
		if code := g.hosts[cur].p.wait(2 * time.Minute); code != 0 {
			t.Fatalf("round %d: host %d exited %d after SIGTERM:\n%s", r, cur, code, tailH30(g.hosts[cur].p.output(), 40))
		}
		g.joinIn(dir, 4, 1)
		now := len(g.hosts) - 1
		live = replaceH30(live, cur, now)
		cur = now
		g.publish(evs[500+r*500+250 : 500+(r+1)*500])
		g.everyPartitionHeld(90 * time.Second)
		held = g.settled(2*time.Minute, at, live...)
		t.Logf("round %d: settled in %v, holders %v", r, time.Since(at).Round(time.Millisecond), held)
	}
	g.h30End(held, evs, free, live...)
}

// 2. The member owning the most partitions SIGKILLed and restarted on its
// directory (its files kept), then SIGKILLed again, its directory
// deleted and a new host joined in its place.
func TestH30GroupMostOwnerKilledRestartedThenReplaced(t *testing.T) {
	h30Long(t)
	g, live, held := h30Group(t, 6, 3)
	evs := makeEvents(randFor(t), g.pub, 2000)
	g.publish(evs[:500])
	free := g.watchUnowned()

	victim := mostOwnerH30(held)
	dir := g.hosts[victim].dir
	at := time.Now()
	g.hosts[victim].p.kill()
	g.publish(evs[500:900])
	g.settled(2*time.Minute, at, withoutH30(live, victim)...)
	t.Logf("kill 1: the others settled %v after", time.Since(at).Round(time.Millisecond))
	g.joinIn(dir, 6, 1)
	live = replaceH30(live, victim, len(g.hosts)-1)
	g.publish(evs[900:1200])
	held = g.settled(2*time.Minute, at, live...)
	t.Logf("restart on the same files: settled %v after the kill, holders %v", time.Since(at).Round(time.Millisecond), held)
	g.checkOnce(held, evs[:1200])

	victim = mostOwnerH30(held)
	at = time.Now()
	g.hosts[victim].p.kill()
	if err := os.RemoveAll(g.hosts[victim].dir); err != nil {
		t.Fatal(err)
	}
	g.publish(evs[1200:1600])
	g.settled(2*time.Minute, at, withoutH30(live, victim)...)
	g.join()
	live = replaceH30(live, victim, len(g.hosts)-1)
	g.publish(evs[1600:])
	held = g.settled(2*time.Minute, at, live...)
	t.Logf("replaced with a new directory: settled %v after the kill, holders %v", time.Since(at).Round(time.Millisecond), held)
	g.h30End(held, evs, free, live...)
}

// 3. A NATS node SIGKILLed and restarted under the group, twice: first
// the leader of the lease bucket, then the leader of the group's bucket.
func TestH30GroupRidesOutANodeKilled(t *testing.T) {
	h30Long(t)
	g, live, held := h30Group(t, 4, 3)
	evs := makeEvents(randFor(t), g.pub, 1500)
	g.publish(evs[:500])
	g.checkOnce(held, evs[:500]) // steady: every owner consuming before the first kill
	free := g.watchUnowned()
	for r, bucket := range []string{"KV_" + changelog.LeaseBucket, "KV_" + group.Bucket} {
		var node int
		consumertest.Eventually(t, time.Minute, "a leader of "+bucket, func() bool { node = g.c.leaderOf(bucket); return node >= 0 })
		at := time.Now()
		g.c.kill(node)
		t.Logf("round %d: killed n%d, the leader of %s", r, node+1, bucket)
		g.publish(evs[500+r*500 : 500+r*500+250])
		time.Sleep(5 * time.Second)
		g.c.restart(node)
		g.publish(evs[500+r*500+250 : 500+(r+1)*500])
		g.everyPartitionHeld(90 * time.Second)
		held = g.settled(2*time.Minute, at, live...)
		t.Logf("round %d: settled %v after the kill, holders %v", r, time.Since(at).Round(time.Millisecond), held)
	}
	g.h30End(held, evs, free, live...)
}

// 4. A member SIGSTOPped past its lease and member TTL, then SIGCONTed:
// its partitions are taken over meanwhile; back, it is a new member that
// the damping (--group-stable-after) holds off for that long, it does not
// exit, and every event is applied once.
func TestH30GroupMemberPausedPastItsTTLs(t *testing.T) {
	h30Long(t)
	g, live, held := h30Group(t, 4, 3)
	evs := makeEvents(randFor(t), g.pub, 1500)
	g.publish(evs[:500])
	g.checkOnce(held, evs[:500]) // steady: every owner consuming before the pause
	free := g.watchUnowned()
	victim := mostOwnerH30(held)
	id := group.ID(g.memberOf(victim))
	at := time.Now()
	g.hosts[victim].p.signal(syscall.SIGSTOP)
	g.publish(evs[500:1000])
	g.settled(2*time.Minute, at, withoutH30(live, victim)...)
	time.Sleep(3 * time.Second) // well past its lease's TTL and its member TTL (both about 3 s)
	t.Logf("paused %v; the others settled", time.Since(at).Round(time.Millisecond))
	resumed := time.Now()
	g.hosts[victim].p.signal(syscall.SIGCONT)
	var back time.Duration
	consumertest.Eventually(t, time.Minute, "the resumed member assigned again", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		a, _, err := group.Read(ctx, g.c.js, g.name)
		if err == nil && slices.Contains(a.Members, id) {
			back = time.Since(resumed)
			return true
		}
		time.Sleep(100 * time.Millisecond)
		return false
	})
	t.Logf("the resumed member was assigned again %v after SIGCONT", back.Round(time.Millisecond))
	if back < g.stable-time.Second {
		t.Errorf("the resumed member (out of the group for %v) was given partitions %v after it came back: want the damping of --group-stable-after %v", resumed.Sub(at).Round(time.Second), back.Round(time.Millisecond), g.stable)
	}
	g.publish(evs[1000:])
	held = g.settled(2*time.Minute, resumed, live...)
	g.h30End(held, evs, free, live...)
}

// 5. Deleted under a running group: the assignment key, then the lease
// bucket, then one partition's changelog stream. Each time the group
// settles again, status says owned and every event is applied once.
func TestH30GroupRidesOutDeletions(t *testing.T) {
	h30Long(t)
	g, live, held := h30Group(t, 4, 3)
	evs := makeEvents(randFor(t), g.pub, 2000)
	g.publish(evs[:500])
	free := g.watchUnowned()
	before := g.epoch()

	at := time.Now()
	consumertest.Eventually(t, time.Minute, "the assignment key deleted", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		kv, err := g.c.js.KeyValue(ctx, group.Bucket)
		return err == nil && kv.Delete(ctx, g.name+".assignment") == nil
	})
	g.publish(evs[500:1000])
	consumertest.Eventually(t, time.Minute, "the assignment written again", func() bool { return g.epoch() > 0 })
	now := g.settled(2*time.Minute, at, live...)
	t.Logf("assignment deleted: epoch %d before, %d after; holders %v then %v", before, g.epoch(), held, now)
	if moved := g.moves(at); len(moved) > 0 || !slices.Equal(now, held) {
		t.Errorf("the assignment's deletion moved partitions: %+v; held by %v, then %v", moved, held, now)
	}
	held = now
	g.checkOnce(held, evs[:1000])

	at = time.Now()
	consumertest.Eventually(t, time.Minute, "the lease bucket deleted", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return g.c.js.DeleteKeyValue(ctx, changelog.LeaseBucket) == nil
	})
	g.publish(evs[1000:1500])
	held = g.settled(2*time.Minute, at, live...)
	t.Logf("lease bucket deleted: settled %v after, holders %v", time.Since(at).Round(time.Millisecond), held)
	g.checkOnce(held, evs[:1500])

	at = time.Now()
	name, _ := changelog.Names(groupStream, g.durable+"-p1")
	consumertest.Eventually(t, time.Minute, "partition 1's changelog deleted", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return g.c.js.DeleteStream(ctx, name) == nil
	})
	g.publish(evs[1500:])
	held = g.settled(2*time.Minute, at, live...)
	t.Logf("changelog %s deleted: settled %v after, holders %v", name, time.Since(at).Round(time.Millisecond), held)
	g.h30End(held, evs, free, live...)
}

// 6a. A member started with another --standbys than the group's is left
// out of the assignment: the assignment does not change (no fight over
// it), no partition moves; one with another --partitions than the
// stream's is refused (exit non-zero).
func TestH30GroupMemberOfOtherCountsIsLeftOut(t *testing.T) {
	h30Long(t)
	g, live, held := h30Group(t, 4, 2)
	evs := makeEvents(randFor(t), g.pub, 1000)
	g.publish(evs[:500])
	free := g.watchUnowned()
	before := g.epoch()

	odd := g.joinIn(t.TempDir(), 4, 2)
	oddHost := len(g.hosts) - 1
	// Past its damping (5 s) and then some: a coordinator would have put it in by now.
	end := time.Now().Add(g.stable + 15*time.Second)
	epochs := map[uint64]bool{}
	var heldSeen [][]int
	for time.Now().Before(end) {
		epochs[g.epoch()] = true
		if h := g.holders(); len(heldSeen) == 0 || !slices.Equal(h, heldSeen[len(heldSeen)-1]) {
			heldSeen = append(heldSeen, h)
		}
		select {
		case <-odd.p.done:
			t.Logf("the member with --standbys 2 exited %d:\n%s", odd.p.wait(0), tailH30(odd.p.output(), 20))
			end = time.Now()
		default:
		}
		time.Sleep(500 * time.Millisecond)
	}
	after := g.epoch()
	t.Logf("epoch %d before the odd member, %d after; epochs seen %v; holders seen %v", before, after, slices.Sorted(func(yield func(uint64) bool) {
		for e := range epochs {
			if !yield(e) {
				return
			}
		}
	}), heldSeen)
	if after != before || len(epochs) > 1 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		a, _, _ := group.Read(ctx, g.c.js, g.name)
		cancel()
		t.Errorf("a member of --standbys 2 in a group of --standbys 1 changed the assignment: epoch %d -> %d (%d epochs seen); now members %v by %s, %d standbys, slots %+v",
			before, after, len(epochs), a.Members, a.By, a.Standbys, a.Slots)
	}
	if len(heldSeen) > 1 || !slices.Equal(g.holders(), held) {
		t.Errorf("a member of --standbys 2 moved partitions: holders seen %v (host %d is the odd one)", heldSeen, oddHost)
	}
	g.publish(evs[500:])
	// Refused since helper-30's finding: it names both shapes and exits 1.
	if code := odd.p.wait(2 * time.Minute); code != 1 || !strings.Contains(odd.p.output(), "this run says 4 and 2") {
		t.Errorf("the member of --standbys 2 exited %d, want 1 naming both shapes:\n%s", code, tailH30(odd.p.output(), 10))
	}
	held = g.settled(2*time.Minute, time.Time{}, live...)
	g.checkOnce(held, evs)

	wrong := g.joinIn(t.TempDir(), 6, 1)
	code := wrong.p.wait(time.Minute)
	t.Logf("a member of --partitions 6 on a stream of 4 exited %d:\n%s", code, tailH30(wrong.p.output(), 5))
	if code == 0 {
		t.Errorf("a member of --partitions 6 on a stream of 4 exited 0, want a refusal")
	}
	free.check(t)
	g.statusOwned(time.Minute)
	g.stopAll(live...)
}

// 6b. Two hosts started on the same --db directory at once: one is
// refused (non-zero, promptly), the other joins the group, which settles
// with it, and every event is applied once.
func TestH30GroupTwoHostsOnOneDirectory(t *testing.T) {
	h30Long(t)
	g := newGroupWorld(t, 4)
	g.joinAll(2)
	g.settled(3*time.Minute, time.Time{}, 0, 1)
	evs := makeEvents(randFor(t), g.pub, 1000)
	g.publish(evs[:500])
	free := g.watchUnowned()
	dir := t.TempDir()
	a := g.joinIn(dir, 4, 1)
	b := g.joinIn(dir, 4, 1)
	var exited []int
	consumertest.Eventually(t, time.Minute, "one of the two hosts on one directory to exit", func() bool {
		exited = exited[:0]
		for h, p := range map[int]*proc{2: a.p, 3: b.p} {
			select {
			case <-p.done:
				exited = append(exited, h)
			default:
			}
		}
		return len(exited) > 0
	})
	time.Sleep(3 * time.Second)
	exited = exited[:0]
	for h, p := range map[int]*proc{2: a.p, 3: b.p} {
		select {
		case <-p.done:
			exited = append(exited, h)
		default:
		}
	}
	if len(exited) != 1 {
		t.Fatalf("hosts %v of the two on one directory exited, want one", exited)
	}
	refused := exited[0]
	code := g.hosts[refused].p.wait(0)
	t.Logf("host %d on the same directory exited %d:\n%s", refused, code, tailH30(g.hosts[refused].p.output(), 5))
	if code == 0 {
		t.Errorf("the second host on one directory exited 0, want a refusal")
	}
	kept := 5 - refused // 2 or 3
	g.publish(evs[500:])
	held := g.settled(2*time.Minute, time.Time{}, 0, 1, kept)
	g.checkOnce(held, evs)
	free.check(t)
	g.statusOwned(time.Minute)
	g.stopAll(0, 1, kept)
}

// 7. A static run (--changelog --standby --partition 0, the same stream
// and durable) next to the group, then the group's owner of partition 0
// SIGTERMed: partition 0 is never left without an owner, every event is
// applied once over whoever holds each partition, and when the static
// run is SIGTERMed the group owns partition 0 again.
func TestH30GroupBesideAStaticStandby(t *testing.T) {
	h30Long(t)
	g, live, held := h30Group(t, 4, 3)
	evs := makeEvents(randFor(t), g.pub, 1500)
	g.publish(evs[:500])
	free := g.watchUnowned()

	st := &groupHost{dir: t.TempDir()}
	st.p = start(t, nil, append([]string{"run", "--nats", g.c.urls(), "--db", filepath.Join(st.dir, "ledger.db"), "--stream", groupStream,
		"--subjects", "pay.*", "--partitions", "4", "--replicas", "3", "--changelog", "--standby", "--partition", "0", "--durable", g.durable,
		"--schema", g.schema, "--apply", balanceApply, "--log-format", "json"}, fastPlan...)...)
	g.hosts = append(g.hosts, st)
	static := len(g.hosts) - 1
	time.Sleep(5 * time.Second) // it restores and follows
	select {
	case <-st.p.done:
		t.Logf("the static standby exited %d:\n%s", st.p.wait(0), tailH30(st.p.output(), 10))
	default:
	}
	owner0 := held[0]
	at := time.Now()
	g.hosts[owner0].p.signal(syscall.SIGTERM)
	g.publish(evs[500:1000])
	if code := g.hosts[owner0].p.wait(2 * time.Minute); code != 0 {
		t.Errorf("the group's owner of partition 0 exited %d after SIGTERM:\n%s", code, tailH30(g.hosts[owner0].p.output(), 30))
	}
	live = withoutH30(live, owner0)
	var now []int
	consumertest.Eventually(t, 2*time.Minute, "every partition held by a host of the test", func() bool {
		now = g.holders()
		return !slices.Contains(now, -1)
	})
	time.Sleep(5 * time.Second)
	now = g.holders()
	t.Logf("after the SIGTERM of host %d: holders %v (host %d is the static run)", owner0, now, static)
	if !slices.Contains(now, -1) {
		g.checkOnce(now, evs[:1000])
	}
	slots, code := g.status()
	t.Logf("group status: exit %d, slots %v", code, slots)

	st.p.signal(syscall.SIGTERM)
	if code := st.p.wait(2 * time.Minute); code != 0 {
		t.Errorf("the static run exited %d after SIGTERM:\n%s", code, tailH30(st.p.output(), 30))
	}
	g.publish(evs[1000:])
	held = g.settled(2*time.Minute, at, live...)
	g.h30End(held, evs, free, live...)
}

// 3b. A NATS node (the lease bucket's leader) SIGKILLed during the
// group's first start: right when every partition's lease is first held
// by its assigned owner, before the owners have begun their logs. The
// node comes back after 5 s; the group must settle, consume every
// partition and apply every event once.
func TestH30GroupNodeKilledAtFirstStart(t *testing.T) {
	h30Long(t)
	g := newGroupWorld(t, 4)
	g.joinAll(3)
	live := []int{0, 1, 2}
	evs := makeEvents(randFor(t), g.pub, 600)
	held := g.settled(3*time.Minute, time.Time{}, live...)
	var node int
	consumertest.Eventually(t, time.Minute, "a leader of the lease bucket", func() bool { node = g.c.leaderOf("KV_" + changelog.LeaseBucket); return node >= 0 })
	at := time.Now()
	g.c.kill(node)
	t.Logf("killed n%d, the leader of the lease bucket, as the group first settled on %v", node+1, held)
	free := g.watchUnowned()
	g.publish(evs[:300])
	time.Sleep(5 * time.Second)
	g.c.restart(node)
	g.publish(evs[300:])
	g.everyPartitionHeld(90 * time.Second)
	held = g.settled(2*time.Minute, at, live...)
	t.Logf("settled %v after the kill, holders %v", time.Since(at).Round(time.Millisecond), held)
	g.h30End(held, evs, free, live...)
}

// everyPartitionHeld waits until every partition's lease is held by a
// host of the test; if not within timeout it fails with group status.
func (g *groupWorld) everyPartitionHeld(timeout time.Duration) {
	g.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		h := g.holders()
		ok := true
		for _, x := range h {
			if x < 0 {
				ok = false
				continue
			}
			select {
			case <-g.hosts[x].p.done: // a lease a dead host left, not yet expired
				ok = false
			default:
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			slots, code := g.status()
			g.dumpTails(g.liveHosts())
			g.t.Fatalf("after %v a partition still has no lease holder: holders %v; group status exit %d, slots %v", timeout, h, code, slots)
		}
		time.Sleep(time.Second)
	}
}

// liveHosts are the hosts whose process has not exited.
func (g *groupWorld) liveHosts() []int {
	var live []int
	for h, host := range g.hosts {
		select {
		case <-host.p.done:
		default:
			live = append(live, h)
		}
	}
	return live
}

// joinAll starts k hosts at once, as a deployment does. A host that
// exits before it joins the group fails the test (Errorf: every host of a
// group runs the same command, started together) and is started again on
// its directory, so that the test goes on.
func (g *groupWorld) joinAll(k int) {
	g.t.Helper()
	first := len(g.hosts)
	for range k {
		g.join()
	}
	deadline := time.Now().Add(2 * time.Minute)
	for h := first; h < first+k; h++ {
		for {
			if time.Now().After(deadline) {
				g.t.Fatalf("host %d never joined the group:\n%s", h, tailH30(g.hosts[h].p.output(), 10))
			}
			if _, ok := g.hosts[h].p.record(func(r map[string]any) bool { return r["msg"] == "joined the group" }); ok {
				break
			}
			select {
			case <-g.hosts[h].p.done:
				g.t.Errorf("host %d, started with %d others at once, exited %d before it joined the group:\n%s", h, k-1, g.hosts[h].p.wait(0), tailH30(g.hosts[h].p.output(), 3))
				g.joinIn(g.hosts[h].dir, g.n, 1)
				g.hosts[h] = g.hosts[len(g.hosts)-1]
				g.hosts = g.hosts[:len(g.hosts)-1]
				continue
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

// 8. The first owner of a fresh partition lost (SIGKILLed, its disk with
// it) right after it began the partition's log ("took the log over"),
// before it logged "owning the partition", during the group's first
// start: nothing of the partition was consumed yet. A host joins in its
// place. Every partition must be owned again within 90 s, and every
// event applied once.
func TestH30GroupFirstOwnerLostAtItsTakeOver(t *testing.T) {
	h30Long(t)
	if os.Getenv("JETLEDGER_KNOWN_GAPS") == "" {
		t.Skip("a known gap (issue 46's note: the rule is off); JETLEDGER_KNOWN_GAPS=1 runs it")
	}
	g := newGroupWorld(t, 4)
	g.joinAll(3)
	victim, part := -1, -1
	deadline := time.Now().Add(2 * time.Minute)
	for victim < 0 {
		if time.Now().After(deadline) {
			t.Fatal("no host took a log over within 2 minutes")
		}
		for h := range 3 {
			if !strings.Contains(g.hosts[h].p.output(), `"msg":"changelog: took the log over`) {
				continue
			}
			g.hosts[h].p.signal(syscall.SIGSTOP) // at once; what it logged is read next
			rec, _ := g.hosts[h].p.record(func(r map[string]any) bool {
				m, _ := r["msg"].(string)
				return strings.HasPrefix(m, "changelog: took the log over")
			})
			victim, part = h, int(rec["partition"].(float64))
			break
		}
		time.Sleep(time.Millisecond)
	}
	_, owning := g.hosts[victim].p.record(func(r map[string]any) bool {
		m, _ := r["msg"].(string)
		i, _ := r["partition"].(float64)
		return strings.HasPrefix(m, "owning the partition") && int(i) == part
	})
	g.hosts[victim].p.kill()
	if err := os.RemoveAll(g.hosts[victim].dir); err != nil {
		t.Fatal(err)
	}
	t.Logf("host %d stopped and killed right after it took partition %d's log over (it had logged owning it: %v)", victim, part, owning)
	at := time.Now()
	evs := makeEvents(randFor(t), g.pub, 600)
	g.publish(evs[:300])
	g.join()
	live := replaceH30([]int{0, 1, 2}, victim, len(g.hosts)-1)
	g.publish(evs[300:])
	g.everyPartitionHeld(90 * time.Second)
	held := g.settled(2*time.Minute, at, live...)
	t.Logf("settled %v after the kill, holders %v", time.Since(at).Round(time.Millisecond), held)
	g.checkOnce(held, evs)
	g.statusOwned(time.Minute)
	g.stopAll(live...)
}
