package node

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats-server/v2/server"
)

// A leaf node joins its hub under a server name of its domain, and the
// hub reaches its JetStream by that domain.
func TestLeafJoinsTheHub(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	leafPort := l.Addr().(*net.TCPAddr).Port
	l.Close()
	hub := consumertest.RunServerWithOptions(t, &server.Options{JetStreamDomain: DefaultHubDomain, ServerName: "hub",
		LeafNode: server.LeafNodeOpts{Host: "127.0.0.1", Port: leafPort}})
	n, err := Start(t.Context(), Config{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), Logger: quiet,
		Leaf: &LeafConfig{URLs: []string{fmt.Sprintf("nats-leaf://127.0.0.1:%d", leafPort)}, Domain: "site1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	if got := n.Server().JetStreamConfig().Domain; got != "site1" {
		t.Fatalf("JetStream domain %q, want site1", got)
	}
	consumertest.Eventually(t, 10*time.Second, "the hub to have the leaf", func() bool {
		lz, _ := hub.Leafz(nil)
		return lz != nil && lz.NumLeafs == 1 && lz.Leafs[0].Name == "jetledger-site1"
	})
}

// A scratch node's directory goes with Remove.
func TestScratchRemovesItsDirectory(t *testing.T) {
	t.Parallel()
	s, err := StartScratch(t.Context(), "test", Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(s.StoreDir()) != s.Dir {
		t.Fatalf("store %s is not in %s", s.StoreDir(), s.Dir)
	}
	if err := s.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		t.Fatalf("%s left behind: %v", s.Dir, err)
	}
}
