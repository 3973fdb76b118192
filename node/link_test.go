package node

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats-server/v2/server"
)

// startEdge starts a leaf node of the hub at url, its log in the buffer
// returned.
func startEdge(t *testing.T, url, domain string) (*Node, *consumertest.LogBuffer) {
	t.Helper()
	buf := &consumertest.LogBuffer{}
	n, err := Start(t.Context(), Config{StoreDir: t.TempDir(), Listen: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(buf, nil)),
		Leaf: &LeafConfig{URLs: []string{url}, Domain: domain}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	return n, buf
}

// The link's changes are the node's to say (the server's own log is off):
// up, then down when the hub goes, up again when it is back, each logged.
func TestLinkIsWatchedAndLogged(t *testing.T) {
	hub, _, u := consumertest.RunHub(t)
	n, buf := startEdge(t, u.String(), "site1")
	consumertest.Eventually(t, 30*time.Second, "the link up", func() bool { return n.Link().Up })
	if l := n.Link(); !l.Leaf || l.Connected.IsZero() || l.Drops != 0 {
		t.Fatalf("link after connecting: %+v", l)
	}
	hub.Shutdown()
	consumertest.Eventually(t, 30*time.Second, "the link down", func() bool { return !n.Link().Up })
	if l := n.Link(); l.Drops != 1 || l.Refused {
		t.Fatalf("link after the hub went: %+v; want one drop, no refusal", l)
	}
	for _, want := range []string{"the link to the hub is up", "the link to the hub is down"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, buf)
		}
	}
	if (&Node{}).Link().Leaf {
		t.Error("a node that is no leaf says it is one")
	}
}

// A hub that refuses the site's credentials is said at error, once, with
// what to check, and the status says refused.
func TestLinkRefusedIsSaidOnce(t *testing.T) {
	port := consumertest.FreePort(t)
	consumertest.RunServerWithOptions(t, &server.Options{JetStreamDomain: "hub", ServerName: "hub",
		LeafNode: server.LeafNodeOpts{Host: "127.0.0.1", Port: port, Username: "leaf", Password: "right"}})
	n, buf := startEdge(t, fmt.Sprintf("nats-leaf://leaf:wrong@127.0.0.1:%d", port), "site1")
	consumertest.Eventually(t, 30*time.Second, "the refusal seen", func() bool { return n.Link().Refused })
	consumertest.Eventually(t, 30*time.Second, "a second try refused", func() bool { return strings.Count(buf.String(), "level=ERROR") >= 1 })
	if got := strings.Count(buf.String(), "the hub refuses the link"); got != 1 {
		t.Errorf("the refusal is logged %d times, want once:\n%s", got, buf)
	}
	if !strings.Contains(buf.String(), "credentials") || strings.Contains(buf.String(), "wrong") {
		t.Errorf("the refusal should say to check the credentials and never the password:\n%s", buf)
	}
}

// Two sites given one domain knock each other off the hub: that is said
// (at error, naming the domain), not left silent.
func TestTwoSitesWithOneDomainAreSaid(t *testing.T) {
	_, _, u := consumertest.RunHub(t)
	a, bufA := startEdge(t, u.String(), "site1")
	b, bufB := startEdge(t, u.String(), "site1")
	consumertest.Eventually(t, 60*time.Second, "a drop said at either site", func() bool {
		return a.Link().Drops+b.Link().Drops > 0 && (strings.Contains(bufA.String(), "same domain") || strings.Contains(bufB.String(), "same domain"))
	})
}
