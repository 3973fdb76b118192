package node_test

import (
	"context"
	"encoding/json"
	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/ledger"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// docsConf is the nats-server configuration docs/security.md gives for an
// external server: its one conf block.
func docsConf(t *testing.T) string { return consumertest.ConfBlock(t, "../docs/security.md") }

// runServer runs nats-server with conf on a free port, JetStream in a
// temporary directory.
func runServer(t *testing.T, conf string) *server.Server {
	t.Helper()
	file := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(file)
	if err != nil {
		t.Fatal(err)
	}
	opts.Host, opts.Port, opts.JetStream, opts.StoreDir = "127.0.0.1", server.RANDOM_PORT, true, t.TempDir()
	opts.NoLog, opts.NoSigs = true, true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	return srv
}

// externalDoors is the docs' external server, its run's streams made by
// the user run, and a publisher connected as the user publisher.
func externalDoors(t *testing.T) *doorsWorld {
	t.Helper()
	t.Setenv("RUN_PASSWORD", "run-secret")
	t.Setenv("PUBLISHER_PASSWORD", "publisher-secret")
	t.Setenv("OPERATOR_PASSWORD", "operator-secret")
	t.Setenv("VIEWER_PASSWORD", "viewer-secret")
	srv := runServer(t, docsConf(t))
	own, err := jetstream.New(connect(t, srv.ClientURL(), nats.UserInfo("run", "run-secret")))
	if err != nil {
		t.Fatal(err)
	}
	w := &doorsWorld{srv: srv, own: own, stream: "ORDERS", prefix: "orders"}
	w.makeStreams(t)
	w.pub = connect(t, srv.ClientURL(), nats.UserInfo("publisher", "publisher-secret"))
	if w.pjs, err = jetstream.New(w.pub); err != nil {
		t.Fatal(err)
	}
	return w
}

// The configuration docs/security.md gives for an external server: the
// publisher publishes, gets its acks and finds its stream by subject; it
// writes none of the run's own subjects, directly or through a reply, and
// the API on their streams does not answer it; the run writes there.
// Not parallel: the configuration's passwords are environment variables.
func TestExternalServerConfigOfTheDocs(t *testing.T) {
	w := externalDoors(t)
	if name, err := w.pjs.StreamNameBySubject(t.Context(), "orders.1"); err != nil || name != "ORDERS" {
		t.Fatalf("the publisher's lookup of its stream: %q %v", name, err)
	}
	w.checkReplies(t)
	w.checkAPIReplies(t)
	w.checkDirect(t)
	w.checkAPI(t)
}

// Why publishers need an account of their own: nats-server checks no
// permission on a reply subject. A user in the run's account allowed to
// publish to the stream's subjects alone has its ack stored behind every
// door named as its reply. If this fails, nats-server has changed, and
// docs/security.md says more than it should.
func TestPermissionsDoNotCoverReplySubjects(t *testing.T) {
	t.Parallel()
	srv := runServer(t, `accounts: {
  LEDGER: {
    jetstream: enabled
    users: [
      {user: run, password: run-secret}
      {user: publisher, password: publisher-secret, permissions: {publish: "orders.>", subscribe: "_INBOX.>"}}
    ]
  }
}`)
	own, err := jetstream.New(connect(t, srv.ClientURL(), nats.UserInfo("run", "run-secret")))
	if err != nil {
		t.Fatal(err)
	}
	w := &doorsWorld{srv: srv, own: own, stream: "ORDERS", prefix: "orders"}
	w.makeStreams(t)
	w.pub = connect(t, srv.ClientURL(), nats.UserInfo("publisher", "publisher-secret"))
	if w.pjs, err = jetstream.New(w.pub); err != nil {
		t.Fatal(err)
	}
	for _, d := range runsDoors() {
		n := w.wroteBehind(t, d, func() {
			if err := w.pub.PublishMsg(&nats.Msg{Subject: "orders.attack", Reply: d.subject}); err != nil {
				t.Fatal(err)
			}
			w.settle(t)
		})
		if n != 1 {
			t.Errorf("%s: the publisher's ack with reply %s wrote %d messages in %s, want 1", d.name, d.subject, n, d.stream)
		}
	}
}

// Why the docs' configuration imports $JS.API.INFO into the publishers'
// account: without it nats-server imports its own JetStream API there as
// well, which answers the publisher's requests with "JetStream not enabled
// for account" beside the run's account's answer.
func TestExternalServerConfigNeedsTheInfoImport(t *testing.T) {
	t.Setenv("RUN_PASSWORD", "run-secret")
	t.Setenv("PUBLISHER_PASSWORD", "publisher-secret")
	t.Setenv("OPERATOR_PASSWORD", "operator-secret")
	t.Setenv("VIEWER_PASSWORD", "viewer-secret")
	conf := docsConf(t)
	line := `      {service: {account: LEDGER, subject: "$JS.API.INFO"}}` + "\n"
	if !strings.Contains(conf, line) {
		t.Fatalf("the docs' configuration has no line %q", line)
	}
	srv := runServer(t, strings.Replace(conf, line, "", 1))
	pub := connect(t, srv.ClientURL(), nats.UserInfo("publisher", "publisher-secret"))
	answers, err := pub.SubscribeSync("_INBOX.answers")
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.PublishRequest("$JS.API.STREAM.NAMES", "_INBOX.answers", nil); err != nil {
		t.Fatal(err)
	}
	notEnabled := false
	for range 2 {
		m, err := answers.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("answers to the publisher's stream names request: %v", err)
		}
		var resp struct {
			Error *jetstream.APIError `json:"error"`
		}
		if err := json.Unmarshal(m.Data, &resp); err != nil {
			t.Fatal(err)
		}
		notEnabled = notEnabled || resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeJetStreamNotEnabledForAccount
	}
	if !notEnabled {
		t.Error("no answer said JetStream is not enabled for the publishers' account")
	}
}

