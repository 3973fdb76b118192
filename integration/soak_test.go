package integration

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/publisher"
	"github.com/nats-io/nats.go/jetstream"
)

// soakProfile sizes a soak. JETLEDGER_SOAK=long selects the long profile;
// JETLEDGER_SOAK_MESSAGES and JETLEDGER_SOAK_SEED override its size and seed;
// JETLEDGER_SOAK_LOOKUP=live gives the consumers under faults the lookup URL
// too (by default only the lookup phases at the end use it).
type soakProfile struct {
	Name                                      string
	Messages, Rate                            int
	ConsumerKills, BrokerKills, Pauses, Hangs int
	Seed                                      uint64
	LiveLookup                                bool
}

func soakProfileFromEnv(t testing.TB) soakProfile {
	p := soakProfile{Name: "short", Messages: 3000, Rate: 250, ConsumerKills: 6, BrokerKills: 2, Pauses: 1, Hangs: 1, Seed: 1}
	if os.Getenv("JETLEDGER_SOAK") == "long" {
		p = soakProfile{Name: "long", Messages: 40000, Rate: 100, ConsumerKills: 25, BrokerKills: 4, Pauses: 4, Hangs: 4, Seed: 1}
	}
	if v := os.Getenv("JETLEDGER_SOAK_MESSAGES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 100 {
			t.Fatalf("JETLEDGER_SOAK_MESSAGES=%q: want a number of at least 100", v)
		}
		p.Messages = n
	}
	if v := os.Getenv("JETLEDGER_SOAK_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("JETLEDGER_SOAK_SEED=%q: %v", v, err)
		}
		p.Seed = n
	}
	p.LiveLookup = os.Getenv("JETLEDGER_SOAK_LOOKUP") == "live"
	return p
}

var (
	natsServerOnce sync.Once
	natsServerBin  string
	natsServerErr  error
)

// natsServerBinary builds nats-server from the module, once per run.
func natsServerBinary(t testing.TB) string {
	t.Helper()
	natsServerOnce.Do(func() {
		natsServerBin = filepath.Join(filepath.Dir(binPath), "nats-server")
		out, err := exec.Command("go", "build", "-o", natsServerBin, "github.com/nats-io/nats-server/v2").CombinedOutput()
		if err != nil {
			natsServerErr = fmt.Errorf("build nats-server: %v\n%s", err, out)
		}
	})
	if natsServerErr != nil {
		t.Fatal(natsServerErr)
	}
	return natsServerBin
}

// freePort returns a loopback port free now, for a server started next.
// It is picked at random below the kernel's ephemeral range, and not
// handed out twice in this process: a port the kernel gave for ":0" is
// free again once closed, and another process (a test binary beside this
// one, an outgoing connection) could be given it before the server this
// port is for binds it. A cluster's node then failed on its route port,
// and its peers routed to another test's server there.
func freePort(t testing.TB) int {
	t.Helper()
	below := ephemeralLow()
	for range 1000 {
		p := 10000 + rand.IntN(below-10000)
		if _, given := portsGiven.LoadOrStore(p, true); given {
			continue
		}
		if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
			l.Close()
			return p
		}
	}
	t.Fatal("no free port below the ephemeral range after 1000 tries")
	return 0
}

var portsGiven sync.Map

// ephemeralLow is the first port of the kernel's ephemeral range (32768
// where it cannot be read, or where it leaves too few below it).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if f := strings.Fields(string(b)); err == nil && len(f) == 2 {
		if low, err := strconv.Atoi(f[0]); err == nil && low > 20000 {
			return low
		}
	}
	return 32768
}

// broker is a nats-server process that can be killed and restarted on the
// same port and store.
type broker struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	p    *proc
}

func (b *broker) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", b.port) }

