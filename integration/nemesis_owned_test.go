package integration

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/nats-io/nats.go/jetstream"
)

// The owned topology (issue 42): three nats-server processes
// (startCluster), the stream in two partitions (R3), consumed by two run
// processes ("hosts") of both partitions with owned ledgers: host 0 with
// --changelog --standby, host 1 with --standby, so either may own each
// partition (a lease in JETLEDGER_LEASES, a changelog stream per
// partition, snapshots in JETLEDGER_SNAPSHOTS), as docs/scaling.md's
// "Partitions that outlive their host" has it. w.run is host 0; both are
// up between steps. Effects go to the webhook destination with the
// default outbox workers.
//
// Its own steps: the owner of a partition SIGKILLed (while events arrive,
// or while the destination holds a stored item's answer) and started
// again; a node SIGKILLed and restarted; a host replaced by one with an
// empty disk; a partition's changelog stream deleted or purged, then both
// hosts restarted in a random order; the lease bucket deleted; a table
// added to --schema, the host standing by upgraded first; both hosts
// stopped and started at the same moment. Of the common steps it keeps
// the traffic, the destination faults, the stream purge and the clock.
// Each step ends with both partitions owned by a running host (75s), and
// a stop with exit 0. The common operator actions
// (prune, replay, dlq, outbox resolve/cancel/retry) are refused on an
// owned ledger by design and the fault points need a host that surely
// owns: they are left out. Checked beyond nemCheck: after the drain host
// 1 takes over what host 0 owned (a last hand-over); every account and
// id in one partition's ledger; no host's file of a partition gone; and
// no other copy of a partition (the other host's file, a file a restore
// set aside as ledger-pN.db.replaced-TIME) holds a message the final
// ledger of its partition lacks: no copy was destroyed while it was the
// only one of something (DESIGN rule 18).
//
// It is not in nemTopoOrder (the short CI profile would take it):
// TestNemesisOwned runs it, with JETLEDGER_NEMESIS_TOPOLOGY=owned or
// JETLEDGER_NEMESIS=long.
const (
	topoOwned       = "owned"
	nemOwnedParts   = 2
	nemOwnedSubj    = "ev.*"
	nemOwnedKill    = nemKind("okill")    // SIGKILL of the owner of partition Arg%2 while Arg events arrive; it starts again
	nemOwnedMidSend = nemKind("omidsend") // the owner of an event's partition SIGKILLed while the destination holds its stored item's answer
	nemOwnedNode    = nemKind("onode")    // SIGKILL of node Arg%3 while events arrive; a restart
	nemOwnedReplace = nemKind("oreplace") // host Arg%2 SIGKILLed, its directory deleted, started again (empty) with --standby
	nemOwnedCLDel   = nemKind("ocldel")   // partition Arg's changelog stream deleted (Arg 2: both), events, both hosts restarted in a random order
	nemOwnedCLPurge = nemKind("oclpurge") // as ocldel, the stream purged
	nemOwnedLeases  = nemKind("oleases")  // the lease bucket deleted under both hosts
	nemOwnedSchema  = nemKind("oschema")  // a table added to --schema: the host standing by restarted first, then the other
	nemOwnedTwice   = nemKind("otwice")   // both hosts stopped, then started at the same moment
	// nemOwnedLeave: both stopped, the owner of partition Arg%2 run
	// alone with --leave-changelog --partition Arg%2 while events of it
	// arrive (a person settling rows), stopped, the partition's changelog
	// deleted (how a file that left joins again: docs/scaling.md), both
	// back. Before the file that left kept where it left, its host
	// restored the older snapshot over it, and what it applied out of the
	// log was in no final ledger.
	nemOwnedLeave = nemKind("oleave")
)

// nemOwned is the owned topology's state beside its world.
type nemOwned struct {
	mu      sync.Mutex
	c       *cluster
	base    [2]string   // each host's --db; its partitions' ledgers are beside it
	role    [2][]string // each host's role flags
	owner   [nemOwnedParts]int
	host1   *proc
	down1   bool
	frozen  bool          // the check fixed the final owners
	runs    []nemOwnedRun // every host process started, for a finding's report
	schemaV int           // tables added to --schema so far
	special []string      // the topology flags of the next run started, when set (oleave)
}

// nemOwnedRun is a host process and the host it ran.
type nemOwnedRun struct {
	host int
	p    *proc
}

var nemOwneds sync.Map // *nemWorld → *nemOwned

func ownedOf(w *nemWorld) *nemOwned {
	v, ok := nemOwneds.Load(w)
	if !ok {
		w.t.Fatal("no owned cluster for this world")
	}
	return v.(*nemOwned)
}

// ownedPartitionOf is the partition the stream's mapping puts an account in.
var ownedPartitionOf = partitionMapping(nemOwnedSubj, nemOwnedParts)

