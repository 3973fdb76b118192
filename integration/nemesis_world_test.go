package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
	"github.com/jetledger/jetledger/integration/lazyfs"
	"github.com/jetledger/jetledger/publisher"
	"github.com/nats-io/nats.go/jetstream"
)

// nemDupWindow is the stream's duplicate window in the nemesis: short, so
// that "past the window" and a prune's horizon come within a schedule.
const (
	nemDupWindow   = 300 * time.Millisecond
	nemRetention   = "300ms"
	nemDrainBudget = 2 * time.Minute
)

// nemTB runs one schedule under the real test without failing it: a
// schedule's failure is a result the shrinker compares, not the test's end.
// Fatal ends the schedule's goroutine (as testing's does), cleanups run when
// the schedule ends, and logs are kept for a failing schedule's report.
type nemTB struct {
	testing.TB
	mu       sync.Mutex
	failures []string
	logs     []string
	cleanups []func()
	dir      string
	dirs     int
}

func (s *nemTB) fail(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, msg)
}

func (s *nemTB) Helper()                        {}
func (s *nemTB) Error(args ...any)              { s.fail(fmt.Sprint(args...)) }
func (s *nemTB) Errorf(format string, a ...any) { s.fail(fmt.Sprintf(format, a...)) }
func (s *nemTB) Fatal(args ...any)              { s.fail("fatal: " + fmt.Sprint(args...)); runtime.Goexit() }
func (s *nemTB) Fatalf(format string, a ...any) {
	s.fail("fatal: " + fmt.Sprintf(format, a...))
	runtime.Goexit()
}
func (s *nemTB) Fail()                         { s.fail("failed") }
func (s *nemTB) FailNow()                      { s.fail("failed"); runtime.Goexit() }
func (s *nemTB) Skip(args ...any)              { s.Fatal(args...) }
func (s *nemTB) Skipf(format string, a ...any) { s.Fatalf(format, a...) }
func (s *nemTB) SkipNow()                      { s.FailNow() }
func (s *nemTB) Log(args ...any)               { s.Logf("%s", fmt.Sprint(args...)) }
func (s *nemTB) Cleanup(f func())              { s.mu.Lock(); s.cleanups = append(s.cleanups, f); s.mu.Unlock() }
func (s *nemTB) Failed() bool                  { s.mu.Lock(); defer s.mu.Unlock(); return len(s.failures) > 0 }
func (s *nemTB) Logf(format string, args ...any) {
	s.mu.Lock()
	s.logs = append(s.logs, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

func (s *nemTB) TempDir() string {
	s.mu.Lock()
	s.dirs++
	n := s.dirs
	s.mu.Unlock()
	d := filepath.Join(s.dir, fmt.Sprintf("t%d", n))
	if err := os.MkdirAll(d, 0o700); err != nil {
		s.Fatal(err)
	}
	return d
}

// runCleanups runs the cleanups, last first, as testing does.
func (s *nemTB) runCleanups() {
	for i := len(s.cleanups) - 1; i >= 0; i-- {
		s.cleanups[i]()
	}
	s.cleanups = nil
}

// nemStats counts what schedules did.
type nemStats struct {
	Schedules int            `json:"schedules"`
	Steps     int            `json:"steps"`
	Kinds     map[string]int `json:"kinds"`     // steps run, by kind
	Refused   map[string]int `json:"refused"`   // operator actions refused as the README says (exit 1)
	NoTarget  map[string]int `json:"no_target"` // actions with nothing to act on (no dead letter, no review row)
	Published int            `json:"published"` // publishes acked by the stream (duplicates included)
	Uncertain int            `json:"uncertain"`
	Applied   int            `json:"applied"`
	Gone      int            `json:"gone"` // not applied, legitimately (purged, discarded)
	Conflicts int            `json:"conflicts"`
	DeadLet   int            `json:"dead_letters"`
	Review    int            `json:"review"`
	Seconds   float64        `json:"seconds"`
}

func newNemStats() *nemStats {
	return &nemStats{Kinds: map[string]int{}, Refused: map[string]int{}, NoTarget: map[string]int{}}
}

func (s *nemStats) add(o *nemStats) {
	s.Schedules += o.Schedules
	s.Steps += o.Steps
	for k, v := range o.Kinds {
		s.Kinds[k] += v
	}
	for k, v := range o.Refused {
		s.Refused[k] += v
	}
	for k, v := range o.NoTarget {
		s.NoTarget[k] += v
	}
	s.Published += o.Published
	s.Uncertain += o.Uncertain
	s.Applied += o.Applied
	s.Gone += o.Gone
	s.Conflicts += o.Conflicts
	s.DeadLet += o.DeadLet
	s.Review += o.Review
	s.Seconds += o.Seconds
}

// nemWorld is one schedule's world: a topology, the destination, run, and
// the model of what the schedule did that the checker judges by.
type nemWorld struct {
	t        *nemTB
	topo     string
	rng      *rand.Rand
	dir      string
	db       string
	schema   string
	dest     *webhooktest.Destination
	b        *broker // external
	port     int     // embedded: run's listen port
	js       jetstream.JetStream
	pubJS    jetstream.JetStream // where traffic is published: js, or a topology's (the edge's hub)
	subject  string              // traffic's subject
	pub      *publisher.Publisher
	run      *proc
	down     bool
	batch    string
	deadline time.Duration
	m        *nemModel
	stats    *nemStats
	// proxy is between run and the server (external): the network faults.
	proxy *faultProxy
	// clockFile holds the offset of run's ledger clock (the clock step).
	clockFile string
	// fs serves the ledger's and the embedded store's disk (powercut).
	fs           *lazyfs.Served
	backing, mnt string
	edge         *nemEdge // the edge topology's hub, link and stream bookkeeping
}

func (w *nemWorld) url() string { return nemTopologies[w.topo].url(w) }

func (w *nemWorld) runArgs(db string) []string {
	args := []string{"run", "--db", db, "--stream", stream, "--schema", w.schema, "--apply", balanceApply,
		"--log-format", "json", "--batch", w.batch, "--deadline", w.deadline.String(), "--buffer-wait", "200ms",
		"--commit-margin", "300ms", "--ack-margin", "200ms", "--max-deliver", "-1", "--prune-interval", "0"}
	if f := nemTopologies[w.topo].sinkArgs; f != nil {
		args = append(args, f(w)...)
	} else {
		args = append(args, webhookArgs(w.dest)...)
	}
	if nemTopologies[w.topo].idempotent {
		args = append(args, "--webhook-idempotent")
	}
	return append(args, nemTopologies[w.topo].runArgs(w, db)...)
}

// items is what the destination of run's effects holds.
func (w *nemWorld) items() []webhooktest.StoredItem {
	if f := nemTopologies[w.topo].items; f != nil {
		return f(w)
	}
	return w.dest.Items()
}

// ledgers are the ledger files run writes: w.db, or a topology's (one per
// partition).
func (w *nemWorld) ledgers() []string {
	if f := nemTopologies[w.topo].ledgers; f != nil {
		return f(w)
	}
	return []string{w.db}
}

// nemExternalSteps are the steps a run beside its own nats-server process
// can take: the embedded topology's run is its server.
var nemExternalSteps = []nemWeight{{nemPause, 2, nil}, {nemBroker, 3, nil}, {nemStop, 3, nil},
	{nemStart, 2, nil}, {nemHandover, 2, nil}, {nemNet, 4, between(0, 2)}}

// nemPart is a ledger and the durable that feeds it.
type nemPart struct{ db, durable string }

// parts are every ledger run writes with its durable: w.db and "jetledger",
// or a topology's (one per partition).
func (w *nemWorld) parts() []nemPart {
	if f := nemTopologies[w.topo].parts; f != nil {
		return f(w)
	}
	return []nemPart{{w.db, "jetledger"}}
}

// subjectOf is the subject an account's events are published on.
func (w *nemWorld) subjectOf(account string) string {
	if f := nemTopologies[w.topo].subject; f != nil {
		return f(w, account)
	}
	return w.subject
}

func init() {
	nemTopologies[topoEmbedded] = &nemTopology{
		setup: func(w *nemWorld) {
			w.port = freePort(w.t)
			w.startRun(nil)
			w.js = connectTo(w.t, w.url())
		},
		url: func(w *nemWorld) string { return fmt.Sprintf("nats://127.0.0.1:%d", w.port) },
		runArgs: func(w *nemWorld, _ string) []string {
			return []string{"--listen", fmt.Sprintf("127.0.0.1:%d", w.port), "--subjects", "ev.>", "--duplicate-window", nemDupWindow.String()}
		},
	}
	nemTopologies[topoExternal] = &nemTopology{
		setup: func(w *nemWorld) {
			w.b = &broker{t: w.t, bin: natsServerBinary(w.t), dir: filepath.Join(w.dir, "nats"), port: freePort(w.t)}
			w.b.start()
			w.proxy = newFaultProxy(w.t, fmt.Sprintf("127.0.0.1:%d", w.b.port))
			w.js = connectTo(w.t, w.b.url())
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := w.js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{"ev.>"}, Duplicates: nemDupWindow}); err != nil {
				w.t.Fatal(err)
			}
			w.startRun(nil)
		},
		url: func(w *nemWorld) string { return w.b.url() },
		// run reaches the server through the proxy (the net step's
		// faults); operators and the publisher go to it directly.
		runArgs: func(w *nemWorld, _ string) []string { return []string{"--nats", w.proxy.URL()} },
		extra:   nemExternalSteps,
	}
}

