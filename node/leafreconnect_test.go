package node

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats-server/v2/server"
)

// handshakeResetter is a TCP proxy to the hub that resets each connection
// with a TCP RST just after it forwarded the hub's first or second chunk to
// the leaf (which, drawn at random for each connection), give or take a
// millisecond: in the middle of the leaf handshake, where the leaf answers
// the hub's INFO. Dials counts the connections the leaf made, resets the
// ones reset that way.
type handshakeResetter struct {
	*consumertest.Proxy
	rng    *rand.Rand
	mu     sync.Mutex
	armed  atomic.Bool
	second bool // this connection is reset after the hub's second chunk
	resets atomic.Int64
}

func newHandshakeResetter(t *testing.T, target string) *handshakeResetter {
	p := &handshakeResetter{rng: rand.New(rand.NewPCG(7, 7))}
	p.Proxy = consumertest.NewProxy(t, target, consumertest.ProxyHooks{After: p.sent})
	return p
}

// sent resets every connection once the hub's chunk drawn for it went to
// the leaf, while armed.
func (p *handshakeResetter) sent(up bool, chunk int64, _ []byte) consumertest.Verdict {
	if up || !p.armed.Load() || chunk > 2 {
		return consumertest.Pass
	}
	p.mu.Lock()
	if chunk == 1 {
		p.second = p.rng.IntN(2) == 1
	}
	if p.second != (chunk == 2) {
		p.mu.Unlock()
		return consumertest.Pass
	}
	d := time.Duration(p.rng.IntN(1000)) * time.Microsecond
	p.mu.Unlock()
	time.Sleep(d) // the moment of the reset is the experiment's variable
	p.resets.Add(1)
	return consumertest.ResetAll
}

// The leaf link runs without S2 compression (the reason is in remote); a
// plain check, beside the test below that can only make the bug likely.
func TestLeafLinkIsNotCompressed(t *testing.T) {
	opts, err := Config{StoreDir: t.TempDir(), Leaf: &LeafConfig{URLs: []string{"nats-leaf://127.0.0.1:7422"}, Domain: "site1"}}.
		options(listenAddr{host: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := opts.LeafNode.Remotes[0].Compression.Mode; got != server.CompressionOff {
		t.Fatalf("leaf compression %q, want %q", got, server.CompressionOff)
	}
}

// A link reset in the middle of the leaf handshake must not end the
// leaf's attempts: the site would stay cut off from its hub until run
// restarted (the nemesis found it as an edge that never caught up; with
// nats-server v2.15.2's S2 compression negotiated on the link, a write
// error in that negotiation left no reconnect scheduled, within about 50
// of these resets, about 1 in 100: 300 make it likely to show, not sure).
func TestLeafLinkComesBackAfterAResetInItsHandshake(t *testing.T) {
	rounds := 300
	if testing.Short() {
		rounds = 40
	}
	defer func(d time.Duration) { leafReconnect = d }(leafReconnect)
	leafReconnect = 20 * time.Millisecond // many handshakes in a short test
	leafPort := consumertest.FreePort(t)
	hub := consumertest.RunServerWithOptions(t, &server.Options{JetStreamDomain: DefaultHubDomain, ServerName: "hub",
		LeafNode: server.LeafNodeOpts{Host: "127.0.0.1", Port: leafPort, NoAdvertise: true}})
	p := newHandshakeResetter(t, fmt.Sprintf("127.0.0.1:%d", leafPort))
	p.armed.Store(true)
	n, err := Start(t.Context(), Config{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), Logger: quiet,
		Leaf: &LeafConfig{URLs: []string{"nats-leaf://" + p.Addr()}, Domain: "site1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	for i := range rounds {
		before := p.Dials()
		deadline := time.Now().Add(5 * time.Second)
		for p.Dials() == before {
			if time.Now().After(deadline) {
				t.Fatalf("round %d of %d: the leaf made no connection to the hub for 5s after a reset in its handshake (reconnect interval %s)",
					i+1, rounds, leafReconnect)
			}
			if time.Until(deadline) < 4800*time.Millisecond {
				p.Reset() // the handshake had no second chunk: reset the link as it is
			}
			time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
		}
	}
	p.armed.Store(false)
	p.Reset()
	if r := p.resets.Load(); r < int64(rounds)/2 {
		t.Fatalf("%d of %d resets landed in the handshake; the test no longer tries what it names", r, rounds)
	}
	consumertest.Eventually(t, 10*time.Second, "the link to be up, uncompressed, once the resets stop", func() bool {
		lz, _ := hub.Leafz(nil)
		return lz != nil && lz.NumLeafs == 1 && lz.Leafs[0].Compression == server.CompressionOff
	})
	t.Logf("%d of %d resets in the handshake", p.resets.Load(), rounds)
}