func init() {
	nemTopologies[topoOwned] = &nemTopology{
		setup: func(w *nemWorld) {
			o := &nemOwned{c: startCluster(w.t), role: [2][]string{{"--changelog", "--standby"}, {"--standby"}}, down1: true}
			for h := range o.base {
				dir := filepath.Join(w.dir, fmt.Sprintf("host%d", h))
				if err := os.MkdirAll(dir, 0o700); err != nil {
					w.t.Fatal(err)
				}
				o.base[h] = filepath.Join(dir, "ledger.db")
			}
			nemOwneds.Store(w, o)
			w.t.Cleanup(func() { nemOwneds.Delete(w) })
			// Registered first, so it runs after the processes' own
			// cleanups have killed them: what each said about its
			// partitions, when the checker found something.
			w.t.Cleanup(func() { o.report(w) })
			w.db = o.base[0]
			w.js = o.c.js
			// Host 0 first: it creates the stream and owns both
			// partitions; host 1 then stands by for both.
			o.launch(w, 0, nil)
			o.waitOwned(w, "setup: host 0")
			o.launch(w, 1, nil)
			if !poll(2*time.Minute, func() bool { return standsBy(o.host1, 0) && standsBy(o.host1, 1) }) {
				w.t.Fatalf("setup: host 1 not standing by for both partitions within 2m: %s", o.said(w, 1))
			}
		},
		url: func(w *nemWorld) string { return ownedOf(w).c.urls() },
		runArgs: func(w *nemWorld, db string) []string {
			o := ownedOf(w)
			o.mu.Lock()
			defer o.mu.Unlock()
			if o.special != nil {
				return o.special
			}
			return append(o.flags("0,1"), o.role[o.hostOf(w, db)]...)
		},
		ledgers: partLedgers,
		parts: func(w *nemWorld) []nemPart {
			o := ownedOf(w)
			o.refresh(w)
			out := make([]nemPart, nemOwnedParts)
			for i := range out {
				out[i] = nemPart{db: partitionFile(o.base[o.owner[i]], i), durable: ownedDurables[i]}
			}
			return out
		},
		subject: partSubject,
		// Left out: the fault points and the pause act on w.run, which may
		// own nothing (okill and omidsend pick the owner); --batch and
		// --deadline changed on one host alone are another lease TTL,
		// refused by design; the operator actions with --db write the
		// ledger and are refused on an owned one (ledger.ErrChangelogCopy),
		// and are taken through the owner's admin API instead (nemAPI); the
		// stream made again stops both hosts (not modelled here).
		without: partWithout,
		extra: []nemWeight{{nemOwnedKill, 4, between(5, 30)}, {nemOwnedMidSend, 2, nil}, {nemOwnedNode, 3, between(0, 2)},
			{nemOwnedReplace, 2, between(0, 1)}, {nemOwnedCLDel, 2, between(0, 2)}, {nemOwnedCLPurge, 2, between(0, 2)},
			{nemOwnedLeases, 2, nil}, {nemOwnedSchema, 2, nil}, {nemOwnedTwice, 2, nil}, {nemOwnedLeave, 2, between(0, 1)}},
		steps: map[nemKind]func(w *nemWorld, st nemStep){
			nemOwnedKill:    func(w *nemWorld, st nemStep) { ownedOf(w).killOwner(w, st) },
			nemOwnedMidSend: func(w *nemWorld, _ nemStep) { ownedOf(w).midSend(w) },
			nemOwnedNode:    func(w *nemWorld, st nemStep) { ownedOf(w).nodeFault(w, st.Arg%3) },
			nemOwnedReplace: func(w *nemWorld, st nemStep) { ownedOf(w).replace(w, st.Arg%2) },
			nemOwnedCLDel:   func(w *nemWorld, st nemStep) { ownedOf(w).changelogFault(w, st.Arg%3, false) },
			nemOwnedCLPurge: func(w *nemWorld, st nemStep) { ownedOf(w).changelogFault(w, st.Arg%3, true) },
			nemOwnedLeases:  func(w *nemWorld, _ nemStep) { ownedOf(w).leasesDeleted(w) },
			nemOwnedSchema:  func(w *nemWorld, _ nemStep) { ownedOf(w).schemaUpgrade(w) },
			nemOwnedTwice:   func(w *nemWorld, _ nemStep) { ownedOf(w).twice(w) },
			nemOwnedLeave:   func(w *nemWorld, st nemStep) { ownedOf(w).leave(w, st.Arg%2) },
		},
		check: func(w *nemWorld) { ownedOf(w).check(w) },
	}
}

// flags are the topology's run flags for partitions parts: every host
// gives the stream's, and whichever starts first creates it.
func (o *nemOwned) flags(parts string) []string {
	return []string{"--nats", o.c.urls(), "--subjects", nemOwnedSubj, "--partitions", strconv.Itoa(nemOwnedParts),
		"--replicas", "3", "--duplicate-window", nemDupWindow.String(), "--partition", parts}
}

func (o *nemOwned) hostOf(w *nemWorld, db string) int {
	for h, b := range o.base {
		if b == db {
			return h
		}
	}
	w.t.Fatalf("run --db %s is no host's", db)
	return -1
}

func (o *nemOwned) proc(w *nemWorld, h int) *proc {
	if h == 0 {
		return w.run
	}
	return o.host1
}

func (o *nemOwned) isDown(w *nemWorld, h int) bool {
	if h == 0 {
		return w.down
	}
	return o.down1
}

func (o *nemOwned) setDown(w *nemWorld, h int, down bool) {
	if h == 0 {
		w.down = down
	} else {
		o.down1 = down
	}
}

