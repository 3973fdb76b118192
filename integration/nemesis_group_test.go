package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/group"
	"github.com/nats-io/nats.go/jetstream"
)

// The group topology (issue 46): three nats-server processes
// (startCluster), the stream in two partitions (R3), consumed by three
// run processes ("hosts") that each run the same command, a group of
// hosts (run --group nem --standbys 1): the group assigns each partition
// an owner and a standby and moves them as hosts come and go, as
// docs/scaling.md's "A group of hosts" has it. w.run is host 0; every
// host is up between steps. Effects go to the webhook destination.
//
// Its own steps: a host SIGKILLed while events arrive and started again
// on its directory; a host SIGTERMed (it hands its partitions over) and
// started again; a host leaving, the group settling without it, and the
// host joining again; a host SIGKILLed with its directory deleted and a
// new one in its place; a node SIGKILLed and restarted; the group's
// bucket deleted; the lease bucket deleted. Each step ends with both
// partitions owned by their assigned owner (90s). Of the common steps it
// keeps those the owned topology keeps. Checked beyond nemCheck: after
// the drain (host 0 SIGTERMed: a last hand-over) the other hosts own
// both partitions; every account and id in one partition's ledger; and
// no other copy of a partition (another host's file, a file a restore set
// aside) holds a message the final ledger of its partition lacks.
//
// It is not in nemTopoOrder: TestNemesisGroup runs it, with
// JETLEDGER_NEMESIS_TOPOLOGY=group or JETLEDGER_NEMESIS=long.
const (
	topoGroup       = "group"
	nemGroupHosts   = 3
	nemGroupName    = "nem"
	nemGroupKill    = nemKind("gkill")    // SIGKILL of host Arg%3 while Arg events arrive; it starts again on its directory
	nemGroupTerm    = nemKind("gterm")    // SIGTERM of host Arg%3 (it hands its partitions over) while events arrive; it starts again
	nemGroupLeave   = nemKind("gleave")   // host Arg%3 leaves, the group settles without it, it joins again
	nemGroupReplace = nemKind("greplace") // host Arg%3 SIGKILLed, its directory deleted, a host with an empty one in its place
	nemGroupNode    = nemKind("gnode")    // SIGKILL of node Arg%3 while events arrive; a restart
	nemGroupBucket  = nemKind("gbucket")  // the group's bucket deleted under the hosts
	nemGroupLeases  = nemKind("gleases")  // the lease bucket deleted under the hosts
)

// nemGroup is the group topology's state beside its world.
type nemGroup struct {
	mu     sync.Mutex
	c      *cluster
	base   [nemGroupHosts]string // each host's --db; its partitions' ledgers are beside it
	procs  [nemGroupHosts]*proc  // hosts 1 and 2 (host 0 is w.run)
	down   [nemGroupHosts]bool   // hosts 1 and 2
	owner  [nemOwnedParts]int
	frozen bool          // the check fixed the final owners
	runs   []nemOwnedRun // every host process started, for a finding's report
}

var nemGroups sync.Map // *nemWorld → *nemGroup

func groupOf(w *nemWorld) *nemGroup {
	v, ok := nemGroups.Load(w)
	if !ok {
		w.t.Fatal("no group cluster for this world")
	}
	return v.(*nemGroup)
}

