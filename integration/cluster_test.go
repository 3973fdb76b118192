package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/jsretry"
	"github.com/jetledger/jetledger/publisher"
	"github.com/nats-io/nats.go/jetstream"
)

// clusterProfile sizes the cluster tests. JETLEDGER_CLUSTER=long selects
// the long profile; the short one keeps the package's CI time.
type clusterProfile struct {
	Name string
	// StartRounds: how many times a run is started just after the stream
	// leader's SIGKILL (the failure of issue 14 was 4 starts in 5).
	StartRounds int
	// RideRounds: how many times a consuming run meets the SIGKILL of the
	// stream leader, then of the consumer leader.
	RideRounds int
	// Outage is how long a killed node stays down.
	Outage time.Duration
	// OwnerRounds: how many times each owned-partition fault (a paused
	// owner, one cut off, two started at once) is played, each on a
	// stream of its own; OwnerEvents: the events of each.
	OwnerRounds, OwnerEvents int
}

func clusterProfileFromEnv() clusterProfile {
	if os.Getenv("JETLEDGER_CLUSTER") == "long" {
		return clusterProfile{Name: "long", StartRounds: 10, RideRounds: 4, Outage: 5 * time.Second, OwnerRounds: 3, OwnerEvents: 4000}
	}
	return clusterProfile{Name: "short", StartRounds: 3, RideRounds: 1, Outage: 3 * time.Second, OwnerRounds: 1, OwnerEvents: 600}
}

// clusterNode is one nats-server process of a cluster, restartable on the
// same ports and store.
type clusterNode struct {
	name      string
	port      int
	routePort int
	conf      string
	p         *proc
}

// cluster is three nats-server processes on loopback, routed to each other,
// with JetStream on file storage; js is a client of all three that rides
// out their restarts.
type cluster struct {
	t     testing.TB
	bin   string
	nodes []*clusterNode
	js    jetstream.JetStream
}

// clusterName is the cluster's name; its nodes are n1, n2, n3.
const clusterName = "jetledger"

// startCluster starts the three nodes and waits until JetStream answers
// (a meta leader is elected).
func startCluster(t testing.TB) *cluster {
	t.Helper()
	dir := t.TempDir()
	c := &cluster{t: t, bin: natsServerBinary(t)}
	for i := range 3 {
		c.nodes = append(c.nodes, &clusterNode{name: fmt.Sprintf("n%d", i+1), port: freePort(t), routePort: freePort(t)})
	}
	routes := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", n.routePort)
	}
	for _, n := range c.nodes {
		n.conf = filepath.Join(dir, n.name+".conf")
		conf := fmt.Sprintf("server_name: %s\nlisten: 127.0.0.1:%d\njetstream { store_dir: %q }\ncluster { name: %s, listen: 127.0.0.1:%d, routes: [%s] }\n",
			n.name, n.port, filepath.Join(dir, n.name), clusterName, n.routePort, strings.Join(routes, ", "))
		if err := os.WriteFile(n.conf, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for i := range c.nodes {
		c.start(i)
	}
	c.js = connectTo(t, c.urls())
	consumertest.Eventually(t, time.Minute, "the cluster's JetStream to answer (a meta leader)", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := c.js.AccountInfo(ctx)
		return err == nil
	})
	return c
}