// launch starts host h and returns at once.
func (o *nemOwned) launch(w *nemWorld, h int, env []string) {
	p := start(w.t, w.runEnv(env), w.runArgs(o.base[h])...)
	o.runs = append(o.runs, nemOwnedRun{host: h, p: p})
	if h == 0 {
		w.run = p
	} else {
		o.host1 = p
	}
	o.setDown(w, h, false)
}

// stop SIGTERMs hosts at once; each must exit 0.
func (o *nemOwned) stop(w *nemWorld, hosts ...int) {
	for _, h := range hosts {
		if !o.isDown(w, h) {
			o.proc(w, h).signal(syscall.SIGTERM)
		}
	}
	for _, h := range hosts {
		if o.isDown(w, h) {
			continue
		}
		stopped(w, h, o.proc(w, h), time.Minute)
		o.setDown(w, h, true)
	}
}

func (o *nemOwned) kill(w *nemWorld, h int) {
	o.proc(w, h).kill()
	o.setDown(w, h, true)
}

// pid is host h's process id while it runs, 0 otherwise.
func (o *nemOwned) pid(w *nemWorld, h int) int {
	if o.isDown(w, h) {
		return 0
	}
	p := o.proc(w, h)
	select {
	case <-p.done:
		return 0
	default:
		return p.cmd.Process.Pid
	}
}

// holder is the running host that holds partition i's lease, -1 when
// none does (no holder, the bucket gone, a dead process's lease).
func (o *nemOwned) holder(w *nemWorld, i int) int {
	pid := holderPid(w, i)
	if pid == 0 {
		return -1
	}
	for h := range o.base {
		if o.pid(w, h) == pid {
			return h
		}
	}
	return -1
}

// owns says whether host h's process owns partition i now: it logged
// more "owner" records for it than "lost" ones. A run holds the lease
// while it prepares its file (a restore, a wait), so the lease alone does
// not say it owns.
func (o *nemOwned) owns(w *nemWorld, h, i int) bool {
	p := o.proc(w, h)
	if p == nil {
		return false
	}
	n := 0
	p.record(func(r map[string]any) bool {
		if r["partition"] == float64(i) {
			switch r["role"] {
			case "owner":
				n++
			case "lost":
				n--
			}
		}
		return false
	})
	return n > 0
}

// refresh notes each partition's owner, as the leases say now; the last
// known one stays while none is held.
func (o *nemOwned) refresh(w *nemWorld) {
	o.mu.Lock()
	frozen := o.frozen
	o.mu.Unlock()
	if frozen {
		return
	}
	for i := range nemOwnedParts {
		if h := o.holder(w, i); h >= 0 {
			o.mu.Lock()
			o.owner[i] = h
			o.mu.Unlock()
		}
	}
}

// revive starts again a host that exited unasked: a finding (a run with
// --standby that loses a partition stands by), and the schedule goes on.
func (o *nemOwned) revive(w *nemWorld, h int) {
	if o.isDown(w, h) {
		o.launch(w, h, nil)
		return
	}
	p := o.proc(w, h)
	select {
	case <-p.done:
		w.m.violate("host %d exited %d unasked: %s", h, p.wait(0), o.said(w, h))
		o.launch(w, h, nil)
	default:
	}
}

// waitOwned brings both hosts up and waits until each partition's lease
// is held by a running host whose pull request waits at the durable; a
// partition nobody owns by then ends the schedule, with where it stands.
func (o *nemOwned) waitOwned(w *nemWorld, what string) {
	var why string
	// A take-over takes a lease's TTL (about 3s) and a restore; a copy
	// that waits says so within 36s.
	ok := poll(75*time.Second, func() bool {
		for h := range o.base {
			if h == 1 && o.host1 == nil {
				continue // setup: host 1 not started yet
			}
			o.revive(w, h)
		}
		for i := range nemOwnedParts {
			if h := o.holder(w, i); h < 0 || !o.owns(w, h, i) {
				why = fmt.Sprintf("partition %d is owned by no running host (its lease's holder: host %d)", i, h)
				return false
			}
			ci, err := consumerInfo(w, ownedDurables[i])
			if err != nil || ci.NumWaiting == 0 {
				why = fmt.Sprintf("nobody fetches from %s (%v)", ownedDurables[i], err)
				return false
			}
		}
		return true
	})
	if !ok {
		said := o.said(w, 0)
		if o.host1 != nil {
			said += "; host 1: " + o.said(w, 1)
		}
		w.t.Fatalf("%s: within 75s, %s; host 0: %s; %s", what, why, said, o.diagnose(w))
	}
	o.refresh(w)
}

