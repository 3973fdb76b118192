package main

import (
	"github.com/jetledger/jetledger/natsconn"

	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/node"
	"github.com/jetledger/jetledger/service"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// A password in --nats (or $NATS_URL, or a context's url) is not logged on
// a reconnect (nc.ConnectedUrl() keeps the userinfo; the redacted one is
// logged).
func TestReconnectLogHidesThePassword(t *testing.T) {
	srv := consumertest.RunServerWithOptions(t, &server.Options{Username: "u", Password: "s3cretpw"})
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	url := strings.Replace(srv.ClientURL(), "nats://", "nats://u:s3cretpw@", 1)
	nc, _, err := connect(t.Context(), natsFlags{URL: url}, log)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := nc.ForceReconnect(); err != nil {
		t.Fatal(err)
	}
	consumertest.Eventually(t, 10*time.Second, "reconnected log", func() bool { return strings.Contains(logs.String(), "reconnected") })
	if strings.Contains(logs.String(), "s3cretpw") {
		t.Fatalf("the password is in the log:\n%s", logs.String())
	}
}

// nats.go takes a URL without a scheme ("u:pw@host:port"); parsed as it
// is, that is scheme "u" with an opaque part, so redactURL adds one.
func TestRedactURLWithoutScheme(t *testing.T) {
	for _, in := range []string{"u:s3cretpw@127.0.0.1:1", "nats://a:b@127.0.0.1:2,u:s3cretpw@127.0.0.1:1"} {
		if out := natsconn.RedactURL(in); strings.Contains(out, "s3cretpw") {
			t.Errorf("redactURL(%q) = %q", in, out)
		}
	}
	// And the error of a failed connect to such a URL, as run prints it.
	_, _, err := connect(t.Context(), natsFlags{URL: "u:s3cretpw@127.0.0.1:1"}, quiet)
	if err == nil || strings.Contains(err.Error(), "s3cretpw") {
		t.Errorf("connect error: %v", err)
	}
}

// A --hub-url that does not parse, or has no host, is refused without its
// password.
func TestHubURLUsageErrorHidesThePassword(t *testing.T) {
	for _, hub := range []string{"u:s3cretpw@hub.example:7422", "nats-leaf://u:s3cretpw@hub.example:7422/%zz"} {
		h := hubFlags{Hub: hub, HubStream: "H", HubDomain: "hub", Domain: "e1"}
		err := configUsage(service.Config{Node: node.Config{Leaf: h.leaf()}, Hub: h.hub(), Names: runNames}.CheckEdge())
		if err == nil {
			t.Errorf("%q accepted", hub)
			continue
		}
		if strings.Contains(err.Error(), "s3cretpw") {
			t.Errorf("usage error shows the password: %v", err)
		}
	}
}

// The ledger records PAY/payer only; given only --durable (a new one), the
// stream is the one the ledger serves, not the default EVENTS, another
// stream on the server.
func TestDurableAloneTakesTheRecordedStream(t *testing.T) {
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "PAY", Subjects: []string{"pay.>"}})
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "EVENTS", Subjects: []string{"other.>"}})
	db := recordConsumers(t, [2]string{"PAY", "payer"})
	code, out, errOut := runMain("status", "--db", db, "--nats", srv.ClientURL(), "--durable", "auditor", "--json")
	var st statusReport
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("exit %d %v\n%s%s", code, err, out, errOut)
	}
	if st.Serves != nil && st.Serves.Stream != "PAY" {
		t.Fatalf("--durable auditor with a ledger that records only PAY reads stream %s (from %s), exit %d", st.Serves.Stream, st.Serves.From, code)
	}
}

// The same with run: it must not create durable auditor on EVENTS and apply
// EVENTS' messages into a ledger that served PAY.
func TestRunDurableAloneConsumesTheRecordedStream(t *testing.T) {
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "PAY", Subjects: []string{"pay.>"}})
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "EVENTS", Subjects: []string{"other.>"}})
	publishEvents(t, js, "other.x", 2)
	db := recordConsumers(t, [2]string{"PAY", "payer"})
	run := startCommand(t, "run", "--nats", srv.ClientURL(), "--db", db, "--durable", "auditor", "--log-format", "json")
	consumertest.Eventually(t, 10*time.Second, "run to bind something", func() bool {
		_, err := js.Consumer(t.Context(), "EVENTS", "auditor")
		_, err2 := js.Consumer(t.Context(), "PAY", "auditor")
		return err == nil || err2 == nil
	})
	if _, err := js.Consumer(t.Context(), "EVENTS", "auditor"); err == nil {
		ackedThrough(t, js, "EVENTS", "auditor", 2)
		run.stop(t)
		t.Fatalf("run --durable auditor (ledger records only PAY/payer) created EVENTS/auditor and applied EVENTS' messages")
	}
}

// NATS_URL in the environment (a nats CLI user's shell) with edge mode is
// refused naming $NATS_URL, not only --nats, which was not given.
func TestNATSURLEnvWithHubURL(t *testing.T) {
	t.Setenv("NATS_URL", "nats://127.0.0.1:1")
	msg := usageMessage(t, "run", "--db", filepath.Join(t.TempDir(), "l.db"), "--hub-url", "nats-leaf://127.0.0.1:7422", "--hub-stream", "H", "--edge-domain", "e1", "--stream", "E")
	if !strings.Contains(msg, "$NATS_URL") {
		t.Errorf("the refusal does not say the server may come from $NATS_URL: %q", msg)
	}
}
