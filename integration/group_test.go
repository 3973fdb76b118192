package integration

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
	"github.com/jetledger/jetledger/group"
	"github.com/jetledger/jetledger/publisher"
)

// groupWorld is a group's hosts on a 3-node cluster: each host runs the
// same command in a directory of its own.
type groupWorld struct {
	t      *testing.T
	c      *cluster
	pub    *publisher.Publisher
	schema string
	n      int
	hosts  []*groupHost
	// name, durable and stable are the group's --group, --durable and
	// --group-stable-after: "g", "jetledger" and 5s unless a test says.
	name, durable string
	stable        time.Duration
	dest          *webhooktest.Destination // the hosts' webhook, when set
}

type groupHost struct {
	dir     string
	metrics string // its --metrics address
	p       *proc
}

// groupStream is the stream every group of the tests consumes.
const groupStream = "PAY"

func newGroupWorld(t *testing.T, n int) *groupWorld {
	c := startCluster(t)
	pub, err := publisher.New(c.js, publisher.Config{Attempts: 10, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	schema := filepath.Join(t.TempDir(), "schema.sql")
	if err := os.WriteFile(schema, []byte(balanceTable), 0o600); err != nil {
		t.Fatal(err)
	}
	return &groupWorld{t: t, c: c, pub: pub, schema: schema, n: n, name: "g", durable: "jetledger", stable: 5 * time.Second}
}

// another is a second group of n partitions on g's cluster and stream:
// name, with durable its own.
func (g *groupWorld) another(name, durable string, n int) *groupWorld {
	return &groupWorld{t: g.t, c: g.c, pub: g.pub, schema: g.schema, n: n, name: name, durable: durable, stable: g.stable}
}

// join starts a host of the group: the same command, its own directory.
func (g *groupWorld) join() *groupHost { return g.joinWith(binPath, g.t.TempDir(), g.n, 1) }

// joinWith starts a host of the group running the binary bin in dir (a
// restart when dir is kept), with partitions and standbys as given, and
// the flags extra.
func (g *groupWorld) joinWith(bin, dir string, partitions, standbys int, extra ...string) *groupHost {
	h := &groupHost{dir: dir, metrics: fmt.Sprintf("127.0.0.1:%d", freePort(g.t))}
	h.p = startCmd(g.t, bin, nil, nil, append([]string{"run", "--nats", g.c.urls(), "--db", filepath.Join(h.dir, "ledger.db"), "--stream", groupStream, "--metrics", h.metrics,
		"--subjects", "pay.*", "--partitions", strconv.Itoa(partitions), "--replicas", "3", "--group", g.name, "--standbys", strconv.Itoa(standbys), "--durable", g.durable,
		"--group-stable-after", g.stable.String(), "--schema", g.schema, "--apply", balanceApply, "--log-format", "json"}, append(g.effectArgs(), extra...)...)...)
	g.hosts = append(g.hosts, h)
	return h
}

// effectArgs are the plan's flags, and the webhook's when the group has one.
func (g *groupWorld) effectArgs() []string {
	if g.dest == nil {
		return fastPlan
	}
	return webhookArgs(g.dest, fastPlan...)
}

// effectsOnce waits until each of evs has its effect at the destination,
// and fails if any has two.
func (g *groupWorld) effectsOnce(evs []event) {
	g.t.Helper()
	var seen map[string]int
	consumertest.Eventually(g.t, 2*time.Minute, "an effect at the destination for every event", func() bool {
		seen = map[string]int{}
		for _, it := range g.dest.Items() {
			seen[it.MessageID]++
		}
		for _, e := range evs {
			if seen[e.ID] == 0 {
				return false
			}
		}
		return true
	})
	for id, n := range seen {
		if n > 1 {
			g.t.Errorf("message %s's effect is at the destination %d times", id, n)
		}
	}
}

// ownedAndFollowed says whether group status (st, its exit code) has
// every partition owned and its one standby following.
func (g *groupWorld) ownedAndFollowed(st group.Status, code int) bool {
	if code != 0 || len(st.Slots) != g.n {
		return false
	}
	following := map[string]map[int]group.Part{}
	for _, m := range st.Members {
		following[m.Member] = m.Parts
	}
	for _, s := range st.Slots {
		if s.State != group.SlotOwned || len(s.Standbys) != 1 || following[s.Standbys[0]][s.Partition].Role != "following" {
			return false
		}
	}
	return true
}

// holders are the hosts (indexes into g.hosts) holding each partition's
// lease, -1 where none does or the holder is no host of the test.
func (g *groupWorld) holders() []int {
	out := make([]int, g.n)
	for i := range out {
		out[i] = -1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := g.c.js.KeyValue(ctx, "JETLEDGER_LEASES")
	if err != nil {
		return out
	}
	for i := range out {
		e, err := kv.Get(ctx, fmt.Sprintf("%s.%s-p%d", groupStream, g.durable, i))
		if err != nil {
			continue
		}
		out[i] = g.hostOf(string(e.Value()))
	}
	return out
}

// hostOf is the host whose process a lease holder's name (host:pid:tag/pI.N) names.
func (g *groupWorld) hostOf(holder string) int {
	parts := strings.Split(strings.SplitN(holder, "/", 2)[0], ":")
	if len(parts) < 3 {
		return -1
	}
	pid, _ := strconv.Atoi(parts[len(parts)-2])
	for h, host := range g.hosts {
		if host.p.cmd.Process.Pid == pid {
			return h
		}
	}
	return -1
}

// settled waits until the group's assignment is made for the hosts in
// live, each partition's lease is held by its assigned owner, and each
// hand-over since since has been taken over, and returns the holders.
func (g *groupWorld) settled(timeout time.Duration, since time.Time, live ...int) []int {
	g.t.Helper()
	var held []int
	ok := poll(timeout, func() bool {
		for _, h := range live {
			select {
			case <-g.hosts[h].p.done:
				g.t.Fatalf("host %d exited:\n%s", h, g.hosts[h].p.output())
			default:
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		a, _, err := group.Read(ctx, g.c.js, g.name)
		if err != nil || len(a.Members) != len(live) {
			return false
		}
		held = g.holders()
		for i, h := range held {
			if h < 0 || !slices.Contains(live, h) || group.ID(g.memberOf(h)) != a.Owner(i) {
				return false
			}
		}
		for _, m := range g.moves(since) {
			if m.to < 0 {
				return false
			}
		}
		return true
	})
	if !ok {
		g.dumpTails(live)
		slots, code := g.status()
		g.t.Fatalf("the group never settled on hosts %v within %v: holders %v; group status exit %d, %+v", live, timeout, held, code, slots)
	}
	return held
}

// dumpTails logs the last lines of the hosts live: what a wait said.
func (g *groupWorld) dumpTails(live []int) {
	for _, h := range live {
		g.t.Logf("host %d's last lines:\n%s", h, tailH30(g.hosts[h].p.output(), 25))
	}
}

// memberOf is host h's member name, from a lease it holds.
func (g *groupWorld) memberOf(h int) string {
	rec, ok := g.hosts[h].p.record(func(r map[string]any) bool { return r["msg"] == "joined the group" })
	if !ok {
		return ""
	}
	m, _ := rec["member"].(string)
	return m
}

// publish publishes evs, again until the cluster takes them.
func (g *groupWorld) publish(evs []event) {
	g.t.Helper()
	consumertest.Eventually(g.t, 2*time.Minute, "published", func() bool {
		_, err := g.pub.PublishBatch(context.Background(), byAccount(evs))
		return err == nil
	})
}

func (g *groupWorld) durables() []string {
	var ds []string
	for i := range g.n {
		ds = append(ds, fmt.Sprintf("%s-p%d", g.durable, i))
	}
	return ds
}

// checkOnce checks every event applied once over the ledgers of each
// partition's holder.
func (g *groupWorld) checkOnce(held []int, evs []event) {
	g.t.Helper()
	consumertest.Eventually(g.t, 3*time.Minute, "every partition drained", func() bool { return g.c.drained(groupStream, g.durables()...) })
	ledgers := make([]*sql.DB, g.n)
	for i, h := range held {
		ledgers[i] = (&world{t: g.t, db: filepath.Join(g.hosts[h].dir, fmt.Sprintf("ledger-p%d.db", i))}).ledgerDB()
	}
	// The owners commit what they acked before the durable says so.
	consumertest.Eventually(g.t, time.Minute, "the owners' ledgers hold every event", func() bool {
		rows := 0
		for _, db := range ledgers {
			rows += count(g.t, db, `SELECT count(*) FROM (`+ledgerIDs(db)+`)`)
		}
		return rows >= len(evs)
	})
	checkPartitionedExact(g.t, ledgers, evs)
}

// move is a partition's hand-over: its owner's stop, and the take-over
// by the next owner.
type move struct {
	partition, from, to int
	at                  time.Time // the stop
	pause               time.Duration
}

// moves are the hand-overs since since, from the hosts' logs: each stop
// of an owning run paired with the next take-over of its partition (to
// -1 while none has followed it).
func (g *groupWorld) moves(since time.Time) []move {
	type event struct {
		host, partition int
		at              time.Time
		stop            bool
	}
	var evs []event
	for h, host := range g.hosts {
		host.p.record(func(r map[string]any) bool {
			m, _ := r["msg"].(string)
			i, ok := r["partition"].(float64)
			at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(r["time"]))
			stop := m == "group: stopping the partition here" && r["role"] == "owner"
			if ok && err == nil && at.After(since) && (stop || strings.HasPrefix(m, "owning the partition")) {
				evs = append(evs, event{host: h, partition: int(i), at: at, stop: stop})
			}
			return false
		})
	}
	slices.SortFunc(evs, func(a, b event) int { return a.at.Compare(b.at) })
	var out []move
	for k, e := range evs {
		if !e.stop {
			continue
		}
		m := move{partition: e.partition, from: e.host, to: -1, at: e.at}
		for _, next := range evs[k+1:] {
			if next.partition == e.partition && !next.stop {
				m.to, m.pause = next.host, next.at.Sub(e.at)
				break
			}
		}
		out = append(out, m)
	}
	return out
}

func owned(held []int, hosts int) []int {
	c := make([]int, hosts)
	for _, h := range held {
		c[h]++
	}
	return c
}

// Issue 46: three hosts started with one command each spread 8
// partitions 3/3/2, with a standby each, and apply every event once; a
// fourth joins and partitions move to it by a hand-over while events
// flow; a host SIGTERMed hands its partitions over and exits 0, without
// a wait of AckWait. Every event is applied once throughout, and its
// effect (a webhook) sent once.
func TestGroupSpreadsJoinsAndLeaves(t *testing.T) {
	g := newGroupWorld(t, 8)
	g.dest = webhooktest.NewDestination(t, false)
	for range 3 {
		g.join()
	}
	held := g.settled(3*time.Minute, time.Time{}, 0, 1, 2)
	if c := owned(held, 3); slices.Max(c) != 3 || slices.Min(c) != 2 {
		t.Fatalf("three hosts own %v of 8 partitions, want 3/3/2", c)
	}
	evs := makeEvents(randFor(t), g.pub, 3000)
	g.publish(evs[:1000])
	g.checkOnce(held, evs[:1000])

	joined := time.Now()
	g.join()
	g.publish(evs[1000:2000])
	held = g.settled(3*time.Minute, joined, 0, 1, 2, 3)
	if c := owned(held, 4); slices.Max(c) != 2 || slices.Min(c) != 2 {
		t.Fatalf("four hosts own %v of 8 partitions, want 2 each", c)
	}
	for _, m := range g.moves(joined) {
		t.Logf("join: partition %d from host %d to host %d: paused %v", m.partition, m.from, m.to, m.pause.Round(time.Millisecond))
	}
	g.checkOnce(held, evs[:2000])

	leaver, left := held[0], time.Now()
	g.hosts[leaver].p.signal(syscall.SIGTERM)
	g.publish(evs[2000:])
	if code := g.hosts[leaver].p.wait(2 * time.Minute); code != 0 {
		t.Fatalf("the host SIGTERMed exited %d:\n%s", code, g.hosts[leaver].p.output())
	}
	var live []int
	for h := range 4 {
		if h != leaver {
			live = append(live, h)
		}
	}
	held = g.settled(3*time.Minute, left, live...)
	ackWait := 2300 * time.Millisecond // fastPlan's: 200ms + 1s + 300ms + 100 x 1ms... + 200ms, rounded up
	for _, m := range g.moves(left) {
		t.Logf("leave: partition %d from host %d to host %d: paused %v", m.partition, m.from, m.to, m.pause.Round(time.Millisecond))
		if m.pause > ackWait+5*time.Second {
			t.Errorf("partition %d was handed over in %v: longer than AckWait and 5s", m.partition, m.pause)
		}
	}
	g.checkOnce(held, evs)
	g.effectsOnce(evs)
	for _, h := range live {
		g.hosts[h].p.signal(syscall.SIGTERM)
	}
	for _, h := range live {
		if code := g.hosts[h].p.wait(2 * time.Minute); code != 0 {
			t.Errorf("host %d exited %d", h, code)
		}
	}
}

// takeOvers are, per partition, the time from at to its first take-over
// logged by any host after at.
func (g *groupWorld) takeOvers(at time.Time) map[int]time.Duration {
	out := map[int]time.Duration{}
	for _, host := range g.hosts {
		host.p.record(func(r map[string]any) bool {
			m, _ := r["msg"].(string)
			i, ok := r["partition"].(float64)
			t, err := time.Parse(time.RFC3339Nano, fmt.Sprint(r["time"]))
			if ok && err == nil && t.After(at) && strings.HasPrefix(m, "owning the partition") {
				if d, seen := out[int(i)]; !seen || t.Sub(at) < d {
					out[int(i)] = t.Sub(at)
				}
			}
			return false
		})
	}
	return out
}

// status runs `jetledger group status --json` and returns its slots and exit code.
func (g *groupWorld) status() (group.Status, int) {
	g.t.Helper()
	p := start(g.t, nil, "group", "status", "--nats", g.c.urls(), "--group", g.name, "--json")
	code := p.wait(time.Minute)
	var st group.Status
	out := p.output()
	if i := strings.Index(out, "{"); i >= 0 {
		_ = json.NewDecoder(strings.NewReader(out[i:])).Decode(&st)
	}
	return st, code
}

// Issue 46: a host SIGKILLed with its files deleted: its partitions are
// taken over within AckWait and 5 s, by their standbys; a new host in
// its place is seeded (standby copies from the snapshots) and the spread
// is restored; group status says owned throughout the end, and exit 1
// once every host has stopped. Every event is applied once.
func TestGroupTakesALostHostOverAndRestoresTheSpread(t *testing.T) {
	g := newGroupWorld(t, 6)
	for range 3 {
		g.join()
	}
	held := g.settled(3*time.Minute, time.Time{}, 0, 1, 2)
	evs := makeEvents(randFor(t), g.pub, 2000)
	g.publish(evs[:1000])
	g.checkOnce(held, evs[:1000])

	var lost []int
	for i, h := range held {
		if h == 0 {
			lost = append(lost, i)
		}
	}
	killed := time.Now()
	g.hosts[0].p.kill()
	if err := os.RemoveAll(g.hosts[0].dir); err != nil {
		t.Fatal(err)
	}
	g.publish(evs[1000:1500])
	g.settled(3*time.Minute, killed, 1, 2)
	ackWait := 2300 * time.Millisecond // fastPlan's 1.8s, and a margin for the 100 x 1ms of a batch
	var took map[int]time.Duration
	consumertest.Eventually(t, 2*time.Minute, "the lost host's partitions taken over", func() bool {
		took = g.takeOvers(killed)
		for _, i := range lost {
			if _, ok := took[i]; !ok {
				return false
			}
		}
		return true
	})
	for _, i := range lost {
		t.Logf("loss: partition %d taken over %v after the SIGKILL", i, took[i].Round(time.Millisecond))
		if took[i] > ackWait+5*time.Second {
			t.Errorf("partition %d taken over %v after the SIGKILL: want within AckWait and 5s", i, took[i])
		}
	}

	replaced := time.Now()
	g.join() // host 3: a new directory, the same command
	g.publish(evs[1500:])
	held = g.settled(3*time.Minute, replaced, 1, 2, 3)
	if c := owned(held, 4); c[1] != 2 || c[2] != 2 || c[3] != 2 {
		t.Fatalf("after the replacement hosts own %v of 6 partitions, want 2 each", c[1:])
	}
	g.checkOnce(held, evs)
	consumertest.Eventually(t, 2*time.Minute, "group status: every partition owned, each standby following", func() bool {
		st, code := g.status()
		return st.Stream == groupStream && g.ownedAndFollowed(st, code)
	})
	for _, h := range []int{1, 2, 3} {
		_, body := get(t, "http://"+g.hosts[h].metrics+"/metrics")
		if !strings.Contains(body, "jetledger_group_members 3") || !strings.Contains(body, "jetledger_group_partitions_without_owner 0") {
			t.Errorf("host %d's /metrics lacks 3 members and 0 partitions without an owner:\n%s", h, grepLines(body, "jetledger_group"))
		}
		if code := healthzWithin(g.hosts[h].metrics, 10*time.Second); code != 200 {
			t.Errorf("host %d's /healthz answered %d, want 200", h, code)
		}
	}
	for _, h := range []int{1, 2, 3} {
		g.hosts[h].p.signal(syscall.SIGTERM)
	}
	for _, h := range []int{1, 2, 3} {
		if code := g.hosts[h].p.wait(2 * time.Minute); code != 0 {
			t.Errorf("host %d exited %d", h, code)
		}
	}
	if _, code := g.status(); code != 1 {
		t.Errorf("group status with every host stopped exited %d, want 1 (partitions without an owner)", code)
	}
}

// epoch is the group's assignment epoch now.
func (g *groupWorld) epoch() uint64 {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, _, err := group.Read(ctx, g.c.js, g.name)
	if err != nil {
		g.t.Fatal(err)
	}
	return a.Epoch
}

// Issue 46: a host that joins and leaves 10 times in about a minute,
// each time for less than the damping (--group-stable-after), moves no partition: the
// assignment and the leases stay as they were. A second group on the same
// cluster and stream (its own durable) never sees the first's members,
// and each applies every event once.
func TestGroupFlappingMovesNothingAndTwoGroupsKeepApart(t *testing.T) {
	g := newGroupWorld(t, 4)
	g.stable = 15 * time.Second
	o := g.another("h", "other", 4)
	g.join()
	g.join()
	o.join()
	held := g.settled(3*time.Minute, time.Time{}, 0, 1)
	oheld := o.settled(3*time.Minute, time.Time{}, 0)
	before := g.epoch()
	evs := makeEvents(randFor(t), g.pub, 1000)
	g.publish(evs[:500])
	began := time.Now()
	for range 10 {
		f := g.join()
		// A member for 4s each time: 10 times in a minute, each short of
		// the damping's 15s.
		consumertest.Eventually(t, time.Minute, "the flapping host a member for 4s", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, members, err := group.Read(ctx, g.c.js, g.name)
			rec, ok := members[group.ID(g.memberOf(len(g.hosts)-1))]
			return err == nil && ok && rec.Up >= 4*time.Second
		})
		f.p.signal(syscall.SIGTERM)
		if code := f.p.wait(time.Minute); code != 0 {
			t.Fatalf("the flapping host exited %d:\n%s", code, f.p.output())
		}
	}
	t.Logf("10 joins and leaves in %v", time.Since(began).Round(time.Second))
	g.publish(evs[500:])
	if after := g.epoch(); after != before {
		t.Errorf("the flapping host moved the assignment from epoch %d to %d", before, after)
	}
	if now := g.holders(); !slices.Equal(now, held) {
		t.Errorf("the flapping host moved partitions: held by hosts %v, then %v", held, now)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if a, members, err := group.Read(ctx, g.c.js, o.name); err != nil || len(members) != 1 || len(a.Members) != 1 {
		t.Errorf("group %s: members %v, assigned %v (%v): want its own one", o.name, members, a.Members, err)
	}
	g.checkOnce(held, evs)
	o.checkOnce(oheld, evs)
}

// Issue 46, an admin's mistake: the group's bucket deleted under a running
// group. The members make it again, the coordinator writes the assignment
// again from what the members run, no partition moves, and every event is
// applied once.
func TestGroupRidesOutItsBucketDeleted(t *testing.T) {
	g := newGroupWorld(t, 4)
	g.join()
	g.join()
	held := g.settled(3*time.Minute, time.Time{}, 0, 1)
	evs := makeEvents(randFor(t), g.pub, 1000)
	g.publish(evs[:500])
	deleted := time.Now()
	consumertest.Eventually(t, time.Minute, "the bucket deleted", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := g.c.js.DeleteKeyValue(ctx, group.Bucket)
		return err == nil
	})
	g.publish(evs[500:])
	g.settled(3*time.Minute, deleted, 0, 1)
	if moved := g.moves(deleted); len(moved) > 0 || !slices.Equal(g.holders(), held) {
		t.Errorf("the bucket's deletion moved partitions: %+v; held by %v, then %v", moved, held, g.holders())
	}
	g.checkOnce(held, evs)
	consumertest.Eventually(t, time.Minute, "group status: every partition owned", func() bool {
		_, code := g.status()
		return code == 0
	})
}
