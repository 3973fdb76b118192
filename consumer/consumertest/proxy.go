package consumertest

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Verdict is what a Proxy does after a hook has seen a chunk.
type Verdict int

const (
	// Pass forwards the chunk (from Before) or goes on reading (from After).
	Pass Verdict = iota
	// ResetAll closes every connection of the proxy with a TCP RST: from
	// Before the chunk is dropped unsent, from After it has gone through.
	ResetAll
)

// ProxyHooks are a Proxy's faults. Each hook is called with every chunk
// read from either side of a connection pair: up when the client sent it,
// n its number in that direction of its pair (from 1), data its bytes (the
// proxy's buffer: copy them to keep them). Before runs before the chunk is
// written on, After once it was; a hook may block (a hold), sleep (the
// latency it adds) or return ResetAll. A nil hook passes everything, so
// the zero ProxyHooks makes a plain forwarding proxy.
//
// A hook that blocks must be released before the proxy closes: register
// the release with tb.Cleanup after NewProxy, so that it runs first.
type ProxyHooks struct {
	Before func(up bool, n int64, data []byte) Verdict
	After  func(up bool, n int64, data []byte) Verdict
}

// Proxy is a TCP proxy on a free loopback port to a target address, for
// tests of network faults: a connection to it is a connection to the
// target, through hooks that can hold, delay or reset it.
type Proxy struct {
	l      net.Listener
	target string
	hooks  ProxyHooks
	dials  atomic.Int64
	mu     sync.Mutex
	conns  map[net.Conn]bool // both ends of every pair
	closed bool
	wg     sync.WaitGroup
}

// NewProxy starts a proxy to target. tb.Cleanup closes it: the listener,
// every connection (with a RST), and waits for all its goroutines.
func NewProxy(tb testing.TB, target string, hooks ProxyHooks) *Proxy {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("consumertest: proxy listen: %v", err)
	}
	p := &Proxy{l: l, target: target, hooks: hooks, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.accept()
	tb.Cleanup(p.close)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.l.Addr().String() }

// URL is the proxy's address as a NATS client URL.
func (p *Proxy) URL() string { return "nats://" + p.Addr() }

// Dials counts the connections the proxy accepted, whether or not the
// target took them.
func (p *Proxy) Dials() int64 { return p.dials.Load() }

// Open counts the connection pairs open through the proxy.
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns) / 2
}

// Reset closes every connection with a TCP RST and says how many pairs.
func (p *Proxy) Reset() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0) //nolint:errcheck // best effort: RST instead of FIN
		}
		c.Close()
	}
	return len(p.conns) / 2
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.dials.Add(1)
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed { // close reset the others already: this pair would outlive it
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		p.conns[c], p.conns[s] = true, true
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(s, c, true)
		go p.pipe(c, s, false)
	}
}

// pipe copies src to dst through the hooks; up carries the client's
// traffic.
func (p *Proxy) pipe(dst, src net.Conn, up bool) {
	defer p.wg.Done()
	defer p.drop(src, dst)
	buf := make([]byte, 32<<10)
	for chunk := int64(1); ; {
		n, err := src.Read(buf)
		if n > 0 {
			if call(p.hooks.Before, up, chunk, buf[:n]) == ResetAll {
				p.Reset()
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			if call(p.hooks.After, up, chunk, buf[:n]) == ResetAll {
				p.Reset()
				return
			}
			chunk++
		}
		if err != nil {
			return
		}
	}
}

func call(hook func(bool, int64, []byte) Verdict, up bool, n int64, data []byte) Verdict {
	if hook == nil {
		return Pass
	}
	return hook(up, n, data)
}

func (p *Proxy) drop(a, b net.Conn) {
	p.mu.Lock()
	delete(p.conns, a)
	delete(p.conns, b)
	p.mu.Unlock()
	a.Close()
	b.Close()
}

func (p *Proxy) close() {
	p.l.Close()
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.Reset()
	p.wg.Wait()
}