// start starts node i (again) on its ports and store.
func (c *cluster) start(i int) {
	c.t.Helper()
	n := c.nodes[i]
	n.p = startBinary(c.t, c.bin, nil, "-c", n.conf)
	consumertest.Eventually(c.t, 30*time.Second, n.name+" listening", func() bool {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", n.port), time.Second)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
}

// kill SIGKILLs node i: no goodbye to its peers, no leader hand-over.
func (c *cluster) kill(i int) { c.nodes[i].p.kill() }

// restart starts node i again after kill, on the same ports and store.
func (c *cluster) restart(i int) { c.start(i) }

// url is node i's client URL.
func (c *cluster) url(i int) string { return fmt.Sprintf("nats://127.0.0.1:%d", c.nodes[i].port) }

// urls lists the client URLs of all three, as --nats takes them.
func (c *cluster) urls() string {
	us := make([]string, len(c.nodes))
	for i := range c.nodes {
		us[i] = c.url(i)
	}
	return strings.Join(us, ",")
}

// node is the index of the node named name, or -1.
func (c *cluster) node(name string) int {
	for i, n := range c.nodes {
		if n.name == name {
			return i
		}
	}
	return -1
}

// leaderOf is the index of the node that leads stream now, or -1 while it
// has none (or nobody answers).
func (c *cluster) leaderOf(stream string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := c.js.Stream(ctx, stream)
	if err != nil || s.CachedInfo().Cluster == nil {
		return -1
	}
	return c.node(s.CachedInfo().Cluster.Leader)
}

// consumerLeaderOf is the index of the node that leads the durable now, or -1.
func (c *cluster) consumerLeaderOf(stream, durable string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cons, err := c.js.Consumer(ctx, stream, durable)
	if err != nil || cons.CachedInfo().Cluster == nil {
		return -1
	}
	return c.node(cons.CachedInfo().Cluster.Leader)
}

// separateLeaders moves the durable's leader off the stream leader's node,
// so that a kill takes one of them.
func (c *cluster) separateLeaders(stream, durable string) {
	c.t.Helper()
	c.placeLeaders(stream, durable, false)
}

// placeLeaders moves the durable's leader (asking it to step down) until
// it is on the stream leader's node (together) or on another one, so that
// a kill takes one leader or both.
func (c *cluster) placeLeaders(stream, durable string, together bool) {
	c.t.Helper()
	consumertest.Eventually(c.t, time.Minute, fmt.Sprintf("the stream and the consumer led from the same node: %v", together), func() bool {
		sl, cl := c.leaderOf(stream), c.consumerLeaderOf(stream, durable)
		if sl < 0 || cl < 0 {
			return false
		}
		if (sl == cl) == together {
			return true
		}
		// The new leader is picked among the other replicas: this repeats
		// until it lands where wanted.
		c.js.Conn().Request(fmt.Sprintf("$JS.API.CONSUMER.LEADER.STEPDOWN.%s.%s", stream, durable), nil, 2*time.Second) //nolint:errcheck // the next look tells
		c.waitHealthy(time.Minute, stream, durable)
		return false
	})
}

// drained says whether every one of durables of stream has nothing
// pending or unacknowledged.
func (c *cluster) drained(stream string, durables ...string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, d := range durables {
		cons, err := c.js.Consumer(ctx, stream, d)
		if err != nil {
			return false
		}
		if info := cons.CachedInfo(); info.NumPending != 0 || info.NumAckPending != 0 {
			return false
		}
	}
	return true
}

// replicated reports a group with a leader and every other replica current.
func replicated(ci *jetstream.ClusterInfo, size int) bool {
	if ci == nil || ci.Leader == "" || len(ci.Replicas) != size-1 {
		return false
	}
	for _, r := range ci.Replicas {
		if !r.Current || r.Offline {
			return false
		}
	}
	return true
}

// waitHealthy waits until stream has a leader and 3 current replicas, and
// so has each of durables: a test's next fault starts from a whole cluster.
func (c *cluster) waitHealthy(timeout time.Duration, stream string, durables ...string) {
	c.t.Helper()
	consumertest.Eventually(c.t, timeout, fmt.Sprintf("stream %s and durables %v with a leader and 3 current replicas", stream, durables), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s, err := c.js.Stream(ctx, stream)
		if err != nil || !replicated(s.CachedInfo().Cluster, len(c.nodes)) {
			return false
		}
		for _, d := range durables {
			cons, err := c.js.Consumer(ctx, stream, d)
			if err != nil || !replicated(cons.CachedInfo().Cluster, len(c.nodes)) {
				return false
			}
		}
		return true
	})
}

// newWorld creates the test's stream with 3 replicas, and a world on it
// whose client and publisher ride out the nodes' restarts and elections.
func (c *cluster) newWorld(t testing.TB) *world {
	t.Helper()
	cfg := jetstream.StreamConfig{Name: stream, Subjects: []string{"ev.>"}, Duplicates: 2 * time.Minute, Replicas: len(c.nodes), Storage: jetstream.FileStorage}
	consumertest.Eventually(t, time.Minute, "the stream created", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		// A try whose answer was lost may have made it.
		_, err := c.js.CreateStream(ctx, cfg)
		return err == nil || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse)
	})
	c.waitHealthy(time.Minute, stream)
	pub, err := publisher.New(c.js, publisher.Config{Attempts: 10, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	w := &world{t: t, js: c.js, pub: pub, dir: dir, db: filepath.Join(dir, "ledger.db"), schema: filepath.Join(dir, "schema.sql")}
	if err := os.WriteFile(w.schema, []byte(balanceTable), 0o600); err != nil {
		t.Fatal(err)
	}
	return w
}

// runArgs is `jetledger run` on the cluster, with the URLs of all three.
func (c *cluster) runArgs(w *world, extra ...string) []string {
	args := append([]string{"run", "--nats", c.urls(), "--db", w.db, "--stream", stream,
		"--schema", w.schema, "--apply", balanceApply, "--log-format", "json"}, fastPlan...)
	return append(args, extra...)
}

// waitDrained waits until the durable has acked every message of the
// stream, asking whichever node answers, and fails at once if run exits.
func (c *cluster) waitDrained(run *proc, timeout time.Duration) {
	c.t.Helper()
	consumertest.Eventually(c.t, timeout, "the durable acked every message", func() bool {
		select {
		case <-run.done:
			c.t.Fatalf("run exited while the cluster recovered:\n%s", run.output())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s, err := c.js.Stream(ctx, stream)
		if err != nil {
			return false
		}
		cons, err := c.js.Consumer(ctx, stream, "jetledger")
		if err != nil {
			return false
		}
		info := cons.CachedInfo()
		return info.AckFloor.Stream >= s.CachedInfo().State.LastSeq && info.NumAckPending == 0 && info.NumPending == 0
	})
}

// healthzWithin is healthz with a client timeout: 0 when nothing answers.
func healthzWithin(addr string, timeout time.Duration) int {
	c := http.Client{Timeout: timeout}
	resp, err := c.Get("http://" + addr + "/healthz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waits returns run's log records of a JetStream call waited for (warn)
// and of one answered after a wait (info).
func waits(run *proc) (waiting, answered []map[string]any) {
	run.record(func(r map[string]any) bool {
		if _, ok := r[jsretry.KeyWaitingFor]; ok {
			waiting = append(waiting, r)
		}
		if _, ok := r[jsretry.KeyAnswered]; ok {
			answered = append(answered, r)
		}
		return false // every record
	})
	return waiting, answered
}

// logDuration reads a duration from a JSON log record ("19.1s").
func logDuration(v any) time.Duration {
	s, _ := v.(string)
	d, _ := time.ParseDuration(s)
	return d.Round(time.Millisecond)
}

// A run started while the stream has no leader (its leader's node and one
// other SIGKILLed, so no election can end until one is back) waits for the
// cluster, saying so, and then consumes once a node is back and a leader is
// elected while it waits: every message applied once. Repeated, with the
// durable created during the first election and looked up during the
// others, since the failure was 4 starts in 5. Issue 14. Two nodes go down,
// not one: with one, a start slowed by load met an election already over,
// and the test failed without a fault (issue 19).
func TestRunStartsWhileStreamHasNoLeader(t *testing.T) {
	t.Parallel()
	prof := clusterProfileFromEnv()
	c := startCluster(t)
	w := c.newWorld(t)
	rng := randFor(t)
	var all []event
	var db *sql.DB
	for round := 1; round <= prof.StartRounds; round++ {
		var durables []string
		if round > 1 {
			durables = []string{"jetledger"}
		}
		c.waitHealthy(time.Minute, stream, durables...)
		evs := makeEvents(rng, w.pub, 50)
		w.publish(evs)
		all = append(all, evs...)
		leader := c.leaderOf(stream)
		if leader < 0 {
			t.Fatal("the stream has no leader after waitHealthy")
		}
		metrics := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		killed := time.Now()
		other := (leader + 1) % len(c.nodes)
		c.kill(leader)
		c.kill(other)
		run := start(t, nil, c.runArgs(w, "--metrics", metrics)...)
		// Down until run says it waits (however slow its start), and at
		// least the profile's outage; /healthz is asked meanwhile (0: no
		// answer within a second).
		codes := map[int]int{}
		consumertest.Eventually(t, 2*time.Minute, "run to say it waits for the cluster", func() bool {
			select {
			case <-run.done:
				t.Fatalf("round %d: run exited while the cluster had no quorum:\n%s", round, run.output())
			default:
			}
			codes[healthzWithin(metrics, time.Second)]++
			waiting, _ := waits(run)
			return len(waiting) > 0 && time.Since(killed) >= prof.Outage
		})
		// One node back: the two elect a leader while run waits.
		c.restart(other)
		c.waitDrained(run, 2*time.Minute)
		c.restart(leader)
		drained := time.Since(killed)
		run.stop()
		if code := run.wait(30 * time.Second); code != 0 {
			t.Fatalf("round %d: run exited %d, want 0:\n%s", round, code, run.output())
		}
		if db == nil {
			db = w.ledgerDB()
		}
		w.checkExact(db, all)
		// The run's first request meets the old leader's peers still
		// following it (an election starts seconds after the last
		// heartbeat): a start that did not wait did not meet the outage.
		waiting, answered := waits(run)
		if len(waiting) == 0 || len(answered) == 0 {
			t.Fatalf("round %d: run logged %d waits and %d answers after a wait, want both:\n%s", round, len(waiting), len(answered), run.output())
		}
		var calls []string
		for _, a := range answered {
			calls = append(calls, fmt.Sprintf("%v after %v tries in %s", a[jsretry.KeyAnswered], a[jsretry.KeyTries], logDuration(a[jsretry.KeyWaited])))
		}
		t.Logf("round %d: killed %s (the stream leader) and another for %s or more; run waited for %d calls %v (%d warnings); /healthz while starting: %v; drained %s after the kill",
			round, c.nodes[leader].name, prof.Outage, len(answered), calls, len(waiting), codes, drained.Round(100*time.Millisecond))
	}
}

// A consuming run rides out the SIGKILL (and the restart) of the stream
// leader's node, then of the consumer leader's (and in the long profile of
// a node leading both), while messages keep coming: fetches fail while the
// consumer has no leader and are retried, nothing is lost or applied
// twice, run never exits. /healthz is polled through each outage and what
// it says is logged.
func TestRunRidesOutLeaderLoss(t *testing.T) {
	t.Parallel()
	prof := clusterProfileFromEnv()
	c := startCluster(t)
	w := c.newWorld(t)
	rng := randFor(t)
	metrics := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	run := start(t, nil, c.runArgs(w, "--metrics", metrics)...)
	consumertest.Eventually(t, time.Minute, "run healthy", func() bool { return healthz(metrics) == http.StatusOK })
	c.waitHealthy(time.Minute, stream, "jetledger")
	db := w.ledgerDB()

	kinds := []string{"stream", "consumer"}
	if prof.Name == "long" {
		kinds = append(kinds, "stream and consumer")
	}
	// More than the faults take to publish: messages keep coming until
	// the last fault is over, which "applying again" waits on.
	evs := makeEvents(rng, w.pub, 1000*len(kinds)*prof.RideRounds)
	stop := make(chan struct{})
	pubs, pubDone := publishPaced(context.Background(), w.pub, evs, 15*time.Millisecond, stop)
	for round := 1; round <= prof.RideRounds; round++ {
		for _, which := range kinds {
			// Apart, so that a kill takes one leader: the stream's alone
			// (the consumer's keeps serving fetches), then the consumer's
			// alone; in the long profile both at once as well.
			c.placeLeaders(stream, "jetledger", which == "stream and consumer")
			victim := c.leaderOf(stream)
			if which == "consumer" {
				victim = c.consumerLeaderOf(stream, "jetledger")
			}
			applied := count(t, db, `SELECT count(*) FROM processed_messages`)
			killed := time.Now()
			c.kill(victim)
			// Poll /healthz through the outage: the node's downtime is the
			// experiment's variable.
			codes := map[int]int{}
			for time.Since(killed) < prof.Outage {
				codes[healthz(metrics)]++
				time.Sleep(100 * time.Millisecond) // poll interval
			}
			c.restart(victim)
			var back time.Duration
			consumertest.Eventually(t, time.Minute, "run applying again", func() bool {
				select {
				case <-run.done:
					t.Fatalf("run exited on the %s leader's loss:\n%s", which, run.output())
				default:
				}
				back = time.Since(killed)
				return count(t, db, `SELECT count(*) FROM processed_messages`) > applied+20
			})
			c.waitHealthy(time.Minute, stream, "jetledger")
			t.Logf("round %d: killed %s, the %s leader, for %s: /healthz answered %v during the outage; applying again %s after the kill",
				round, c.nodes[victim].name, which, prof.Outage, codes, back.Round(100*time.Millisecond))
		}
	}
	close(stop)
	<-pubDone
	// A publish that gave up may or may not be stored: again with its id,
	// a no-op if it was, so the stream holds each event once.
	var sent []event
	for _, e := range evs {
		if _, ok := pubs.uncertain[e.ID]; ok {
			w.publish([]event{e})
		}
		_, p := pubs.published[e.ID]
		_, u := pubs.uncertain[e.ID]
		if p || u {
			sent = append(sent, e)
		}
	}
	c.waitDrained(run, 2*time.Minute)
	// Healthy again, within a margin: a restarted node's catch-up may move
	// the consumer's leader once more, and a probe's round then fails.
	consumertest.Eventually(t, time.Minute, "/healthz 200 after the cluster recovered", func() bool {
		return healthz(metrics) == http.StatusOK
	})
	run.stop()
	if code := run.wait(30 * time.Second); code != 0 {
		t.Fatalf("run exited %d, want 0", code)
	}
	w.checkExact(db, sent)
	totals := run.stopped()
	fetchWarnings := 0
	run.record(func(r map[string]any) bool {
		if _, ok := r["durable"]; ok && r["level"] == "WARN" && r["err"] != nil {
			fetchWarnings++
		}
		return false
	})
	t.Logf("%d published (%d uncertain, sent again); run: %d fetch warnings, applied %.0f, duplicates %.0f, batches %.0f",
		len(sent), len(pubs.uncertain), fetchWarnings, totals["applied"], totals["duplicates"], totals["batches"])
}

// A run started while the cluster has lost its quorum (two nodes of three
// SIGKILLed) for longer than any start-up bound waits for it, however long,
// creates its durable once the nodes are back, and consumes every message
// once. Long profile only: the outage is 40s.
func TestRunWaitsOutALostQuorum(t *testing.T) {
	prof := clusterProfileFromEnv()
	if prof.Name != "long" {
		t.Skip("a 40s outage: JETLEDGER_CLUSTER=long")
	}
	t.Parallel()
	const outage = 40 * time.Second
	c := startCluster(t)
	w := c.newWorld(t)
	evs := makeEvents(randFor(t), w.pub, 100)
	w.publish(evs)
	leader := c.leaderOf(stream)
	if leader < 0 {
		t.Fatal("the stream has no leader after newWorld")
	}
	other := (leader + 1) % len(c.nodes)
	killed := time.Now()
	c.kill(leader)
	c.kill(other)
	run := start(t, nil, c.runArgs(w)...)
	for time.Since(killed) < outage {
		select {
		case <-run.done:
			t.Fatalf("run exited %s into the outage:\n%s", time.Since(killed).Round(time.Second), run.output())
		case <-time.After(100 * time.Millisecond): // poll interval: the outage's length is the experiment's variable
		}
	}
	c.restart(leader)
	c.restart(other)
	c.waitDrained(run, 2*time.Minute)
	drained := time.Since(killed)
	run.stop()
	if code := run.wait(30 * time.Second); code != 0 {
		t.Fatalf("run exited %d, want 0", code)
	}
	w.checkExact(w.ledgerDB(), evs)
	_, answered := waits(run)
	for _, a := range answered {
		t.Logf("run waited for %v: %v tries in %s", a[jsretry.KeyAnswered], a[jsretry.KeyTries], logDuration(a[jsretry.KeyWaited]))
	}
	t.Logf("%s and %s down for %s; drained %s after the kill", c.nodes[leader].name, c.nodes[other].name, outage, drained.Round(100*time.Millisecond))
}
