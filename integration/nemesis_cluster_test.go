package integration

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// The cluster topology: three nats-server processes (startCluster), the
// stream partitioned into nemPartitions with 3 replicas, consumed by two
// run processes ("hosts") splitting the partitions, each with its ledgers
// in a directory of its own, as README's "Scaling out" has it. w.run is
// host 0 (the common steps act on it; host 1 goes on meanwhile); host 1 is
// up between steps. Its own steps SIGKILL nodes (the stream leader's, a
// partition durable's leader's, any) and hosts, put a fault point or a
// mid-send kill on either host, and move a partition to the other host by
// the hand-over of README's "Moving a partition".
const (
	topoCluster     = "cluster"
	nemPartitions   = 3
	nemClusterSubj  = "ev.*"                 // the key is the account: ev.<account>
	nemNodeStream   = nemKind("nodestream")  // SIGKILL of the stream leader's node while Arg events arrive, a restart
	nemNodeDurable  = nemKind("nodedurable") // of the node leading partition Arg's durable (not the stream's)
	nemNodeAny      = nemKind("node")        // of node Arg
	nemHostKill     = nemKind("hostkill")    // SIGKILL of host 1 while Arg events arrive; host 0 goes on; a restart
	nemHostCommit   = nemKind("hkillcommit") // killcommit on host Arg%2, with events of its partitions
	nemHostMidSend  = nemKind("hmidsend")    // midsend on host Arg%2, with an event of its partitions
	nemMovePart     = nemKind("move")        // a partition of the host with two moved to the other (ledger backup)
	nemOutageMinMs  = 200
	nemOutageSpanMs = 1300
)

// nemCluster is the cluster topology's state beside its world.
type nemCluster struct {
	c     *cluster
	base  [2]string // each host's --db; its partitions' ledgers are beside it
	owner [nemPartitions]int
	host1 *proc
	down1 bool
}

// nemClusters holds each world's cluster (schedules run one at a time; a
// map keeps the shared world type free of topology fields).
var nemClusters sync.Map // *nemWorld → *nemCluster

func clusterOf(w *nemWorld) *nemCluster {
	v, ok := nemClusters.Load(w)
	if !ok {
		w.t.Fatal("no cluster for this world")
	}
	return v.(*nemCluster)
}

// partitionOf is the partition the stream's mapping puts an account in.
var partitionOf = partitionMapping(nemClusterSubj, nemPartitions)

// partitionMapping is the partition a stream on subject (ev.<account>)
// in parts partitions puts an account in: the server's own transform, as
// the stream is created with it.
func partitionMapping(subject string, parts int) func(account string) int {
	tr, err := server.NewSubjectTransform(subject, fmt.Sprintf("{{partition(%d,1)}}.ev.{{wildcard(1)}}", parts))
	if err != nil {
		panic(err)
	}
	return func(account string) int {
		to, err := tr.Match("ev." + account)
		if err != nil {
			panic(err)
		}
		n, _ := strconv.Atoi(strings.SplitN(to, ".", 2)[0])
		return n
	}
}

