package consumertest

import (
	"fmt"
	"net"
	"net/url"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// FreePort is a TCP port on 127.0.0.1 that was free a moment ago, for a
// listener a server takes by number (a leaf or route port).
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// RunHub starts a test's hub: a server in JetStream domain "hub" that
// takes leaf connections. It returns the server, a JetStream client of it
// and the URL an edge joins it by.
func RunHub(tb testing.TB) (*server.Server, jetstream.JetStream, *url.URL) {
	tb.Helper()
	leafPort := FreePort(tb)
	hub := RunServerWithOptions(tb, &server.Options{JetStreamDomain: "hub", ServerName: "hub",
		LeafNode: server.LeafNodeOpts{Host: "127.0.0.1", Port: leafPort}})
	_, js := Connect(tb, hub)
	u, _ := url.Parse(fmt.Sprintf("nats-leaf://127.0.0.1:%d", leafPort))
	return hub, js, u
}