// ackWait is run's AckWait under the current deadline (fastPlan's margins).
func (w *nemWorld) ackWait() time.Duration { return w.deadline + 700*time.Millisecond }

func newNemWorld(t *nemTB, topo string, seed uint64) *nemWorld {
	dir := t.TempDir()
	w := &nemWorld{t: t, topo: topo, rng: rand.New(rand.NewPCG(seed, 20)), dir: dir, db: filepath.Join(dir, "ledger.db"),
		schema: filepath.Join(dir, "schema.sql"), clockFile: filepath.Join(dir, "clock"), subject: subject, batch: "50", deadline: time.Second, m: newNemModel(), stats: newNemStats()}
	if err := os.WriteFile(w.schema, []byte(balanceTable), 0o600); err != nil {
		t.Fatal(err)
	}
	topology := nemTopologies[topo]
	if topology == nil {
		t.Fatalf("unknown topology %q", topo)
	}
	w.dest = webhooktest.NewDestination(t, topology.idempotent)
	topology.setup(w)
	consumertest.Eventually(t, 30*time.Second, "the stream", func() bool { _, err := w.streamInfo(); return err == nil })
	w.waitFetching(w.run)
	if w.pubJS == nil {
		w.pubJS = w.js
	}
	pub, err := publisher.New(w.pubJS, publisher.Config{Attempts: 10, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	w.pub = pub
	return w
}

// startRun starts run and waits until it is fetching (its pull request is
// waiting at the durable) or has exited (a fault point), so a fault that
// follows meets a running consumer, not one still connecting.
func (w *nemWorld) startRun(env []string) {
	w.run = start(w.t, w.runEnv(env), w.runArgs(w.db)...)
	w.down = false
	w.waitFetching(w.run)
}

// runEnv is the environment of a run process: env, and the ledger clock
// the clock step moves.
func (w *nemWorld) runEnv(env []string) []string {
	return append(append([]string{}, env...), "JETLEDGER_FAULT_CLOCK_FILE="+w.clockFile)
}

func (w *nemWorld) waitFetching(p *proc) {
	if w.js == nil {
		return // the embedded server is starting with run; the world waits for the stream
	}
	consumertest.Eventually(w.t, time.Minute, "run fetching", func() bool {
		select {
		case <-p.done:
			return true
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		for _, part := range w.parts() {
			c, err := w.js.Consumer(ctx, stream, part.durable)
			if err != nil {
				return false
			}
			if ci, err := c.Info(ctx); err != nil || ci.NumWaiting == 0 {
				return false
			}
		}
		return true
	})
}

// stopRun stops run with SIGTERM: it must exit 0.
func (w *nemWorld) stopRun() {
	if w.down {
		return
	}
	w.run.stop()
	if code := w.run.wait(time.Minute); code != 0 {
		w.t.Errorf("run exited %d after SIGTERM, want 0", code)
	}
	w.down = true
}

func (w *nemWorld) up() {
	if w.down {
		w.startRun(nil)
	}
}

// settle brings the model's stream sequences up to date (a topology whose
// stream run consumes is not the one publishes are acked by maps them);
// called before anything compares them with the stream's.
func (w *nemWorld) settle() {
	if f := nemTopologies[w.topo].settle; f != nil {
		f(w)
	}
}

func (w *nemWorld) streamInfo() (*jetstream.StreamInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := w.js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	return s.Info(ctx)
}

// stream reads the stream's state, riding out a server restarting.
func (w *nemWorld) stream() jetstream.StreamState {
	var st jetstream.StreamState
	consumertest.Eventually(w.t, 30*time.Second, "stream info", func() bool {
		info, err := w.streamInfo()
		if err == nil {
			st = info.State
		}
		return err == nil
	})
	return st
}

// durable reads one of run's durables, riding out a server restarting.
func (w *nemWorld) durable(name string) *jetstream.ConsumerInfo {
	var ci *jetstream.ConsumerInfo
	consumertest.Eventually(w.t, 30*time.Second, "consumer info", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := w.js.Consumer(ctx, stream, name)
		if err != nil {
			return false
		}
		ci, err = c.Info(ctx)
		return err == nil
	})
	return ci
}

// lastOf is the last sequence the stream holds on a durable's filter (a
// partition's), 0 when it holds none there; the stream's last without one.
func (w *nemWorld) lastOf(st jetstream.StreamState, ci *jetstream.ConsumerInfo) uint64 {
	filter := ci.Config.FilterSubject
	if len(ci.Config.FilterSubjects) == 1 {
		filter = ci.Config.FilterSubjects[0]
	}
	if filter == "" {
		return st.LastSeq
	}
	var last uint64
	consumertest.Eventually(w.t, 30*time.Second, "the last message on "+filter, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := w.js.Stream(ctx, stream)
		if err != nil {
			return false
		}
		m, err := s.GetLastMsgForSubject(ctx, filter)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			last = 0
			return true
		}
		if err == nil {
			last = m.Sequence
		}
		return err == nil
	})
	return last
}