// diagnose says, for a finding's report, where each partition stands:
// its durable's floors, the partition's last message at or below the ack
// floor, and each host's file (the stream sequences it holds, its
// changelog position), and its changelog stream's state.
func (o *nemOwned) diagnose(w *nemWorld) string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []string
	s, serr := w.js.Stream(ctx, stream)
	for i := range nemOwnedParts {
		line := fmt.Sprintf("partition %d:", i)
		if ci, err := consumerInfo(w, ownedDurables[i]); err == nil {
			line += fmt.Sprintf(" durable ack floor stream %d (consumer %d), delivered stream %d, %d pending, %d waiting for ack;",
				ci.AckFloor.Stream, ci.AckFloor.Consumer, ci.Delivered.Stream, ci.NumPending, ci.NumAckPending)
			if serr == nil {
				below := uint64(0)
				for seq := ci.AckFloor.Stream; seq > 0 && seq+300 > ci.AckFloor.Stream; seq-- {
					m, err := s.GetMsg(ctx, seq)
					if err == nil && strings.HasPrefix(m.Subject, fmt.Sprintf("%d.", i)) {
						below = seq
						break
					}
				}
				line += fmt.Sprintf(" the partition's last message at or below the floor: seq %d;", below)
			}
		}
		for h := range o.base {
			f := partitionFile(o.base[h], i)
			if _, err := os.Stat(f); err != nil {
				line += fmt.Sprintf(" host %d: no file;", h)
				continue
			}
			db := w.openLedger(f)
			var seen, n sql.NullInt64
			var log string
			var pos sql.NullInt64
			db.QueryRow(`SELECT max(max(stream_seq), max(last_seq)), count(*) FROM processed_messages`).Scan(&seen, &n) //nolint:errcheck // a report
			db.QueryRow(`SELECT log, seq FROM jetledger_changelog WHERE id = 1`).Scan(&log, &pos)                       //nolint:errcheck // a report
			db.Close()
			line += fmt.Sprintf(" host %d's file: %d messages through stream seq %d, at %s#%d;", h, n.Int64, seen.Int64, log, pos.Int64)
		}
		if cl, err := w.js.Stream(ctx, changelogName(i)); err == nil {
			st := cl.CachedInfo().State
			line += fmt.Sprintf(" changelog created %s, entries %d..%d", cl.CachedInfo().Created.Format("15:04:05.000"), st.FirstSeq, st.LastSeq)
		} else {
			line += fmt.Sprintf(" changelog: %v", err)
		}
		out = append(out, line)
	}
	return strings.Join(out, " || ")
}

// said is host h's last warnings and errors, for a finding's report.
func (o *nemOwned) said(w *nemWorld, h int) string { return saidBy(o.proc(w, h)) }

// report logs, when the schedule has findings, each host process's
// records about its partitions' ownership, log and files.
func (o *nemOwned) report(w *nemWorld) { reportRuns(w, o.runs) }

// killOwner SIGKILLs the owner of partition Arg%2 while events arrive;
// it stays down a while (the other host takes over once its lease ends)
// and starts again.
func (o *nemOwned) killOwner(w *nemWorld, st nemStep) {
	o.refresh(w)
	h := o.owner[st.Arg%nemOwnedParts]
	done := w.publishFreshAsync(max(st.Arg, 1))
	time.Sleep(time.Duration(w.rng.IntN(400)) * time.Millisecond) // the moment of the kill is the experiment's variable
	o.kill(w, h)
	time.Sleep(time.Duration(w.rng.IntN(4000)) * time.Millisecond) // how long the host stays down: the experiment's variable
	o.launch(w, h, nil)
	<-done
	o.waitOwned(w, fmt.Sprintf("okill: host %d started again", h))
}

// midSend SIGKILLs the owner of an event's partition while the destination
// has stored its effect and holds the answer: the row is left sending in
// the log, and whoever owns next must put it in review.
func (o *nemOwned) midSend(w *nemWorld) {
	e, stored := w.heldAtTheDestination()
	o.refresh(w)
	h := o.owner[ownedPartitionOf(e.Account)]
	o.kill(w, h)
	w.dest.Release()
	if !stored {
		w.t.Logf("omidsend: %s never reached the destination before the kill", e.ID)
	}
	o.launch(w, h, nil)
	o.waitOwned(w, fmt.Sprintf("omidsend: host %d started again", h))
}

// nodeFault SIGKILLs node v while events arrive, restarts it, and waits
// for every stream the hosts use to be whole again.
func (o *nemOwned) nodeFault(w *nemWorld, v int) {
	done := w.publishFreshAsync(10 + w.rng.IntN(20))
	time.Sleep(time.Duration(w.rng.IntN(300)) * time.Millisecond) // the moment of the kill: the experiment's variable
	o.c.kill(v)
	time.Sleep(time.Duration(nemOutageMinMs+w.rng.IntN(nemOutageSpanMs)) * time.Millisecond) // the outage: the experiment's variable
	o.c.restart(v)
	<-done
	o.c.waitHealthy(2*time.Minute, stream, ownedDurables...)
	o.waitStreamsWhole(w)
	o.waitOwned(w, fmt.Sprintf("onode: node %d restarted", v))
}

// changelogName is partition i's changelog stream.
func changelogName(i int) string {
	name, _ := changelog.Names(stream, ownedDurables[i])
	return name
}

// waitStreamsWhole waits until each changelog, the lease bucket and the
// snapshot bucket that exists has a leader and its replicas current.
func (o *nemOwned) waitStreamsWhole(w *nemWorld) {
	names := []string{changelogName(0), changelogName(1), "KV_" + changelog.LeaseBucket, "OBJ_" + changelog.SnapshotBucket}
	var why string
	if !poll(2*time.Minute, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		for _, n := range names {
			s, err := w.js.Stream(ctx, n)
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				continue
			}
			if err != nil || !replicated(s.CachedInfo().Cluster, max(s.CachedInfo().Config.Replicas, 1)) {
				why = fmt.Sprintf("%s: %v", n, err)
				return false
			}
		}
		return true
	}) {
		w.t.Fatalf("the owned partitions' streams not whole within 2m: %s", why)
	}
}