// settled waits until run has acked every message and settled every
// outbox row, and returns the ledger opened read-only.
func (w *world) settled(timeout time.Duration) *sql.DB {
	w.t.Helper()
	w.waitDrained(timeout)
	db := w.ledgerDB()
	consumertest.Eventually(w.t, 2*time.Minute, "every outbox row sent or in review", func() bool {
		return count(w.t, db, `SELECT count(*) FROM outbox WHERE status NOT IN ('sent', 'review')`) == 0
	})
	return db
}

// drainAndStop is settled, then stops run.
func (w *world) drainAndStop(run *proc, timeout time.Duration) *sql.DB {
	w.t.Helper()
	db := w.settled(timeout)
	run.stop()
	if code := run.wait(time.Minute); code != 0 {
		w.t.Errorf("run exited %d", code)
	}
	return db
}

// publishes records what a publisher sent: acked by the stream, or not
// known (an error after which the message may or may not be stored).
type publishes struct {
	published, uncertain map[string]event
}

// publishPaced publishes evs one every interval until stop closes (nil:
// all of them); the record is complete once done closes.
func publishPaced(ctx context.Context, pub *publisher.Publisher, evs []event, every time.Duration, stop <-chan struct{}) (*publishes, <-chan struct{}) {
	p := &publishes{published: map[string]event{}, uncertain: map[string]event{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for _, e := range evs {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := pub.Publish(ctx, publisher.Message{Subject: subject, ID: e.ID, Data: e.data()}); err != nil {
				p.uncertain[e.ID] = e
			} else {
				p.published[e.ID] = e
			}
		}
	}()
	return p, done
}

// newBrokerWorld starts a nats-server process with the test's stream, and
// a world on it whose client and publisher ride out the server's restarts.
func newBrokerWorld(t *testing.T) (*broker, *world) {
	t.Helper()
	dir := t.TempDir()
	b := &broker{t: t, bin: natsServerBinary(t), dir: filepath.Join(dir, "nats"), port: freePort(t)}
	b.start()
	js := connectTo(t, b.url())
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: stream, Subjects: []string{"ev.>"}, Duplicates: 2 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	pub, err := publisher.New(js, publisher.Config{Attempts: 10, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, js: js, pub: pub, dir: dir, db: filepath.Join(dir, "ledger.db"), schema: filepath.Join(dir, "schema.sql")}
	if err := os.WriteFile(w.schema, []byte(balanceTable), 0o600); err != nil {
		t.Fatal(err)
	}
	return b, w
}

func (b *broker) start() {
	b.t.Helper()
	b.p = startBinary(b.t, b.bin, nil, "-js", "-sd", b.dir, "-a", "127.0.0.1", "-p", strconv.Itoa(b.port))
	consumertest.Eventually(b.t, 30*time.Second, "nats-server listening", func() bool {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", b.port), time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// soakReport is what the checker found.
type soakReport struct {
	Profile        soakProfile   `json:"profile"`
	Published      int           `json:"published"`        // acked by the stream
	Uncertain      int           `json:"uncertain"`        // publish gave up; may or may not be stored
	Applied        int           `json:"applied"`          // processed_messages rows
	Lost           int           `json:"lost"`             // published, never applied nor dead-lettered
	AppliedTwice   int           `json:"applied_twice"`    // balance off for an account
	SentTwice      int           `json:"sent_twice"`       // two items at the destination for one row or message
	Review         int           `json:"review"`           // ambiguous sends, waiting for a person
	ReviewWithItem int           `json:"review_with_item"` // of which the destination does hold the item
	Lookup         *lookupReport `json:"lookup,omitempty"`
	DeadLetters    int           `json:"dead_letters"`
	ConsumerKills  int           `json:"consumer_kills"`
	BrokerKills    int           `json:"broker_kills"`
	Pauses         int           `json:"pauses"`
	Hangs          int           `json:"hangs"`
	Seconds        float64       `json:"seconds"`
}

// The soak: a real nats-server process, the real jetledger binary with the
// balance handler and a webhook destination, and at random times SIGKILL of
// the consumer, SIGKILL and restart of nats-server, SIGSTOP/SIGCONT of the
// consumer past AckWait while a second consumer runs on the same durable
// and database, and a destination that hangs past the sink timeout. After a
// full drain the checker looks at every message; then run restarts on the
// rows left in review with lookups at the destination (settleByLookup), and
// the checker looks again.
func TestSoak(t *testing.T) {
	prof := soakProfileFromEnv(t)
	began := time.Now()
	rng := rand.New(rand.NewPCG(prof.Seed, 7))
	b, w := newBrokerWorld(t)
	ctx := context.Background()
	pub := w.pub
	dest := webhooktest.NewDestination(t, false)
	dest.SetDelay(time.Millisecond)
	startConsumer := func(extra ...string) *proc {
		args := append([]string{"run", "--nats", b.url(), "--db", w.db, "--stream", stream, "--schema", w.schema,
			"--apply", balanceApply, "--log-format", "json", "--batch", "50", "--max-deliver", "-1"},
			append(fastPlan, webhookArgs(dest, extra...)...)...)
		if prof.LiveLookup && len(extra) == 0 {
			args = append(args, "--webhook-lookup-url", dest.LookupURL())
		}
		return start(t, nil, args...)
	}
	primary := startConsumer()

	// Publish at the profile's rate, recording what the stream acked.
	evs := makeEvents(rng, pub, prof.Messages)
	pubs, pubDone := publishPaced(ctx, pub, evs, time.Second/time.Duration(prof.Rate), nil)

	// Faults, one at a time, in random order at random moments.
	var faults []string
	for kind, n := range map[string]int{"kill": prof.ConsumerKills, "broker": prof.BrokerKills, "pause": prof.Pauses, "hang": prof.Hangs} {
		for i := 0; i < n; i++ {
			faults = append(faults, kind)
		}
	}
	rng.Shuffle(len(faults), func(i, j int) { faults[i], faults[j] = faults[j], faults[i] })
	publishFor := time.Duration(prof.Messages) * time.Second / time.Duration(prof.Rate)
	gap := publishFor / time.Duration(len(faults)+1)
	rep := soakReport{Profile: prof}
	for _, f := range faults {
		// The moment of a fault is the experiment's variable, not synchronisation.
		time.Sleep(gap/2 + time.Duration(rng.Int64N(int64(gap))))
		switch f {
		case "kill":
			primary.kill()
			primary = startConsumer()
			rep.ConsumerKills++
		case "broker":
			b.p.kill()
			time.Sleep(time.Duration(200+rng.IntN(1000)) * time.Millisecond) // the broker stays down a while
			b.start()
			rep.BrokerKills++
		case "pause":
			// Stopped past its AckWait (1.75s): the server redelivers what it
			// holds to a second consumer on the same durable and database.
			primary.signal(syscall.SIGSTOP)
			second := startConsumer()
			time.Sleep(3 * time.Second)
			primary.signal(syscall.SIGCONT)
			time.Sleep(time.Second)
			second.signal(syscall.SIGTERM)
			// One run per durable (issue 42, item 8): the second may be
			// refused while the paused one's lease lasts, or take it over,
			// and then the resumed one stops; either way one consumes.
			if code := second.wait(time.Minute); code != 0 && !strings.Contains(second.output(), "another run consumes this durable") {
				t.Errorf("second consumer exited %d", code)
			}
			select {
			case <-primary.done:
				primary = startConsumer()
			default:
			}
			rep.Pauses++
		case "hang":
			dest.Hold() // past the 1s sink timeout
			time.Sleep(2500 * time.Millisecond)
			dest.Release()
			rep.Hangs++
		}
		t.Logf("fault %s at %s", f, time.Since(began).Round(time.Millisecond))
	}
	<-pubDone

	db := w.drainAndStop(primary, 5*time.Minute)
	checkSoak(t, db, dest, pubs.published, pubs.uncertain, &rep)
	rep.Lookup = settleByLookup(t, w, dest, db, startConsumer, pubs.published, pubs.uncertain)
	rep.Seconds = time.Since(began).Seconds()

	out, _ := json.MarshalIndent(rep, "", "  ")
	t.Logf("soak report:\n%s", out)
	if path := os.Getenv("JETLEDGER_SOAK_REPORT"); path != "" {
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Error(err)
		}
	}
	if rep.Lost != 0 || rep.AppliedTwice != 0 || rep.SentTwice != 0 {
		t.Fatalf("soak failed: %d lost, %d applied twice, %d sent twice", rep.Lost, rep.AppliedTwice, rep.SentTwice)
	}
	if l := rep.Lookup; l.Lost != 0 || l.AppliedTwice != 0 || l.SentTwice != 0 || l.DenyingChanged != 0 || l.ReviewAfter != l.Unanswered {
		t.Fatalf("lookup phases failed: %d lost, %d applied twice, %d sent twice, %d changed by a denying lookup, %d left in review of which %d unanswered",
			l.Lost, l.AppliedTwice, l.SentTwice, l.DenyingChanged, l.ReviewAfter, l.Unanswered)
	}
}

// checkSoak compares what was published with the ledger, the balances, the
// outbox and the destination (nil: a run without effects), message by
// message.
func checkSoak(t testing.TB, db *sql.DB, dest *webhooktest.Destination, published, uncertain map[string]event, rep *soakReport) {
	t.Helper()
	rep.Published, rep.Uncertain = len(published), len(uncertain)
	applied := map[string]bool{}
	rows, err := db.Query(`SELECT message_id FROM processed_messages`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		applied[id] = true
	}
	rows.Close()
	rep.Applied = len(applied)
	rep.DeadLetters = count(t, db, `SELECT count(*) FROM dead_letters`)
	for id := range published {
		if !applied[id] && count(t, db, `SELECT count(*) FROM dead_letters WHERE message_id = ?`, id) == 0 {
			rep.Lost++
			t.Errorf("lost: %s was published and acked by the stream but never applied", id)
		}
	}
	// Applied twice: each account's balance must be the sum of its applied events.
	want := map[string]int{}
	for id := range applied {
		e, ok := published[id]
		if !ok {
			e, ok = uncertain[id]
		}
		if !ok {
			t.Errorf("applied %s, which the test never published", id)
			continue
		}
		want[e.Account] += e.Amount
	}
	rows, err = db.Query(`SELECT account, amount FROM balances`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for rows.Next() {
		var acct string
		var amount int
		if err := rows.Scan(&acct, &amount); err != nil {
			t.Fatal(err)
		}
		got[acct] = amount
	}
	rows.Close()
	for acct, w := range want {
		if got[acct] != w {
			rep.AppliedTwice++
			t.Errorf("account %s: balance %d, applied events sum to %d", acct, got[acct], w)
		}
	}
	if dest == nil {
		return // a run without effects
	}
	// Sent twice: per outbox row and per message, at most one item; a sent
	// row's external id is the item's.
	byKey := map[string][]webhooktest.StoredItem{}
	perMessage := map[string]int{}
	for _, it := range dest.Items() {
		byKey[it.Key] = append(byKey[it.Key], it)
		perMessage[it.MessageID]++
	}
	for _, r := range outboxRows(t, db) {
		items := byKey[r.ID]
		switch {
		case len(items) > 1 || perMessage[r.MessageID] > 1:
			rep.SentTwice++
			t.Errorf("sent twice: row %s (message %s) has %d items", r.ID, r.MessageID, perMessage[r.MessageID])
		case r.Status == "sent" && (len(items) != 1 || items[0].ExternalID != r.ExternalID):
			rep.SentTwice++
			t.Errorf("row %s is sent as %q but the destination holds %+v", r.ID, r.ExternalID, items)
		case r.Status == "review":
			rep.Review++
			if len(items) == 1 {
				rep.ReviewWithItem++
			}
		}
	}
	if n := count(t, db, `SELECT count(*) FROM outbox`); n != rep.Applied {
		t.Errorf("outbox rows %d, applied messages %d: want one row per applied message", n, rep.Applied)
	}
}
