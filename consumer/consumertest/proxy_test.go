package consumertest_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"go.uber.org/goleak"
)

// The proxy's goroutines must all end at its Cleanup.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo is a TCP server that sends back what it reads and keeps it.
type echo struct {
	l   net.Listener
	mu  sync.Mutex
	got []byte
	wg  sync.WaitGroup
}

func newEcho(t *testing.T) *echo {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echo{l: l}
	var conns []net.Conn
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			e.mu.Lock()
			conns = append(conns, c)
			e.mu.Unlock()
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				buf := make([]byte, 1024)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						e.mu.Lock()
						e.got = append(e.got, buf[:n]...)
						e.mu.Unlock()
						c.Write(buf[:n]) //nolint:errcheck // a reset test's client may be gone
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		e.mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		e.mu.Unlock()
		e.wg.Wait()
	})
	return e
}

func (e *echo) received() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return string(e.got)
}

func dial(t *testing.T, p *consumertest.Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second)) //nolint:errcheck // a read that hangs fails the test instead
	return c
}

func TestProxyForwardsCountsAndResets(t *testing.T) {
	t.Parallel()
	e := newEcho(t)
	p := consumertest.NewProxy(t, e.l.Addr().String(), consumertest.ProxyHooks{})
	c := dial(t, p)
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("read %q, %v; want the echo of ping", buf, err)
	}
	if p.Dials() != 1 || p.Open() != 1 {
		t.Fatalf("dials %d, open %d; want 1 and 1", p.Dials(), p.Open())
	}
	if n := p.Reset(); n != 1 {
		t.Fatalf("Reset reset %d pairs, want 1", n)
	}
	if _, err := c.Read(buf); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after Reset: %v, want a reset", err)
	}
	consumertest.Eventually(t, 10*time.Second, "no pair open after Reset", func() bool { return p.Open() == 0 })
}

func TestProxyHooks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		hooks func(*echo) consumertest.ProxyHooks
		send  []string
		want  string // what reaches the target
	}{
		{
			name: "before drops the chunk it resets on",
			hooks: func(*echo) consumertest.ProxyHooks {
				return consumertest.ProxyHooks{Before: func(up bool, _ int64, data []byte) consumertest.Verdict {
					if up && bytes.Contains(data, []byte("boom")) {
						return consumertest.ResetAll
					}
					return consumertest.Pass
				}}
			},
			send: []string{"a", "boom"},
			want: "a",
		},
		{
			name: "after resets once the chunk went",
			hooks: func(e *echo) consumertest.ProxyHooks {
				return consumertest.ProxyHooks{After: func(up bool, n int64, _ []byte) consumertest.Verdict {
					if !up || n != 2 {
						return consumertest.Pass
					}
					// A RST can overtake data the target has not read yet:
					// the chunk went if the target reads it before the reset.
					for deadline := time.Now().Add(10 * time.Second); e.received() != "ab" && time.Now().Before(deadline); {
						time.Sleep(time.Millisecond) // polling a condition with a deadline
					}
					return consumertest.ResetAll
				}}
			},
			send: []string{"a", "b"},
			want: "ab",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEcho(t)
			p := consumertest.NewProxy(t, e.l.Addr().String(), tt.hooks(e))
			c := dial(t, p)
			last := len(tt.send) - 1
			for _, s := range tt.send[:last] {
				// One chunk at a time: the echo of s is back before the next.
				buf := make([]byte, len(s))
				if _, err := c.Write([]byte(s)); err != nil {
					t.Fatal(err)
				}
				if _, err := io.ReadFull(c, buf); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := c.Write([]byte(tt.send[last])); err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(io.Discard, c); !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("the connection ended with %v, want a reset", err)
			}
			consumertest.Eventually(t, 10*time.Second, "no pair open after the reset", func() bool { return p.Open() == 0 })
			if got := e.received(); got != tt.want {
				t.Fatalf("the target received %q, want %q", got, tt.want)
			}
		})
	}
}