func init() {
	nemTopologies[topoCluster] = &nemTopology{
		setup: func(w *nemWorld) {
			cl := &nemCluster{c: startCluster(w.t), owner: [nemPartitions]int{0, 0, 1}}
			for h := range cl.base {
				dir := filepath.Join(w.dir, fmt.Sprintf("host%d", h))
				if err := os.MkdirAll(dir, 0o700); err != nil {
					w.t.Fatal(err)
				}
				cl.base[h] = filepath.Join(dir, "ledger.db")
			}
			nemClusters.Store(w, cl)
			w.t.Cleanup(func() { nemClusters.Delete(w) })
			w.db = cl.base[0]
			w.js = cl.c.js
			// Host 1 first: it creates the stream, and host 0's start waits
			// for every partition's durable.
			cl.startHost1(w, nil)
			w.startRun(nil)
		},
		url: func(w *nemWorld) string { return clusterOf(w).c.urls() },
		runArgs: func(w *nemWorld, db string) []string {
			cl := clusterOf(w)
			h := 0
			if db == cl.base[1] {
				h = 1
			} else if db != cl.base[0] {
				w.t.Fatalf("run --db %s is no host's", db)
			}
			// Every host gives the stream's flags: the same configuration
			// twice is one stream, and whichever starts first creates it.
			return []string{"--nats", cl.c.urls(), "--subjects", nemClusterSubj, "--partitions", strconv.Itoa(nemPartitions),
				"--replicas", "3", "--duplicate-window", nemDupWindow.String(), "--partition", cl.partitionList(h)}
		},
		ledgers: func(w *nemWorld) []string {
			var out []string
			for _, p := range w.parts() {
				out = append(out, p.db)
			}
			return out
		},
		parts: func(w *nemWorld) []nemPart {
			cl := clusterOf(w)
			out := make([]nemPart, nemPartitions)
			for i := range out {
				out[i] = nemPart{db: partitionFile(cl.base[cl.owner[i]], i), durable: fmt.Sprintf("jetledger-p%d", i)}
			}
			return out
		},
		subject: func(_ *nemWorld, account string) string {
			if account == "" {
				account = "nokey" // a payload --apply cannot read has no account: any key
			}
			return "ev." + account
		},
		// killcommit and midsend act on w.run with any event: with two
		// hosts, the event may be the other host's, and the fault point is
		// never reached (killcommit waits in vain) or the kill meets nothing
		// in hand. The cluster's hkillcommit and hmidsend pick the host and
		// events of its partitions.
		// recreate restarts w.run alone, and the other host would be left
		// stopped by its durable's delete: not modelled here.
		without: map[nemKind]bool{nemKillCommit: true, nemMidSend: true, nemRecreate: true},
		extra: []nemWeight{{nemPause, 2, nil}, {nemStop, 2, nil}, {nemStart, 2, nil},
			{nemNodeStream, 3, between(5, 30)}, {nemNodeDurable, 3, between(0, nemPartitions-1)}, {nemNodeAny, 2, between(0, 2)},
			{nemHostKill, 3, between(5, 30)}, {nemHostCommit, 2, between(0, 1)}, {nemHostMidSend, 2, between(0, 1)},
			{nemMovePart, 2, between(0, 1)}},
		check: func(w *nemWorld) { clusterOf(w).check(w) },
	}
	nemStepFuncs[nemNodeStream] = func(w *nemWorld, st nemStep) {
		cl := clusterOf(w)
		var leader int
		consumertest.Eventually(w.t, time.Minute, "the stream's leader", func() bool { leader = cl.c.leaderOf(stream); return leader >= 0 })
		cl.nodeFault(w, leader, max(st.Arg, 1))
	}
	nemStepFuncs[nemNodeDurable] = func(w *nemWorld, st nemStep) {
		cl := clusterOf(w)
		durable := fmt.Sprintf("jetledger-p%d", st.Arg%nemPartitions)
		// Apart from the stream's leader, so the kill takes the durable's
		// leader alone (nodestream takes the stream's).
		cl.c.separateLeaders(stream, durable)
		var leader int
		consumertest.Eventually(w.t, time.Minute, durable+"'s leader", func() bool {
			leader = cl.c.consumerLeaderOf(stream, durable)
			return leader >= 0
		})
		cl.nodeFault(w, leader, 10)
	}
	nemStepFuncs[nemNodeAny] = func(w *nemWorld, st nemStep) { clusterOf(w).nodeFault(w, st.Arg%3, 10) }
	nemStepFuncs[nemHostKill] = func(w *nemWorld, st nemStep) {
		cl := clusterOf(w)
		cl.upHost1(w)
		done := w.publishFreshAsync(max(st.Arg, 1))
		time.Sleep(time.Duration(w.rng.IntN(400)) * time.Millisecond) // the moment of the kill is the experiment's variable
		cl.host1.kill()
		cl.down1 = true
		// Host 1 stays down a while, host 0 consuming alone: the experiment's variable.
		time.Sleep(time.Duration(w.rng.IntN(1500)) * time.Millisecond)
		cl.startHost1(w, nil)
		<-done
	}
	nemStepFuncs[nemHostCommit] = func(w *nemWorld, st nemStep) { clusterOf(w).killCommit(w, st.Arg%2) }
	nemStepFuncs[nemHostMidSend] = func(w *nemWorld, st nemStep) { clusterOf(w).midSend(w, st.Arg%2) }
	nemStepFuncs[nemMovePart] = func(w *nemWorld, st nemStep) { clusterOf(w).move(w, st.Arg) }
}