// replace loses host h with its disk: SIGKILL while events arrive, its
// directory deleted, and a host with an empty one started with --standby.
func (o *nemOwned) replace(w *nemWorld, h int) {
	done := w.publishFreshAsync(10 + w.rng.IntN(20))
	time.Sleep(time.Duration(w.rng.IntN(300)) * time.Millisecond) // the moment of the loss: the experiment's variable
	o.kill(w, h)
	dir := filepath.Dir(o.base[h])
	if err := os.RemoveAll(dir); err != nil {
		w.t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		w.t.Fatal(err)
	}
	o.mu.Lock()
	o.role[h] = []string{"--standby"}
	o.mu.Unlock()
	o.launch(w, h, nil)
	<-done
	o.waitOwned(w, fmt.Sprintf("oreplace: host %d replaced", h))
	// The new host restores each partition's snapshot: until it has, it
	// has no file, and a stop at the drain would leave none.
	if !poll(75*time.Second, func() bool {
		for i := range nemOwnedParts {
			if _, err := os.Stat(partitionFile(o.base[h], i)); err != nil {
				return false
			}
		}
		return true
	}) {
		w.m.violate("oreplace: host %d, replaced, has not restored its partitions' snapshots within 75s: %s", h, o.said(w, h))
	}
}

// changelogFault deletes or purges partition which's changelog stream (2:
// both) under the hosts, publishes, then restarts both, in a random order.
func (o *nemOwned) changelogFault(w *nemWorld, which int, purge bool) {
	parts := []int{which}
	if which == 2 {
		parts = []int{0, 1}
	}
	for _, i := range parts {
		name := changelogName(i)
		if !poll(30*time.Second, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if !purge {
				err := w.js.DeleteStream(ctx, name)
				return err == nil || errors.Is(err, jetstream.ErrStreamNotFound)
			}
			s, err := w.js.Stream(ctx, name)
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				return true
			}
			return err == nil && s.Purge(ctx) == nil
		}) {
			w.t.Fatalf("changelog %s: neither deleted nor purged within 30s", name)
		}
	}
	w.t.Logf("changelogs of partitions %v %s", parts, map[bool]string{false: "deleted", true: "purged"}[purge])
	w.publishFresh(5 + w.rng.IntN(20))
	// The owner goes on, on a log begun again (docs/scaling.md), and
	// applies them before the restarts.
	if !poll(time.Minute, func() bool { return o.c.drained(stream, ownedDurables...) }) {
		w.m.violate("%s: the events published after the changelogs of %v were %s not applied within 1m: host 0: %s; host 1: %s; %s",
			map[bool]string{false: "ocldel", true: "oclpurge"}[purge], parts, map[bool]string{false: "deleted", true: "purged"}[purge],
			o.said(w, 0), o.said(w, 1), o.diagnose(w))
	}
	o.restartBoth(w)
	o.waitOwned(w, "changelog fault: both hosts restarted")
}

// restartBoth stops both hosts at once and starts them again, one first
// (chosen at random), the other once the first has begun.
func (o *nemOwned) restartBoth(w *nemWorld) {
	o.stop(w, 0, 1)
	first := w.rng.IntN(2)
	o.launch(w, first, nil)
	p := o.proc(w, first)
	poll(time.Minute, func() bool { return p.output() != "" })
	time.Sleep(time.Duration(w.rng.IntN(2000)) * time.Millisecond) // the second's head start: the experiment's variable
	o.launch(w, 1-first, nil)
	w.t.Logf("restarted host %d, then host %d", first, 1-first)
}

// leasesDeleted deletes the lease bucket under both hosts.
func (o *nemOwned) leasesDeleted(w *nemWorld) {
	if !poll(30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := w.js.DeleteKeyValue(ctx, changelog.LeaseBucket)
		return err == nil || errors.Is(err, jetstream.ErrBucketNotFound)
	}) {
		w.t.Fatal("the lease bucket not deleted within 30s")
	}
	w.publishFresh(5 + w.rng.IntN(20))
	o.waitOwned(w, "oleases: the lease bucket deleted")
}

// schemaUpgrade adds a table to --schema (the --apply stays) and restarts
// the host that stands by (for both partitions, or at random when each
// owns one) first, then the other.
func (o *nemOwned) schemaUpgrade(w *nemWorld) {
	o.schemaV++
	schema := balanceTable
	for v := 1; v <= o.schemaV; v++ {
		schema += fmt.Sprintf("\nCREATE TABLE IF NOT EXISTS audit_%d (msg_id TEXT PRIMARY KEY, note TEXT NOT NULL);", v)
	}
	if err := os.WriteFile(w.schema, []byte(schema+"\n"), 0o600); err != nil {
		w.t.Fatal(err)
	}
	o.refresh(w)
	owns := [2]int{}
	for _, h := range o.owner {
		owns[h]++
	}
	first := w.rng.IntN(2)
	if owns[0] != owns[1] {
		first = 0
		if owns[1] < owns[0] {
			first = 1
		}
	}
	o.stop(w, first)
	o.launch(w, first, nil)
	o.waitOwned(w, fmt.Sprintf("oschema v%d: host %d (standing by) upgraded", o.schemaV, first))
	w.publishFresh(5)
	o.stop(w, 1-first)
	o.launch(w, 1-first, nil)
	o.waitOwned(w, fmt.Sprintf("oschema v%d: host %d upgraded", o.schemaV, 1-first))
	w.t.Logf("oschema: v%d, host %d first", o.schemaV, first)
}

