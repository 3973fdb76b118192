package integration

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/publisher"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
	_ "modernc.org/sqlite"
)

// binPath is the jetledger binary under test, built by TestMain with the
// fault-injection points compiled in.
var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "jetledger-bin-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "jetledger")
	build := exec.Command("go", "build", "-tags", "jetledger_faults", "-o", binPath, "github.com/jetledger/jetledger/cmd/jetledger")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building jetledger:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	// In-process servers, consumers and the processes' watchers end with
	// their tests; a goroutine left over is a leak.
	if err := goleak.Find(); code == 0 && err != nil {
		fmt.Fprintln(os.Stderr, "goroutines left after the tests:", err)
		code = 1
	}
	os.Exit(code)
}

const (
	stream       = "EV"
	subject      = "ev.pay"
	balanceTable = `CREATE TABLE IF NOT EXISTS balances (account TEXT PRIMARY KEY, amount INTEGER NOT NULL);`
	balanceApply = `INSERT INTO balances (account, amount)
		VALUES (json_extract(:data, '$.account'), json_extract(:data, '$.amount'))
		ON CONFLICT (account) DO UPDATE SET amount = amount + excluded.amount`
)

// fastPlan makes AckWait about 1.7s so redeliveries after a kill come soon.
var fastPlan = []string{"--deadline", "1s", "--buffer-wait", "200ms", "--commit-margin", "300ms", "--ack-margin", "200ms"}

// world is one test's NATS server, stream, and ledger path.
type world struct {
	t      testing.TB
	srv    *server.Server
	js     jetstream.JetStream
	pub    *publisher.Publisher
	dir    string
	db     string
	schema string
}

func newWorld(t testing.TB, dupWindow time.Duration) *world {
	t.Helper()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: stream, Subjects: []string{"ev.>"}, Duplicates: dupWindow})
	pub, err := publisher.New(js, publisher.Config{})
	if err != nil {
		t.Fatal(err)
	}
	w := worldIn(t, t.TempDir())
	w.srv, w.js, w.pub = srv, js, pub
	return w
}

// worldIn is a world whose ledger and balance schema are in dir, with no
// server: a test that starts its own sets srv, js and pub as it needs.
func worldIn(t testing.TB, dir string) *world {
	t.Helper()
	schema := filepath.Join(dir, "schema.sql")
	if err := os.WriteFile(schema, []byte(balanceTable), 0o600); err != nil {
		t.Fatal(err)
	}
	return &world{t: t, dir: dir, db: filepath.Join(dir, "ledger.db"), schema: schema}
}

// event is one payment published by a test.
type event struct {
	ID      string
	Account string
	Amount  int
}

func (e event) data() []byte {
	return []byte(fmt.Sprintf(`{"account":%q,"amount":%d}`, e.Account, e.Amount))
}

func makeEvents(rng *rand.Rand, pub *publisher.Publisher, n int) []event {
	evs := make([]event, n)
	for i := range evs {
		evs[i] = event{ID: pub.NewID(), Account: fmt.Sprintf("acct-%d", rng.IntN(20)), Amount: 1 + rng.IntN(1000)}
	}
	return evs
}

// randFor seeds a generator from the test's name, so a failure replays.
func randFor(t testing.TB) *rand.Rand {
	var seed uint64
	for _, c := range t.Name() {
		seed = seed*31 + uint64(c)
	}
	return rand.New(rand.NewPCG(seed, 42))
}

func sum(evs []event) int {
	s := 0
	for _, e := range evs {
		s += e.Amount
	}
	return s
}

func (w *world) publish(evs []event) []publisher.Ack {
	w.t.Helper()
	msgs := make([]publisher.Message, len(evs))
	for i, e := range evs {
		msgs[i] = publisher.Message{Subject: subject, ID: e.ID, Data: e.data()}
	}
	acks, err := w.pub.PublishBatch(context.Background(), msgs)
	if err != nil {
		w.t.Fatal(err)
	}
	return acks
}

// proc is a running jetledger process.
type proc struct {
	t      testing.TB
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	mu     *sync.Mutex
	done   chan struct{}
	err    error
}

type lockedBuffer struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (l lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// testEnviron is this process's environment without the nats CLI's
// variables and with a config home of its own: a developer's own setup (a
// selected context, NATS_URL) must not reach the processes under test.
func testEnviron() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NATS_") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			env = append(env, kv)
		}
	}
	return append(env, "XDG_CONFIG_HOME="+filepath.Join(os.TempDir(), "jetledger-no-nats-config"))
}

// start runs the binary with args and extra environment.
func start(t testing.TB, env []string, args ...string) *proc {
	t.Helper()
	return startIn(t, nil, env, args...)
}

// startIn is start with stdin as the process's standard input.
func startIn(t testing.TB, stdin []byte, env []string, args ...string) *proc {
	t.Helper()
	return startCmd(t, binPath, stdin, env, args...)
}

// startBinary runs another program (nats-server) the same way.
func startBinary(t testing.TB, bin string, env []string, args ...string) *proc {
	t.Helper()
	return startCmd(t, bin, nil, env, args...)
}

func startCmd(t testing.TB, bin string, stdin []byte, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(testEnviron(), env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	p := &proc{t: t, cmd: cmd, stderr: &bytes.Buffer{}, mu: &sync.Mutex{}, done: make(chan struct{})}
	cmd.Stdout = lockedBuffer{p.mu, p.stderr}
	cmd.Stderr = lockedBuffer{p.mu, p.stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("jetledger %s output:\n%s", strings.Join(args, " "), p.output())
		}
	})
	return p
}