func init() {
	nemTopologies[topoGroup] = &nemTopology{
		setup: func(w *nemWorld) {
			g := &nemGroup{c: startCluster(w.t), down: [nemGroupHosts]bool{true, true, true}}
			for h := range g.base {
				dir := filepath.Join(w.dir, fmt.Sprintf("host%d", h))
				if err := os.MkdirAll(dir, 0o700); err != nil {
					w.t.Fatal(err)
				}
				g.base[h] = filepath.Join(dir, "ledger.db")
			}
			nemGroups.Store(w, g)
			w.t.Cleanup(func() { nemGroups.Delete(w) })
			w.t.Cleanup(func() { g.report(w) })
			w.db = g.base[0]
			w.js = g.c.js
			for h := range nemGroupHosts {
				g.launch(w, h)
			}
			g.waitOwned(w, "setup: three hosts")
		},
		url: func(w *nemWorld) string { return groupOf(w).c.urls() },
		runArgs: func(w *nemWorld, _ string) []string {
			return []string{"--nats", groupOf(w).c.urls(), "--subjects", nemOwnedSubj, "--partitions", strconv.Itoa(nemOwnedParts),
				"--replicas", "3", "--duplicate-window", nemDupWindow.String(), "--group", nemGroupName, "--standbys", "1",
				"--group-stable-after", "5s"}
		},
		ledgers: partLedgers,
		parts: func(w *nemWorld) []nemPart {
			g := groupOf(w)
			g.refresh(w)
			out := make([]nemPart, nemOwnedParts)
			for i := range out {
				out[i] = nemPart{db: partitionFile(g.base[g.owner[i]], i), durable: ownedDurables[i]}
			}
			return out
		},
		subject: partSubject,
		without: partWithout,
		extra: []nemWeight{{nemGroupKill, 4, between(5, 30)}, {nemGroupTerm, 3, between(5, 30)}, {nemGroupLeave, 3, between(0, 2)},
			{nemGroupReplace, 2, between(0, 2)}, {nemGroupNode, 2, between(0, 2)}, {nemGroupBucket, 2, nil}, {nemGroupLeases, 2, nil}},
		steps: map[nemKind]func(w *nemWorld, st nemStep){
			nemGroupKill:    func(w *nemWorld, st nemStep) { groupOf(w).bounce(w, st, false) },
			nemGroupTerm:    func(w *nemWorld, st nemStep) { groupOf(w).bounce(w, st, true) },
			nemGroupLeave:   func(w *nemWorld, st nemStep) { groupOf(w).leaveAndJoin(w, st.Arg%nemGroupHosts) },
			nemGroupReplace: func(w *nemWorld, st nemStep) { groupOf(w).replace(w, st.Arg%nemGroupHosts) },
			nemGroupNode:    func(w *nemWorld, st nemStep) { groupOf(w).nodeFault(w, st.Arg%3) },
			nemGroupBucket:  func(w *nemWorld, _ nemStep) { groupOf(w).deleteBucket(w, group.Bucket) },
			nemGroupLeases:  func(w *nemWorld, _ nemStep) { groupOf(w).deleteBucket(w, changelog.LeaseBucket) },
		},
		check: func(w *nemWorld) { groupOf(w).check(w) },
	}
}

func (g *nemGroup) proc(w *nemWorld, h int) *proc {
	if h == 0 {
		return w.run
	}
	return g.procs[h]
}

func (g *nemGroup) isDown(w *nemWorld, h int) bool {
	if h == 0 {
		return w.down
	}
	return g.down[h]
}

func (g *nemGroup) setDown(w *nemWorld, h int, down bool) {
	if h == 0 {
		w.down = down
	} else {
		g.down[h] = down
	}
}

// launch starts host h and returns at once.
func (g *nemGroup) launch(w *nemWorld, h int) {
	p := start(w.t, w.runEnv(nil), w.runArgs(g.base[h])...)
	g.runs = append(g.runs, nemOwnedRun{host: h, p: p})
	if h == 0 {
		w.run = p
	} else {
		g.procs[h] = p
	}
	g.setDown(w, h, false)
}

// stop SIGTERMs hosts at once; each must exit 0.
func (g *nemGroup) stop(w *nemWorld, hosts ...int) {
	for _, h := range hosts {
		if !g.isDown(w, h) {
			g.proc(w, h).signal(syscall.SIGTERM)
		}
	}
	for _, h := range hosts {
		if g.isDown(w, h) {
			continue
		}
		stopped(w, h, g.proc(w, h), 2*time.Minute)
		g.setDown(w, h, true)
	}
}

func (g *nemGroup) kill(w *nemWorld, h int) {
	g.proc(w, h).kill()
	g.setDown(w, h, true)
}

// pid is host h's process id while it runs, 0 otherwise.
func (g *nemGroup) pid(w *nemWorld, h int) int {
	p := g.proc(w, h)
	if g.isDown(w, h) || p == nil {
		return 0
	}
	select {
	case <-p.done:
		return 0
	default:
		return p.cmd.Process.Pid
	}
}

// holder is the running host that holds partition i's lease, -1 when
// none does.
func (g *nemGroup) holder(w *nemWorld, i int) int {
	pid := holderPid(w, i)
	if pid == 0 {
		return -1
	}
	for h := range nemGroupHosts {
		if g.pid(w, h) == pid {
			return h
		}
	}
	return -1
}

// owns says whether host h's process's last role for partition i is owner.
func (g *nemGroup) owns(w *nemWorld, h, i int) bool {
	p := g.proc(w, h)
	if p == nil {
		return false
	}
	last := ""
	p.record(func(r map[string]any) bool {
		if role, ok := r["role"].(string); ok && r["partition"] == float64(i) {
			last = role
		}
		return false
	})
	return last == "owner"
}

// member is host h's member name in the group, from its log.
func (g *nemGroup) member(w *nemWorld, h int) string {
	rec, _ := g.proc(w, h).record(func(r map[string]any) bool { return r["msg"] == "joined the group" })
	m, _ := rec["member"].(string)
	return m
}

