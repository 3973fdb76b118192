package stream_test

import (
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

var quiet = slog.New(slog.DiscardHandler)

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startHub starts a test's hub: a server in JetStream domain "hub" that
// takes leaf connections. It returns the server, a JetStream client of it
// and the URL an edge joins it by.
func startHub(t *testing.T) (*server.Server, jetstream.JetStream, *url.URL) {
	t.Helper()
	leafPort := freeTCPPort(t)
	hub := consumertest.RunServerWithOptions(t, &server.Options{JetStreamDomain: "hub", ServerName: "hub",
		LeafNode: server.LeafNodeOpts{Host: "127.0.0.1", Port: leafPort}})
	_, js := consumertest.Connect(t, hub)
	u, _ := url.Parse(fmt.Sprintf("nats-leaf://127.0.0.1:%d", leafPort))
	return hub, js, u
}

// startLeaf starts an edge as run's embedded server is one: a leaf of the
// hub at hubURL, in its own JetStream domain. It returns a JetStream client
// of it and its URL, without waiting for the leaf connection.
func startLeaf(t *testing.T, hubURL *url.URL, domain string) (jetstream.JetStream, string) {
	t.Helper()
	s := consumertest.RunServerWithOptions(t, &server.Options{ServerName: "jetledger-" + domain, JetStreamDomain: domain,
		LeafNode: server.LeafNodeOpts{ReconnectInterval: time.Second, Remotes: []*server.RemoteLeafOpts{{URLs: []*url.URL{hubURL}}}}})
	_, js := consumertest.Connect(t, s)
	return js, s.ClientURL()
}