// twice stops both hosts and starts them at the same moment.
func (o *nemOwned) twice(w *nemWorld) {
	o.stop(w, 0, 1)
	o.launch(w, 0, nil)
	o.launch(w, 1, nil)
	o.waitOwned(w, "otwice: both started at once")
}

// leave runs partition i out of its changelog for a while on its owner's
// host, then both hosts back with their roles (see nemOwnedLeave).
func (o *nemOwned) leave(w *nemWorld, i int) {
	o.refresh(w)
	h := o.owner[i]
	o.stop(w, 0, 1)
	o.mu.Lock()
	o.special = append(o.flags(strconv.Itoa(i)), "--leave-changelog")
	o.mu.Unlock()
	o.launch(w, h, nil)
	o.mu.Lock()
	o.special = nil
	o.mu.Unlock()
	var evs []event
	for len(evs) < 10+w.rng.IntN(20) {
		e := makeEvents(w.rng, w.pub, 1)[0]
		if ownedPartitionOf(e.Account) == i {
			w.m.fresh(e)
			evs = append(evs, e)
		}
	}
	<-w.publishAsync(evs)
	if !poll(time.Minute, func() bool { return o.c.drained(stream, ownedDurables[i]) }) {
		w.t.Logf("oleave: host %d did not drain partition %d within 1m: %s", h, i, o.said(w, h))
	}
	o.stop(w, h)
	name := changelogName(i)
	if !poll(30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := w.js.DeleteStream(ctx, name)
		return err == nil || errors.Is(err, jetstream.ErrStreamNotFound)
	}) {
		w.t.Fatalf("oleave: changelog %s not deleted within 30s", name)
	}
	o.launch(w, 0, nil)
	o.launch(w, 1, nil)
	o.waitOwned(w, "oleave: both back")
}

// settled: both durables drained and no outbox row queued or sending in
// the partitions' current ledgers.
func (o *nemOwned) settled(w *nemWorld) bool { return partsSettled(w, o.c) }

// partsSettled: the partitions' durables drained on c, and no outbox row
// queued or sending in their current ledgers.
func partsSettled(w *nemWorld, c *cluster) bool {
	if !c.drained(stream, ownedDurables...) {
		return false
	}
	open := 0
	w.query(func(_ string, db *sql.DB) {
		open += count(w.t, db, `SELECT count(*) FROM outbox WHERE status IN ('queued', 'sending')`)
	})
	return open == 0
}

// check: the drain stopped host 0, so host 1 takes over what host 0 owned
// (a last hand-over) and settles; then it stops, and the final owners'
// ledgers and every other copy are judged.
func (o *nemOwned) check(w *nemWorld) {
	if o.isDown(w, 1) {
		o.launch(w, 1, nil)
	}
	took := func(i int) bool { return o.holder(w, i) == 1 && o.owns(w, 1, i) }
	poll(2*time.Minute, func() bool { return took(0) && took(1) })
	for i := range nemOwnedParts {
		if took(i) {
			o.owner[i] = 1
			continue
		}
		o.owner[i] = 0
		w.m.violate("host 1 did not take partition %d over within 2m of host 0's SIGTERM at the drain: %s", i, o.said(w, 1))
	}
	o.mu.Lock()
	o.frozen = true
	o.mu.Unlock()
	if !poll(time.Minute, func() bool { return o.settled(w) }) {
		w.m.violate("after host 1's take-over at the drain, not settled within 1m (durables or outbox): %s", o.said(w, 1))
	}
	o.stop(w, 1)
	w.t.Logf("final owners: partition 0 host %d, partition 1 host %d", o.owner[0], o.owner[1])

	finals := make([]string, nemOwnedParts)
	for i := range finals {
		finals[i] = partitionFile(o.base[o.owner[i]], i)
	}
	ids := judgeFinals(w, finals)

	// No host's file of a partition gone, and no other copy holding what
	// the final ledger lacks: the other host's file, and every file a
	// restore set aside.
	var others []string
	for h := range o.base {
		for i := range nemOwnedParts {
			f := partitionFile(o.base[h], i)
			if _, err := os.Stat(f); err != nil {
				w.m.violate("host %d's ledger of partition %d is gone: %v", h, i, err)
				continue
			}
			if o.owner[i] != h {
				others = append(others, f)
			}
		}
		others = append(others, setAsideFiles(w, o.base[h])...)
	}
	setAside := judgeCopies(w, ids, others)
	w.t.Logf("owned: %d files set aside by restores, %d other copies compared", setAside, len(others))
}

// judgeFinals: over the final ledgers of the partitions (files[i]: of
// partition i), every account and id in one, each only its partition's
// subjects. It returns each one's ids.
func judgeFinals(w *nemWorld, files []string) []map[string]bool {
	finals := make([]map[string]bool, len(files))
	home := map[string]int{}
	for i, f := range files {
		db := w.openLedger(f)
		finals[i] = w.ids(db, `SELECT message_id FROM processed_messages`)
		for acct := range w.ids(db, `SELECT account FROM balances`) {
			if j, ok := home[acct]; ok {
				w.m.violate("account %s is in the ledgers of partitions %d and %d", acct, j, i)
			}
			home[acct] = i
		}
		if n := count(w.t, db, `SELECT count(*) FROM processed_messages WHERE subject NOT LIKE ?`, fmt.Sprintf("%d.%%", i)); n != 0 {
			w.m.violate("partition %d's final ledger holds %d messages of other partitions", i, n)
		}
		db.Close()
	}
	for i := range finals {
		for id := range finals[i] {
			for j := i + 1; j < len(finals); j++ {
				if finals[j][id] {
					w.m.violate("message %s is applied in the ledgers of partitions %d and %d", id, i, j)
				}
			}
		}
	}
	return finals
}

