package stream_test

import (
	"log/slog"
	"net/url"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

var quiet = slog.New(slog.DiscardHandler)

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