// openLedger opens a ledger file read-only.
func (w *nemWorld) openLedger(path string) *sql.DB {
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_pragma=query_only(ON)")
	if err != nil {
		w.t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	return db
}

// query runs f on each ledger (w.ledgers) once its tables are there.
func (w *nemWorld) query(f func(path string, db *sql.DB)) {
	for _, path := range w.ledgers() {
		consumertest.Eventually(w.t, 30*time.Second, "the ledger's tables", func() bool {
			if _, err := os.Stat(path); err != nil {
				return false
			}
			db := w.openLedger(path)
			defer db.Close()
			var n int
			return db.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN ('events', 'balances')`).Scan(&n) == nil && n == 2
		})
		db := w.openLedger(path)
		f(path, db)
		db.Close()
	}
}

func (w *nemWorld) ids(db *sql.DB, q string, args ...any) map[string]bool {
	rows, err := db.Query(q, args...)
	if err != nil {
		w.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			w.t.Fatal(err)
		}
		out[id] = true
	}
	return out
}

// cli runs a jetledger command to its end and returns its exit code and output.
// Operators run on the host whose clock the clock step moves: they read
// the same ledger clock as run.
func (w *nemWorld) cli(args ...string) (int, string) {
	p := start(w.t, w.runEnv(nil), args...)
	code := p.wait(2 * time.Minute)
	return code, p.output()
}

// operator runs an operator action and checks its exit code: 0, or 1 when
// the README documents a refusal for it (recorded); anything else is a
// finding.
func (w *nemWorld) operator(kind nemKind, refusable bool, args ...string) bool {
	code, out := w.cli(args...)
	switch {
	case code == 0:
		return true
	case code == 1 && refusable:
		w.stats.Refused[string(kind)]++
		w.t.Logf("%s refused (exit 1): %s", kind, lastLine(out))
		return false
	default:
		w.m.violate("%s: jetledger %s exited %d: %s", kind, strings.Join(args[:min(2, len(args))], " "), code, lastLine(out))
		return false
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndex(s, "\n"); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 400 {
		s = s[:400]
	}
	return s
}

// publishEvent publishes e once (the publisher retries with its id) and
// records the answer.
func (w *nemWorld) publishEvent(e event, data []byte) (publisher.Ack, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	ack, err := w.pub.Publish(ctx, publisher.Message{Subject: w.subjectOf(e.Account), ID: e.ID, Data: data})
	if err != nil {
		w.m.unsure(e, data)
		w.stats.Uncertain++
		return ack, false
	}
	w.stats.Published++
	return ack, true
}

func (w *nemWorld) fresh(n int) []event {
	evs := makeEvents(w.rng, w.pub, n)
	for _, e := range evs {
		w.m.fresh(e)
	}
	return evs
}

func (w *nemWorld) publishFresh(n int) {
	for _, e := range w.fresh(n) {
		if ack, ok := w.publishEvent(e, e.data()); ok {
			w.m.ack(e.ID, ack)
		}
	}
}

// publishFreshAsync publishes n fresh events, paced, while a fault happens.
func (w *nemWorld) publishFreshAsync(n int) <-chan struct{} { return w.publishAsync(w.fresh(n)) }

// publishAsync publishes events the model has as fresh, paced.
func (w *nemWorld) publishAsync(evs []event) <-chan struct{} {
	type res struct {
		e   event
		ack publisher.Ack
		err error
	}
	done := make(chan struct{})
	results := make(chan res, len(evs))
	go func() {
		defer close(results)
		for _, e := range evs {
			ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
			ack, err := w.pub.Publish(ctx, publisher.Message{Subject: w.subjectOf(e.Account), ID: e.ID, Data: e.data()})
			cancel()
			results <- res{e, ack, err}
			time.Sleep(5 * time.Millisecond) // pacing: the experiment's rate, not synchronisation
		}
	}()
	go func() {
		defer close(done)
		for r := range results {
			w.m.mu.Lock()
			if r.err != nil {
				w.m.uncertainLocked(r.e, r.e.data())
				w.stats.Uncertain++
			} else {
				w.m.ackedLocked(r.e.ID, r.ack)
				w.stats.Published++
			}
			w.m.mu.Unlock()
		}
	}()
	return done
}

// drain brings run up and waits until it has handled every message and
// settled every outbox row; then stops it.
func (w *nemWorld) drain() {
	w.up()
	w.settle()
	st := w.stream()
	deadline := time.Now().Add(nemDrainBudget)
	for {
		var open int
		w.query(func(_ string, db *sql.DB) {
			open += count(w.t, db, `SELECT count(*) FROM outbox WHERE status IN ('queued', 'sending')`)
		})
		settled := open == 0
		var status []string
		for _, part := range w.parts() {
			ci := w.durable(part.durable)
			last := w.lastOf(st, ci)
			// A purge leaves the ack floor where it was: what it took was
			// never delivered, so past the last delivered there is nothing.
			handled := ci.AckFloor.Stream >= last || st.Msgs == 0 || ci.Delivered.Stream >= last
			settled = settled && handled && ci.NumAckPending == 0 && ci.NumPending == 0
			status = append(status, fmt.Sprintf("%s: ack floor %d of %d, %d pending, %d waiting for ack",
				part.durable, ci.AckFloor.Stream, last, ci.NumPending, ci.NumAckPending))
		}
		if settled {
			break
		}
		if time.Now().After(deadline) {
			w.m.violate("drain: after %s, %s, %d outbox rows queued or sending", nemDrainBudget, strings.Join(status, "; "), open)
			break
		}
		time.Sleep(100 * time.Millisecond) // polling a condition with a deadline
	}
	w.stopRun()
}

// snapshot reads what the ledger holds now, for the model's bookkeeping.
type nemSnapshot struct {
	applied   map[string]bool
	deadIDs   map[string]bool
	deadSeqs  map[uint64]bool
	conflicts map[uint64]bool
}

func (w *nemWorld) snapshot() nemSnapshot {
	s := nemSnapshot{applied: map[string]bool{}, deadIDs: map[string]bool{}, deadSeqs: map[uint64]bool{}, conflicts: map[uint64]bool{}}
	w.query(func(_ string, db *sql.DB) {
		maps.Copy(s.applied, w.ids(db, `SELECT message_id FROM processed_messages`))
		maps.Copy(s.deadIDs, w.ids(db, `SELECT message_id FROM dead_letters WHERE message_id != ''`))
		for q, m := range map[string]map[uint64]bool{`SELECT stream_seq FROM dead_letters`: s.deadSeqs, `SELECT stream_seq FROM conflicts`: s.conflicts} {
			for seq := range w.ids(db, q) {
				var n uint64
				fmt.Sscan(seq, &n)
				m[n] = true
			}
		}
	})
	return s
}