// setAsideFiles are the files a restore set aside beside base.
func setAsideFiles(w *nemWorld, base string) []string {
	aside, err := filepath.Glob(filepath.Join(filepath.Dir(base), "ledger-p*.db.replaced-*"))
	if err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, f := range aside {
		if !strings.HasSuffix(f, "-wal") && !strings.HasSuffix(f, "-shm") && !strings.HasSuffix(f, "-journal") {
			out = append(out, f)
		}
	}
	return out
}

// judgeCopies: no file of others (a partition's copy: ledger-pI.db…)
// holds a message its partition's final ledger (finals[I]) lacks. It
// returns how many were files a restore set aside.
func judgeCopies(w *nemWorld, finals []map[string]bool, others []string) (setAside int) {
	for _, f := range others {
		i, err := strconv.Atoi(strings.TrimPrefix(strings.SplitN(filepath.Base(f), ".", 2)[0], "ledger-p"))
		if err != nil || i < 0 || i >= len(finals) {
			w.t.Fatalf("%s: not a partition's ledger", f)
		}
		if strings.Contains(f, ".replaced-") {
			setAside++
		}
		db := w.openLedger(f)
		var missing []string
		for _, id := range sortedKeys(w.ids(db, `SELECT message_id FROM processed_messages`)) {
			if !finals[i][id] {
				missing = append(missing, id)
			}
		}
		db.Close()
		if len(missing) > 0 {
			w.m.violate("%s holds %d messages the final ledger of partition %d lacks (first %s): a copy that was the only one of them",
				strings.TrimPrefix(f, w.dir+"/"), len(missing), i, missing[0])
		}
	}
	return setAside
}

// partLedgers, partSubject and partWithout are what the owned and group
// topologies share: the partitions' ledgers, the subject of an account,
// and the common steps left out (what acts on w.run alone, or writes an
// owned ledger, which is refused by design).
func partLedgers(w *nemWorld) []string {
	var out []string
	for _, p := range w.parts() {
		out = append(out, p.db)
	}
	return out
}

func partSubject(_ *nemWorld, account string) string {
	if account == "" {
		account = "nokey"
	}
	return "ev." + account
}

var partWithout = map[nemKind]bool{nemKill: true, nemKillCommit: true, nemMidSend: true, nemFlags: true, nemPrune: true,
	nemReplay: true, nemRequeue: true, nemDiscard: true, nemResolve: true, nemCancel: true, nemRetry: true, nemRecreate: true}

// holderPid is the process id partition i's lease names (its holder is
// host:pid:tag, service.runName, and a group's run adds /pI.N), 0 for none.
func holderPid(w *nemWorld, i int) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	kv, err := w.js.KeyValue(ctx, changelog.LeaseBucket)
	if err != nil {
		return 0
	}
	e, err := kv.Get(ctx, stream+"."+ownedDurables[i])
	if err != nil {
		return 0
	}
	f := strings.Split(strings.SplitN(string(e.Value()), "/", 2)[0], ":")
	if len(f) < 3 {
		return 0
	}
	pid, _ := strconv.Atoi(f[len(f)-2])
	return pid
}

// stopped waits for host h's process p, SIGTERMed, to exit 0.
func stopped(w *nemWorld, h int, p *proc, timeout time.Duration) {
	code := p.wait(timeout)
	switch {
	case code == -1 && strings.TrimSpace(p.output()) == "":
		// Killed by the signal before it had said a word: SIGTERM came
		// while the program was still initialising its packages, before
		// main handles signals (a run a step had just started).
		w.t.Logf("host %d: SIGTERM before it started (no output): killed by the signal", h)
	case code != 0:
		w.m.violate("host %d exited %d after SIGTERM, want 0: %s", h, code, lastLine(p.output()))
	}
}

// saidBy is p's last warnings and errors, for a finding's report.
func saidBy(p *proc) string {
	if p == nil {
		return "(not started)"
	}
	var recs []string
	p.record(func(r map[string]any) bool {
		if lvl, _ := r["level"].(string); lvl == "WARN" || lvl == "ERROR" {
			s := fmt.Sprintf("[%v p%v] %v", lvl, r["partition"], r["msg"])
			if e, ok := r["err"]; ok {
				s += fmt.Sprintf(" (err: %v)", e)
			}
			recs = append(recs, s)
		}
		return false
	})
	if len(recs) > 4 {
		recs = recs[len(recs)-4:]
	}
	if len(recs) == 0 {
		return "no warning; last line: " + lastLine(p.output())
	}
	return strings.Join(recs, " | ")
}