// refresh notes each partition's owner, as the leases say now.
func (g *nemGroup) refresh(w *nemWorld) {
	g.mu.Lock()
	frozen := g.frozen
	g.mu.Unlock()
	if frozen {
		return
	}
	for i := range nemOwnedParts {
		if h := g.holder(w, i); h >= 0 {
			g.mu.Lock()
			g.owner[i] = h
			g.mu.Unlock()
		}
	}
}

// revive starts again a host that exited unasked (a finding).
func (g *nemGroup) revive(w *nemWorld, h int) {
	if g.isDown(w, h) {
		g.launch(w, h)
		return
	}
	select {
	case <-g.proc(w, h).done:
		w.m.violate("host %d exited %d unasked: %s", h, g.proc(w, h).wait(0), g.said(w, h))
		g.launch(w, h)
	default:
	}
}

// waitOwned brings every host up and waits until each partition's lease
// is held by a running host that owns it, the assignment's owner, with a
// pull request waiting at its durable; else the schedule ends.
func (g *nemGroup) waitOwned(w *nemWorld, what string) {
	var why string
	ok := poll(90*time.Second, func() bool {
		for h := range nemGroupHosts {
			g.revive(w, h)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		a, _, err := group.Read(ctx, w.js, nemGroupName)
		if err != nil {
			why = fmt.Sprintf("the group cannot be read: %v", err)
			return false
		}
		for i := range nemOwnedParts {
			h := g.holder(w, i)
			if h < 0 || !g.owns(w, h, i) || a.Owner(i) != group.ID(g.member(w, h)) {
				why = fmt.Sprintf("partition %d is not owned by its assigned owner %s (its lease's holder: host %d)", i, a.Owner(i), h)
				return false
			}
			if ci, err := consumerInfo(w, ownedDurables[i]); err != nil || ci.NumWaiting == 0 {
				why = fmt.Sprintf("nobody fetches from %s (%v)", ownedDurables[i], err)
				return false
			}
		}
		return true
	})
	if !ok {
		w.t.Fatalf("%s: within 90s, %s; host 0: %s; host 1: %s; host 2: %s", what, why, g.said(w, 0), g.said(w, 1), g.said(w, 2))
	}
	g.refresh(w)
}

// said is host h's last warnings and errors, for a finding's report.
func (g *nemGroup) said(w *nemWorld, h int) string { return saidBy(g.proc(w, h)) }

// report logs, when the schedule has findings, each host process's
// records of its group and partitions.
func (g *nemGroup) report(w *nemWorld) { reportRuns(w, g.runs) }

// bounce stops host Arg%3 while events arrive, by SIGKILL or SIGTERM,
// and starts it again after a while on its directory.
func (g *nemGroup) bounce(w *nemWorld, st nemStep, term bool) {
	h := st.Arg % nemGroupHosts
	done := w.publishFreshAsync(max(st.Arg, 1))
	time.Sleep(time.Duration(w.rng.IntN(400)) * time.Millisecond) // the moment: the experiment's variable
	if term {
		g.stop(w, h)
	} else {
		g.kill(w, h)
	}
	time.Sleep(time.Duration(w.rng.IntN(4000)) * time.Millisecond) // how long it stays down: the experiment's variable
	g.launch(w, h)
	<-done
	g.waitOwned(w, fmt.Sprintf("%s: host %d started again", map[bool]string{false: "gkill", true: "gterm"}[term], h))
}

// leaveAndJoin has host h leave (SIGTERM), waits until the group has
// settled on the other two, and has it join again.
func (g *nemGroup) leaveAndJoin(w *nemWorld, h int) {
	g.stop(w, h)
	w.publishFresh(5 + w.rng.IntN(10))
	ok := poll(90*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		a, _, err := group.Read(ctx, w.js, nemGroupName)
		return err == nil && len(a.Members) == nemGroupHosts-1 && g.holder(w, 0) >= 0 && g.holder(w, 1) >= 0
	})
	if !ok {
		w.m.violate("gleave: the group did not settle on the other hosts within 90s of host %d's leave: %s | %s", h, g.said(w, (h+1)%3), g.said(w, (h+2)%3))
	}
	g.launch(w, h)
	g.waitOwned(w, fmt.Sprintf("gleave: host %d joined again", h))
}

// replace loses host h with its disk, and puts a host with an empty one
// in its place.
func (g *nemGroup) replace(w *nemWorld, h int) {
	done := w.publishFreshAsync(10 + w.rng.IntN(20))
	time.Sleep(time.Duration(w.rng.IntN(300)) * time.Millisecond) // the moment of the loss: the experiment's variable
	g.kill(w, h)
	dir := filepath.Dir(g.base[h])
	if err := os.RemoveAll(dir); err != nil {
		w.t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		w.t.Fatal(err)
	}
	g.launch(w, h)
	<-done
	g.waitOwned(w, fmt.Sprintf("greplace: host %d replaced", h))
}