// partitionFile is partition i's ledger beside db (run's -p<I>).
func partitionFile(db string, i int) string {
	ext := filepath.Ext(db)
	return fmt.Sprintf("%s-p%d%s", strings.TrimSuffix(db, ext), i, ext)
}

// partitionsOf lists host h's partitions.
func (cl *nemCluster) partitionsOf(h int) []int {
	var out []int
	for i, o := range cl.owner {
		if o == h {
			out = append(out, i)
		}
	}
	return out
}

func (cl *nemCluster) partitionList(h int) string {
	var s []string
	for _, i := range cl.partitionsOf(h) {
		s = append(s, strconv.Itoa(i))
	}
	return strings.Join(s, ",")
}

func (cl *nemCluster) durables() []string {
	out := make([]string, nemPartitions)
	for i := range out {
		out[i] = fmt.Sprintf("jetledger-p%d", i)
	}
	return out
}

// startHost1 starts host 1 and waits until its durables have its pull
// requests waiting (or it exited: a fault point).
func (cl *nemCluster) startHost1(w *nemWorld, env []string) {
	cl.host1 = start(w.t, w.runEnv(env), w.runArgs(cl.base[1])...)
	cl.down1 = false
	consumertest.Eventually(w.t, time.Minute, "host 1 fetching", func() bool {
		select {
		case <-cl.host1.done:
			return true
		default:
		}
		for _, i := range cl.partitionsOf(1) {
			ci, err := consumerInfo(w, fmt.Sprintf("jetledger-p%d", i))
			if err != nil || ci.NumWaiting == 0 {
				return false
			}
		}
		return true
	})
}

func (cl *nemCluster) stopHost1(w *nemWorld) {
	if cl.down1 {
		return
	}
	cl.host1.stop()
	if code := cl.host1.wait(time.Minute); code != 0 {
		w.m.violate("host 1 exited %d after SIGTERM, want 0: %s", code, lastLine(cl.host1.output()))
	}
	cl.down1 = true
}

func (cl *nemCluster) upHost1(w *nemWorld) {
	if cl.down1 {
		cl.startHost1(w, nil)
	}
}

// host is host h's process, started if it is down.
func (cl *nemCluster) host(w *nemWorld, h int) *proc {
	if h == 0 {
		w.up()
		return w.run
	}
	cl.upHost1(w)
	return cl.host1
}

func (cl *nemCluster) restartHost(w *nemWorld, h int, env []string) {
	if h == 0 {
		w.startRun(env)
		return
	}
	cl.startHost1(w, env)
}

func (cl *nemCluster) stopHost(w *nemWorld, h int) {
	if h == 0 {
		w.stopRun()
		return
	}
	cl.stopHost1(w)
}

// nodeFault SIGKILLs node victim while n events arrive, keeps it down a
// while, restarts it, and waits for the stream and every durable to have a
// leader and three current replicas, so the next step meets a whole
// cluster.
func (cl *nemCluster) nodeFault(w *nemWorld, victim, n int) {
	// Host 0 may be down (a stop step): the node goes under host 1 alone.
	done := w.publishFreshAsync(n)
	time.Sleep(time.Duration(w.rng.IntN(300)) * time.Millisecond) // the moment of the kill: the experiment's variable
	cl.c.kill(victim)
	time.Sleep(time.Duration(nemOutageMinMs+w.rng.IntN(nemOutageSpanMs)) * time.Millisecond) // the outage: the experiment's variable
	cl.c.restart(victim)
	<-done
	cl.c.waitHealthy(2*time.Minute, stream, cl.durables()...)
}

// freshFor makes n fresh events whose accounts are in host h's partitions.
func (cl *nemCluster) freshFor(w *nemWorld, h, n int) []event {
	var out []event
	for len(out) < n {
		e := makeEvents(w.rng, w.pub, 1)[0]
		if cl.owner[partitionOf(e.Account)] == h {
			w.m.fresh(e)
			out = append(out, e)
		}
	}
	return out
}