// reportRuns logs, when the schedule has findings, each host process's
// records about its group, its partitions' ownership, log and files.
func reportRuns(w *nemWorld, runs []nemOwnedRun) {
	w.m.mu.Lock()
	n := len(w.m.violations)
	w.m.mu.Unlock()
	if n == 0 || w.t.Failed() { // a harness failure logs every process's output already
		return
	}
	for k, r := range runs {
		var recs []string
		r.p.record(func(m map[string]any) bool {
			msg, _ := m["msg"].(string)
			lvl, _ := m["level"].(string)
			if m["role"] != nil || strings.HasPrefix(msg, "changelog") || strings.HasPrefix(msg, "group") || strings.Contains(msg, "partition's") || lvl == "ERROR" {
				b, _ := json.Marshal(m)
				recs = append(recs, string(b))
			}
			return false
		})
		w.t.Logf("run %d (host %d, pid %d):\n    %s", k, r.host, r.p.cmd.Process.Pid, strings.Join(recs, "\n    "))
	}
}

func replayOwned(s nemSchedule) string {
	return fmt.Sprintf("JETLEDGER_NEMESIS_TOPOLOGY=owned go test ./integration -run 'TestNemesisOwned$' -nemesis.seed=%d -nemesis.steps='%s'",
		s.Seed, formatSteps(s.Steps))
}

// The nemesis on owned partitions (the owned topology above): schedules
// from seeds, each run, drained and checked as TestNemesis's; a failing
// one is shrunk and printed with the command that replays it. Off unless
// JETLEDGER_NEMESIS_TOPOLOGY=owned (short: seeds 1, 2 and one from the
// clock, 12 steps) or JETLEDGER_NEMESIS=long (200 schedules of 18 steps);
// JETLEDGER_NEMESIS_SCHEDULES, _STEPS, _SHRINK, _STOP_FIRST, _REPORT and
// _VERBOSE as for TestNemesis; -nemesis.seed and -nemesis.steps replay one.
func TestNemesisOwned(t *testing.T) {
	if os.Getenv("JETLEDGER_NEMESIS_TOPOLOGY") != topoOwned && os.Getenv("JETLEDGER_NEMESIS") != "long" {
		t.Skip("the owned topology's nemesis runs with JETLEDGER_NEMESIS_TOPOLOGY=owned or JETLEDGER_NEMESIS=long")
	}
	runTopologyNemesis(t, topoOwned, replayOwned)
}

// runTopologyNemesis runs schedules of topo (short profile: 3 unless
// JETLEDGER_NEMESIS_SCHEDULES says), or the one -nemesis.seed and
// -nemesis.steps give; a failing one is shrunk, and replay says how to
// run it again.
func runTopologyNemesis(t *testing.T, topo string, replay func(nemSchedule) string) {
	prof := nemProfileFromEnv(t)
	if prof.Name == "short" && os.Getenv("JETLEDGER_NEMESIS_SCHEDULES") == "" {
		prof.Schedules = 3
	}
	var scheds []nemSchedule
	switch {
	case *nemStepsFlag != "":
		steps, err := parseSteps(*nemStepsFlag, topo)
		if err != nil {
			t.Fatalf("-nemesis.steps: %v", err)
		}
		scheds = []nemSchedule{{Seed: *nemSeedFlag, Topo: topo, Steps: steps}}
	case *nemSeedFlag != 0:
		scheds = []nemSchedule{scheduleOf(*nemSeedFlag, topo, prof.Steps)}
	default:
		timeSeed := uint64(time.Now().UnixNano())
		t.Logf("%s nemesis, %s profile: seeds 1, 2, then time-derived seeds from %d", topo, prof.Name, timeSeed)
		for i := range prof.Schedules {
			seed := uint64(i + 1)
			if i >= 2 {
				seed = timeSeed + uint64(i)
			}
			scheds = append(scheds, scheduleOf(seed, topo, prof.Steps))
		}
	}
	total := newNemStats()
	began := time.Now()
	failed := 0
	for _, s := range scheds {
		found, stats, logs := execute(t, s)
		total.add(stats)
		t.Logf("schedule seed=%d topology=%s steps=%d: %d findings, %d published, %.1fs: %s", s.Seed, s.Topo, len(s.Steps), len(found), stats.Published, stats.Seconds, formatSteps(s.Steps))
		if os.Getenv("JETLEDGER_NEMESIS_VERBOSE") != "" {
			t.Logf("its log:\n  %s", strings.Join(logs, "\n  "))
		}
		if len(found) == 0 {
			continue
		}
		failed++
		t.Errorf("%s nemesis schedule seed=%d failed after %s:\n  %s", topo, s.Seed, time.Since(began).Round(time.Second), strings.Join(found, "\n  "))
		t.Logf("its log:\n  %s", strings.Join(logs, "\n  "))
		if len(s.Steps) > 1 && prof.Shrink > 0 {
			shrunk, runs := shrink(t, s, prof.Shrink)
			again, _, _ := execute(t, shrunk)
			t.Errorf("shrunk in %d runs from %d to %d steps (seed %d, %s after the start); it fails with:\n  %s\nreplay it: %s",
				runs, len(s.Steps), len(shrunk.Steps), s.Seed, time.Since(began).Round(time.Second), strings.Join(again, "\n  "), replay(shrunk))
		} else {
			t.Logf("replay it: %s", replay(s))
		}
		if prof.StopFirst {
			break
		}
	}
	report(t, topo+" nemesis report", prof, failed, total, began)
}
