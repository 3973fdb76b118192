package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/publisher"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// slowBalanceApply is balanceApply made slow by counting to 20 000 per
// message, so that messages queue up at the edge.
const slowBalanceApply = `INSERT INTO balances (account, amount)
	SELECT json_extract(:data, '$.account'),
		json_extract(:data, '$.amount') + 0 * (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 20000) SELECT count(*) FROM c)
	WHERE true
	ON CONFLICT (account) DO UPDATE SET amount = amount + excluded.amount`

// hub is a nats-server process with JetStream in domain "hub" and a
// leaf-node port, restartable on the same ports and store.
type hub struct {
	t              testing.TB
	bin, conf      string
	port, leafPort int
	p              *proc
}

func startHub(t testing.TB) *hub {
	t.Helper()
	dir := t.TempDir()
	h := &hub{t: t, bin: natsServerBinary(t), conf: filepath.Join(dir, "hub.conf"), port: freePort(t), leafPort: freePort(t)}
	conf := fmt.Sprintf("server_name: hub\nlisten: 127.0.0.1:%d\njetstream { store_dir: %q, domain: hub }\nleafnodes { listen: 127.0.0.1:%d, no_advertise: true }\n",
		h.port, filepath.Join(dir, "store"), h.leafPort)
	if err := os.WriteFile(h.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	h.start()
	return h
}

func (h *hub) start() {
	h.t.Helper()
	h.p = startBinary(h.t, h.bin, nil, "-c", h.conf)
	consumertest.Eventually(h.t, 30*time.Second, "the hub listening", func() bool {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", h.port), time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// startHubWithOrders starts a hub with the stream ORDERS (orders.>, a
// 2-minute duplicate window), and returns it, a client of it and a
// publisher to it.
func startHubWithOrders(t testing.TB) (*hub, jetstream.JetStream, *publisher.Publisher) {
	t.Helper()
	h := startHub(t)
	hjs := connectTo(t, h.url())
	consumertest.CreateStream(t, hjs, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Duplicates: 2 * time.Minute})
	pub, err := publisher.New(hjs, publisher.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return h, hjs, pub
}

func (h *hub) url() string     { return fmt.Sprintf("nats://127.0.0.1:%d", h.port) }
func (h *hub) leafURL() string { return fmt.Sprintf("nats-leaf://127.0.0.1:%d", h.leafPort) }

// connectTo connects with reconnects forever: the servers of these tests
// are killed and restarted under it.
func connectTo(t testing.TB, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond), nats.RetryOnFailedConnect(true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func streamMsgs(t testing.TB, js jetstream.JetStream, name string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, name)
	if err != nil {
		return 0
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0
	}
	return info.State.Msgs
}

// publishAt publishes evs on subj through pub, each with its own id.
func publishAt(t testing.TB, pub *publisher.Publisher, subj string, evs []event) {
	t.Helper()
	msgs := make([]publisher.Message, len(evs))
	for i, e := range evs {
		msgs[i] = publisher.Message{Subject: subj, ID: e.ID, Data: e.data()}
	}
	if _, err := pub.PublishBatch(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
}

// The edge's embedded server is a leaf node of a hub; its stream sources
// the hub's. Messages published at the hub are applied at the edge exactly
// once across a hub outage longer than AckWait and than the edge stream's
// duplicate window, during which the edge goes on processing what it holds
// and run is killed and restarted while offline. Effects go upstream
// through the NATS sink to a local stream the hub sources, and each
// arrives at the hub once.
func TestEdgeLeafNodeKeepsWorkingOffline(t *testing.T) {
	rng := randFor(t)
	h, hjs, pub := startHubWithOrders(t)
	// The hub collects each site's effects by sourcing its OUT stream.
	consumertest.CreateStream(t, hjs, jetstream.StreamConfig{Name: "EFFECTS",
		Sources: []*jetstream.StreamSource{{Name: "OUT", Domain: "site1"}}})
	w := worldIn(t, t.TempDir())
	edgePort := freePort(t)
	ejs := connectTo(t, fmt.Sprintf("nats://127.0.0.1:%d", edgePort))
	const window = 2 * time.Second
	runEdge := func() *proc {
		args := append([]string{"run", "--db", w.db, "--listen", "127.0.0.1:" + strconv.Itoa(edgePort),
			"--hub-url", h.leafURL(), "--hub-stream", "ORDERS", "--hub-filter", "orders.site1.>", "--edge-domain", "site1",
			"--stream", "ORDERS_EDGE", "--duplicate-window", window.String(), "--sync-interval", "2m",
			"--effects-subject", "effects.site1", "--effects-stream", "OUT",
			"--schema", w.schema, "--apply", slowBalanceApply, "--batch", "20", "--log-format", "json"}, fastPlan...)
		return start(t, nil, args...)
	}

	site1A, site2 := makeEvents(rng, pub, 30), makeEvents(rng, pub, 10)
	publishAt(t, pub, "orders.site1.pay", site1A)
	publishAt(t, pub, "orders.site2.pay", site2) // another site's share: never sourced here
	run := runEdge()
	db := w.ledgerDB()
	applied := func(n int) func() bool {
		return func() bool { return count(t, db, `SELECT count(*) FROM processed_messages`) >= n }
	}
	consumertest.Eventually(t, time.Minute, "the first 30 applied at the edge", applied(30))

	// Messages the edge has sourced but not yet processed when the hub goes
	// (the handler is slow, so they queue up at the edge).
	site1B := makeEvents(rng, pub, 200)
	publishAt(t, pub, "orders.site1.pay", site1B)
	consumertest.Eventually(t, time.Minute, "230 messages sourced at the edge", func() bool { return streamMsgs(t, ejs, "ORDERS_EDGE") >= 230 })
	h.p.kill()
	cut := time.Now()
	atCut := count(t, db, `SELECT count(*) FROM processed_messages`)
	if atCut >= 230-20 {
		t.Fatalf("%d of 230 applied when the hub went: too few left to process offline; slow the handler down", atCut)
	}
	consumertest.Eventually(t, time.Minute, "20 more applied with the hub down", applied(atCut+20))
	// Killed and started again while the hub is down: starting must not
	// wait on the link either.
	run.kill()
	run = runEdge()
	consumertest.Eventually(t, 2*time.Minute, "the sourced 230 applied with the hub down", applied(230))
	// Keep the hub away past AckWait (1.7s) and the edge's duplicate
	// window: that is the fault under test, not a wait for an event.
	time.Sleep(time.Until(cut.Add(2 * window)))
	offline := count(t, db, `SELECT count(*) FROM processed_messages`) - atCut
	h.start()
	back := time.Now()
	t.Logf("hub down %s; %d of 230 applied at the cut, %d applied while it was down (run killed and restarted meanwhile)",
		back.Sub(cut).Round(time.Millisecond), atCut, offline)
	site1C := makeEvents(rng, pub, 30)
	publishAt(t, pub, "orders.site1.pay", site1C)
	all := append(append(append([]event{}, site1A...), site1B...), site1C...)
	consumertest.Eventually(t, 2*time.Minute, "all 260 applied at the edge", applied(260))
	t.Logf("the 30 published after the hub came back applied %s later", time.Since(back).Round(time.Millisecond))
	consumertest.Eventually(t, 2*time.Minute, "every effect sent", func() bool {
		return count(t, db, `SELECT count(*) FROM outbox WHERE status = 'sent'`) == 260
	})
	consumertest.Eventually(t, 2*time.Minute, "every effect at the hub", func() bool { return streamMsgs(t, hjs, "EFFECTS") >= 260 })
	t.Logf("every effect at the hub %s after it came back", time.Since(back).Round(time.Millisecond))
	if n := streamMsgs(t, ejs, "ORDERS_EDGE"); n != 260 {
		t.Errorf("the edge stream holds %d messages, want 260: sourcing repeated or lost some across the outage", n)
	}
	run.signal(syscall.SIGTERM)
	if code := run.wait(time.Minute); code != 0 {
		t.Fatalf("run exited %d", code)
	}
	w.checkExact(db, all)
	// What the ledger dedupes on is the publisher's Nats-Msg-Id, which
	// sourcing carries over: the ledger holds exactly the published ids.
	if got := count(t, db, `SELECT count(*) FROM processed_messages WHERE message_id IN (`+quotedIDs(all)+`)`); got != len(all) {
		t.Errorf("%d of the %d published ids are in the ledger", got, len(all))
	}
	checkEffectsAtHub(t, hjs, db)
}

func quotedIDs(evs []event) string {
	q := make([]string, len(evs))
	for i, e := range evs {
		q[i] = "'" + e.ID + "'"
	}
	return strings.Join(q, ", ")
}

// checkEffectsAtHub: the hub's EFFECTS stream holds each outbox row once,
// under its id, and nothing else.
func checkEffectsAtHub(t *testing.T, hjs jetstream.JetStream, db *sql.DB) {
	t.Helper()
	ctx := context.Background()
	s, err := hjs.Stream(ctx, "EFFECTS")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]int{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("EFFECTS message %d: %v", seq, err)
		}
		held[m.Header.Get(jetstream.MsgIDHeader)]++
	}
	rows, err := db.Query(`SELECT id FROM outbox`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		if held[id] != 1 {
			t.Errorf("outbox row %s is at the hub %d times, want once", id, held[id])
		}
		n++
	}
	if len(held) != n || info.State.Msgs != uint64(n) {
		t.Errorf("the hub holds %d effects under %d ids for %d outbox rows", info.State.Msgs, len(held), n)
	}
}

// The leaf connection takes the hub's TLS and a user and password, as the
// client connection does.
func TestEdgeLeafOverTLSWithPassword(t *testing.T) {
	dir := t.TempDir()
	caFile, tlsCfg := testTLS(t, dir)
	leafPort := freePort(t)
	srv := consumertest.RunServerWithOptions(t, &server.Options{JetStreamDomain: "hub",
		LeafNode: server.LeafNodeOpts{Host: "127.0.0.1", Port: leafPort, TLSConfig: tlsCfg, TLSTimeout: 5, Username: "leaf", Password: "s3cret"}})
	_, hjs := consumertest.Connect(t, srv)
	consumertest.CreateStream(t, hjs, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Duplicates: time.Minute})
	pub, err := publisher.New(hjs, publisher.Config{})
	if err != nil {
		t.Fatal(err)
	}
	evs := makeEvents(randFor(t), pub, 5)
	publishAt(t, pub, "orders.site1.pay", evs)
	w := worldIn(t, dir)
	leaf := fmt.Sprintf("nats-leaf://leaf:s3cret@127.0.0.1:%d", leafPort)
	run := start(t, nil, append([]string{"run", "--db", w.db, "--listen", "127.0.0.1:0", "--hub-url", leaf, "--hub-tls-ca", caFile,
		"--hub-stream", "ORDERS", "--edge-domain", "site1", "--stream", "ORDERS_EDGE",
		"--schema", w.schema, "--apply", balanceApply, "--log-format", "json"}, fastPlan...)...)
	db := w.ledgerDB()
	consumertest.Eventually(t, time.Minute, "5 applied at the edge", func() bool { return count(t, db, `SELECT count(*) FROM processed_messages`) == 5 })
	if strings.Contains(run.output(), "s3cret") {
		t.Error("run logged the hub's password")
	}
	run.signal(syscall.SIGTERM)
	if code := run.wait(time.Minute); code != 0 {
		t.Fatalf("run exited %d", code)
	}
	w.checkExact(db, evs)
}

// At an edge whose stream keeps fewer messages than the hub's, prune removes
// ledger rows whose messages the hub still holds. A stream created again,
// after an operator deleted it to change --hub-filter or with the embedded
// store lost while the ledger survived, sources the hub's stream again: it
// must start after what the ledger pruned, or those messages are applied a
// second time. Every event is applied once: the balances are exact and the
// ledger holds no other id.
func TestEdgeRecreatedStreamStartsAfterPruned(t *testing.T) {
	for _, tc := range []struct {
		name   string
		filter string                                                 // --hub-filter of the second run
		lose   func(t *testing.T, ejs jetstream.JetStream, db string) // what happens between the runs
	}{
		{"operator deletes the stream", "orders.site1.*", func(t *testing.T, ejs jetstream.JetStream, _ string) {
			// The edge's server fsyncs every write, and on a loaded host a
			// delete can outlast the client's default 5s API timeout: ask
			// again; a delete that went through answers not-found.
			consumertest.Eventually(t, time.Minute, "ORDERS_EDGE deleted", func() bool {
				ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
				defer cancel()
				err := ejs.DeleteStream(ctx, "ORDERS_EDGE")
				return err == nil || errors.Is(err, jetstream.ErrStreamNotFound)
			})
		}},
		{"store lost", "orders.site1.>", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rng := randFor(t)
			h, _, pub := startHubWithOrders(t)
			w := worldIn(t, t.TempDir())
			edgePort := freePort(t)
			ejs := connectTo(t, fmt.Sprintf("nats://127.0.0.1:%d", edgePort))
			// The edge keeps 5 messages, the hub all of them; prune runs
			// often and keeps rows a second.
			runEdge := func(filter string) *proc {
				return start(t, nil, append([]string{"run", "--db", w.db, "--listen", "127.0.0.1:" + strconv.Itoa(edgePort),
					"--hub-url", h.leafURL(), "--hub-stream", "ORDERS", "--hub-filter", filter, "--edge-domain", "site1",
					"--stream", "ORDERS_EDGE", "--duplicate-window", "1s", "--max-msgs", "5", "--retention", "1s", "--prune-interval", "100ms",
					"--schema", w.schema, "--apply", balanceApply, "--log-format", "json"}, fastPlan...)...)
			}
			run := runEdge("orders.site1.>")
			db := w.ledgerDB()
			first := makeEvents(rng, pub, 20)
			publishOneByOne(t, pub, db, first)
			consumertest.Eventually(t, time.Minute, "20 applied, and the 15 gone from the edge's stream pruned", func() bool {
				return count(t, db, `SELECT sum(amount) FROM balances`) == sum(first) && count(t, db, `SELECT count(*) FROM processed_messages`) == 5
			})
			if tc.lose != nil {
				tc.lose(t, ejs, w.db)
			}
			run.signal(syscall.SIGTERM)
			run.wait(time.Minute) // with its stream deleted under it, run may fail: it is restarted either way
			if tc.lose == nil {
				if err := os.RemoveAll(w.db + ".nats"); err != nil {
					t.Fatal(err)
				}
			}
			run = runEdge(tc.filter)
			second := makeEvents(rng, pub, 10)
			publishOneByOne(t, pub, db, second)
			run.signal(syscall.SIGTERM)
			if code := run.wait(time.Minute); code != 0 {
				t.Fatalf("run exited %d", code)
			}
			all := append(append([]event{}, first...), second...)
			want := map[string]int{}
			for _, e := range all {
				want[e.Account] += e.Amount
			}
			for acct, amount := range want {
				if got := count(t, db, `SELECT amount FROM balances WHERE account = ?`, acct); got != amount {
					t.Errorf("balance of %s = %d, want %d", acct, got, amount)
				}
			}
			if got, want := count(t, db, `SELECT sum(amount) FROM balances`), sum(all); got != want {
				t.Errorf("sum of balances = %d, want %d: %d applied twice", got, want, got-want)
			}
			if n := count(t, db, `SELECT count(*) FROM processed_messages WHERE message_id NOT IN (`+quotedIDs(all)+`)`); n != 0 {
				t.Errorf("the ledger holds %d ids that were never published", n)
			}
		})
	}
}

// publishOneByOne publishes each event at the hub once the one before is
// applied at the edge: the edge's stream of TestEdgeRecreatedStreamStartsAfterPruned
// keeps 5 messages, and a burst would push some out before they are applied.
func publishOneByOne(t *testing.T, pub *publisher.Publisher, db *sql.DB, evs []event) {
	t.Helper()
	for i := range evs {
		publishAt(t, pub, "orders.site1.pay", evs[i:i+1])
		consumertest.Eventually(t, time.Minute, "event "+strconv.Itoa(i)+" applied at the edge", func() bool {
			return count(t, db, `SELECT count(*) FROM processed_messages WHERE message_id = ?`, evs[i].ID) == 1
		})
	}
}