// The operators and viewers of the docs' configuration, in accounts of
// their own that import the admin API from the run's: a viewer reads and
// its action is not answered; an operator acts; neither has an answer of
// the API or of micro's discovery stored in a stream of the run's account
// by naming its subject as the reply (the answer goes back through the
// import, into their account). Not parallel: the passwords are
// environment variables.
func TestExternalServerConfigOfTheDocsForOperatorsAndViewers(t *testing.T) {
	for k, v := range map[string]string{"RUN_PASSWORD": "run-secret", "PUBLISHER_PASSWORD": "p", "OPERATOR_PASSWORD": "operator-secret", "VIEWER_PASSWORD": "viewer-secret"} {
		t.Setenv(k, v)
	}
	srvr := runServer(t, docsConf(t))
	own, err := jetstream.New(connect(t, srvr.ClientURL(), nats.UserInfo("run", "run-secret")))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	cl, err := own.CreateStream(ctx, jetstream.StreamConfig{Name: "CLX", Subjects: []string{"_JETLEDGER.changelog.x"}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.RecordDeadLetters(ctx, []ledger.DeadLetter{{MessageID: "d", Stream: "ORDERS", Sequence: 1, Subject: "orders.1", Reason: "bad", Deliveries: 5}}); err != nil {
		t.Fatal(err)
	}
	addr := admin.Address{Stream: "ORDERS", Durable: "run"}
	srv, err := admin.Serve(admin.Config{Conn: own.Conn(), Store: st, Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	call := func(nc *nats.Conn, endpoint string, req, resp any) error {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		return admin.Call(ctx, nc, addr, endpoint, req, resp)
	}
	viewer := connect(t, srvr.ClientURL(), nats.UserInfo("viewer", "viewer-secret"))
	operator := connect(t, srvr.ClientURL(), nats.UserInfo("operator", "operator-secret"))
	var dls admin.DeadLetters
	if err := call(viewer, "dlq.list", nil, &dls); err != nil || len(dls.DeadLetters) != 1 {
		t.Fatalf("a viewer's read: %v %+v", err, dls)
	}
	discard := admin.ByID{ID: dls.DeadLetters[0].ID, Who: "ops"}
	if err := call(viewer, "dlq.discard", discard, nil); err == nil {
		t.Fatal("a viewer discarded a dead letter")
	}
	for _, nc := range []*nats.Conn{viewer, operator} {
		for _, subject := range []string{addr.Subject("status"), "$SRV.INFO." + admin.ServiceName, "$SRV.PING"} {
			if err := nc.PublishMsg(&nats.Msg{Subject: subject, Reply: "_JETLEDGER.changelog.x"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := call(operator, "dlq.discard", discard, nil); err != nil {
		t.Fatalf("an operator's action: %v", err)
	}
	if info, err := cl.Info(ctx); err != nil || info.State.Msgs != 0 {
		t.Fatalf("the run's stream on _JETLEDGER.changelog.x holds %d messages after requests with it as the reply (%v), want 0", info.State.Msgs, err)
	}
}