// nodeFault SIGKILLs node v while events arrive and restarts it.
func (g *nemGroup) nodeFault(w *nemWorld, v int) {
	done := w.publishFreshAsync(10 + w.rng.IntN(20))
	time.Sleep(time.Duration(w.rng.IntN(300)) * time.Millisecond) // the moment of the kill: the experiment's variable
	g.c.kill(v)
	time.Sleep(time.Duration(nemOutageMinMs+w.rng.IntN(nemOutageSpanMs)) * time.Millisecond) // the outage: the experiment's variable
	g.c.restart(v)
	<-done
	g.waitOwned(w, fmt.Sprintf("gnode: node %d restarted", v))
}

// deleteBucket deletes a KV bucket under the hosts, and publishes.
func (g *nemGroup) deleteBucket(w *nemWorld, bucket string) {
	if !poll(30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := w.js.DeleteKeyValue(ctx, bucket)
		return err == nil || errors.Is(err, jetstream.ErrBucketNotFound)
	}) {
		w.t.Fatalf("bucket %s not deleted within 30s", bucket)
	}
	w.publishFresh(5 + w.rng.IntN(20))
	g.waitOwned(w, "bucket "+bucket+" deleted")
}

// check: the drain stopped host 0, which handed its partitions over;
// hosts 1 and 2 own both, settle and stop; then the final owners'
// ledgers and every other copy are judged.
func (g *nemGroup) check(w *nemWorld) {
	for h := 1; h < nemGroupHosts; h++ {
		g.revive(w, h)
	}
	took := func(i int) bool { h := g.holder(w, i); return h > 0 && g.owns(w, h, i) }
	poll(2*time.Minute, func() bool { return took(0) && took(1) })
	for i := range nemOwnedParts {
		if h := g.holder(w, i); took(i) {
			g.owner[i] = h
		} else {
			w.m.violate("hosts 1 and 2 did not own partition %d within 2m of host 0's SIGTERM at the drain: %s | %s", i, g.said(w, 1), g.said(w, 2))
		}
	}
	g.mu.Lock()
	g.frozen = true
	g.mu.Unlock()
	if !poll(time.Minute, func() bool { return partsSettled(w, g.c) }) {
		w.m.violate("after the drain's hand-over, not settled within 1m (durables or outbox)")
	}
	g.stop(w, 1, 2)
	w.t.Logf("final owners: partition 0 host %d, partition 1 host %d", g.owner[0], g.owner[1])
	g.checkCopies(w)
}

// checkCopies: one partition per account and id, and no other copy of a
// partition (another host's file, one a restore set aside) holding what
// its final ledger lacks.
func (g *nemGroup) checkCopies(w *nemWorld) {
	files := make([]string, nemOwnedParts)
	for i := range files {
		files[i] = partitionFile(g.base[g.owner[i]], i)
	}
	finals := judgeFinals(w, files)
	var others []string
	for h := range nemGroupHosts {
		for i := range nemOwnedParts {
			if f := partitionFile(g.base[h], i); f != files[i] {
				if _, err := os.Stat(f); err == nil {
					others = append(others, f)
				}
			}
		}
		others = append(others, setAsideFiles(w, g.base[h])...)
	}
	setAside := judgeCopies(w, finals, others)
	w.t.Logf("group: %d files set aside by restores, %d other copies compared", setAside, len(others))
}

func replayGroup(s nemSchedule) string {
	return fmt.Sprintf("JETLEDGER_NEMESIS_TOPOLOGY=group go test ./integration -run 'TestNemesisGroup$' -nemesis.seed=%d -nemesis.steps='%s'",
		s.Seed, formatSteps(s.Steps))
}

// The nemesis on a group of hosts (the group topology above), as
// TestNemesisOwned: off unless JETLEDGER_NEMESIS_TOPOLOGY=group (short:
// seeds 1, 2 and one from the clock) or JETLEDGER_NEMESIS=long.
func TestNemesisGroup(t *testing.T) {
	if os.Getenv("JETLEDGER_NEMESIS_TOPOLOGY") != topoGroup && os.Getenv("JETLEDGER_NEMESIS") != "long" {
		t.Skip("the group topology's nemesis runs with JETLEDGER_NEMESIS_TOPOLOGY=group or JETLEDGER_NEMESIS=long")
	}
	runTopologyNemesis(t, topoGroup, replayGroup)
}