// killCommit is the common killcommit on host h, with events it consumes.
func (cl *nemCluster) killCommit(w *nemWorld, h int) {
	cl.stopHost(w, h)
	cl.restartHost(w, h, []string{"JETLEDGER_FAULT=after-commit"})
	p := w.run
	if h == 1 {
		p = cl.host1
	}
	done := w.publishAsync(cl.freshFor(w, h, 3+w.rng.IntN(8)))
	if code := p.wait(time.Minute); code != -1 {
		w.m.violate("hkillcommit: host %d exited %d, want death at the fault point", h, code)
	}
	cl.restartHost(w, h, nil)
	<-done
}

// midSend is the common midsend on host h: an event of its partitions.
func (cl *nemCluster) midSend(w *nemWorld, h int) {
	p := cl.host(w, h)
	w.dest.HoldAfterStore()
	e := cl.freshFor(w, h, 1)[0]
	if ack, ok := w.publishEvent(e, e.data()); ok {
		w.m.ack(e.ID, ack)
	}
	stored := poll(30*time.Second, func() bool {
		for _, it := range w.dest.Items() {
			if it.MessageID == e.ID {
				return true
			}
		}
		return false
	})
	p.kill()
	w.dest.Release()
	if !stored {
		w.t.Logf("hmidsend: %s never reached the destination before the kill", e.ID)
	}
	cl.restartHost(w, h, nil)
}

// move hands a partition of the host with two over to the other, as
// README's "Moving a partition": SIGTERM of the old owner (exit 0), ledger
// backup of the partition's file to the new host's directory, and the new
// host started with it among its --partition (a process's partitions are
// fixed: it restarts). The old file is kept until the new owner runs, and
// then deleted, as the README allows: an operator moving the partition back
// later backs it up to that path again.
func (cl *nemCluster) move(w *nemWorld, arg int) {
	from := 0
	if len(cl.partitionsOf(1)) > len(cl.partitionsOf(0)) {
		from = 1
	}
	to := 1 - from
	mine := cl.partitionsOf(from)
	i := mine[arg%len(mine)]
	cl.stopHost(w, from)
	src, dst := partitionFile(cl.base[from], i), partitionFile(cl.base[to], i)
	moved := w.operator(nemMovePart, false, "ledger", "backup", "--db", src, "--to", dst, "--json")
	cl.stopHost(w, to)
	if moved {
		cl.owner[i] = to
		w.t.Logf("move: partition %d from host %d to host %d", i, from, to)
	}
	// Host 1 first: host 0's start waits for every durable.
	cl.startHost1(w, nil)
	w.startRun(nil)
	if moved {
		// The old file goes once the new owner runs (README: keep it
		// until then), so a move back backs up to a free path.
		for _, f := range []string{src, src + "-wal", src + "-shm"} {
			if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
				w.t.Fatal(err)
			}
		}
	}
}

// check stops host 1 (the drain stopped host 0), then checks what only a
// partitioned stream can get wrong: an account in two ledgers, an id
// applied in two, a ledger holding another partition's message.
func (cl *nemCluster) check(w *nemWorld) {
	cl.stopHost1(w)
	partition := map[string]int{}
	for i, p := range w.parts() {
		partition[p.db] = i
	}
	home := map[string]int{}
	ids := map[string]int{}
	w.query(func(path string, db *sql.DB) {
		i := partition[path]
		for acct := range w.ids(db, `SELECT account FROM balances`) {
			if j, ok := home[acct]; ok {
				w.m.violate("account %s is in the ledgers of partitions %d and %d", acct, j, i)
			}
			home[acct] = i
		}
		for id := range w.ids(db, `SELECT message_id FROM processed_messages`) {
			if j, ok := ids[id]; ok {
				w.m.violate("message %s is applied in the ledgers of partitions %d and %d", id, j, i)
			}
			ids[id] = i
		}
		if n := count(w.t, db, `SELECT count(*) FROM processed_messages WHERE subject NOT LIKE ?`, fmt.Sprintf("%d.%%", i)); n != 0 {
			w.m.violate("partition %d's ledger %s holds %d messages of other partitions", i, path, n)
		}
	})
}

// consumerInfo asks for a durable's info once.
func consumerInfo(w *nemWorld, durable string) (*jetstream.ConsumerInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := w.js.Consumer(ctx, stream, durable)
	if err != nil {
		return nil, err
	}
	return c.Info(ctx)
}