// runConsumer starts `jetledger run` against the world's server and ledger.
func (w *world) runConsumer(env []string, extra ...string) *proc {
	w.t.Helper()
	args := append([]string{"run", "--nats", w.srv.ClientURL(), "--db", w.db, "--stream", stream,
		"--schema", w.schema, "--apply", balanceApply, "--log-format", "json"}, fastPlan...)
	return start(w.t, env, append(args, extra...)...)
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

func (p *proc) signal(sig syscall.Signal) {
	_ = p.cmd.Process.Signal(sig) // it may have exited already
}

func (p *proc) kill() {
	p.signal(syscall.SIGKILL)
	<-p.done
}

// wait returns the exit code; -1 means killed by a signal.
func (p *proc) wait(timeout time.Duration) int {
	p.t.Helper()
	// An exited process is taken first: with a timeout of 0 both cases
	// would be ready, and select picks at random.
	select {
	case <-p.done:
	default:
		select {
		case <-p.done:
		case <-time.After(timeout):
			p.t.Fatalf("jetledger did not exit within %s", timeout)
		}
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		p.t.Fatal(p.err)
	}
	return 0
}

// record returns the first JSON log record of the process that match
// accepts: tests look at a record's fields, not its wording.
func (p *proc) record(match func(map[string]any) bool) (map[string]any, bool) {
	sc := bufio.NewScanner(strings.NewReader(p.output()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) == nil && match(rec) {
			return rec, true
		}
	}
	return nil, false
}

// stopped returns the totals the binary logged when it stopped cleanly: the
// record that carries the batch and applied counts.
func (p *proc) stopped() map[string]float64 {
	p.t.Helper()
	rec, ok := p.record(func(r map[string]any) bool {
		_, b := r["batches"].(float64)
		_, a := r["applied"].(float64)
		return a && b
	})
	if !ok {
		p.t.Fatalf("no totals in the output:\n%s", p.output())
	}
	out := map[string]float64{}
	for k, v := range rec {
		if f, ok := v.(float64); ok {
			out[k] = f
		}
	}
	return out
}

// ledgerDB opens the ledger read-only alongside the running binary.
func (w *world) ledgerDB() *sql.DB {
	w.t.Helper()
	consumertest.Eventually(w.t, 10*time.Second, "ledger file", func() bool {
		_, err := os.Stat(w.db)
		return err == nil
	})
	db, err := sql.Open("sqlite", w.db+"?_pragma=busy_timeout(10000)&_pragma=query_only(ON)")
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { db.Close() })
	// The built-in handler creates its events table after the ledger's and
	// the --schema tables: once it is there, every table a test counts is.
	consumertest.Eventually(w.t, 10*time.Second, "the ledger's tables", func() bool {
		var n int
		return db.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'events'`).Scan(&n) == nil && n == 1
	})
	return db
}

// count runs a counting query.
func count(t testing.TB, db *sql.DB, q string, args ...any) int {
	t.Helper()
	var n sql.NullInt64
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return int(n.Int64)
}

func (w *world) consumerInfo() *jetstream.ConsumerInfo {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := w.js.Consumer(ctx, stream, "jetledger")
	if err != nil {
		w.t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	return info
}

// finish waits for p to drain the stream, stops it with SIGTERM and checks
// that it exits 0: how every run that should end cleanly ends.
func (w *world) finish(p *proc, timeout time.Duration) {
	w.t.Helper()
	w.waitDrained(timeout)
	p.stop()
	if code := p.wait(30 * time.Second); code != 0 {
		w.t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}
}

// stop sends SIGTERM once the process is past its start: until main has
// installed its handler, SIGTERM's default action kills a process, which
// says nothing about jetledger. Any output means it is past that point.
func (p *proc) stop() {
	p.t.Helper()
	consumertest.Eventually(p.t, 30*time.Second, "the process to start", func() bool { return p.output() != "" })
	p.signal(syscall.SIGTERM)
}

// waitDrained waits until the consumer has acked or terminated every message.
func (w *world) waitDrained(timeout time.Duration) {
	w.t.Helper()
	ctx := context.Background()
	st, err := w.js.Stream(ctx, stream)
	if err != nil {
		w.t.Fatal(err)
	}
	si, err := st.Info(ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	last := si.State.LastSeq
	consumertest.Eventually(w.t, timeout, fmt.Sprintf("consumer acked through seq %d", last), func() bool {
		c, err := w.js.Consumer(ctx, stream, "jetledger")
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		return err == nil && info.AckFloor.Stream >= last && info.NumAckPending == 0 && info.NumPending == 0
	})
}

// checkExact asserts the balances sum to the distinct events and the ledger
// has exactly one row per distinct id.
func (w *world) checkExact(db *sql.DB, evs []event) {
	w.t.Helper()
	if got, want := count(w.t, db, `SELECT sum(amount) FROM balances`), sum(evs); got != want {
		w.t.Fatalf("sum of balances = %d, want %d (difference %d)", got, want, got-want)
	}
	if got := count(w.t, db, `SELECT count(*) FROM processed_messages`); got != len(evs) {
		w.t.Fatalf("processed_messages rows = %d, want %d", got, len(evs))
	}
	if count(w.t, db, `SELECT count(*) FROM sqlite_master WHERE name = 'events'`) == 0 {
		return // an in-process handler without the built-in events table
	}
	if got := count(w.t, db, `SELECT count(*) FROM events`); got != len(evs) {
		w.t.Fatalf("events rows = %d, want %d", got, len(evs))
	}
}
