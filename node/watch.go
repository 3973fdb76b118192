package node

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// DefaultWatchInterval is how often Watch asks the server about its store
// when given no interval.
const DefaultWatchInterval = time.Second

// DependOn names streams the program cannot do without: a failure of
// theirs is a Fault; another stream's, which may be lasting (one that did
// not recover at start), is only logged by Watch. Until a stream is named,
// any stream's failure is a Fault.
func (n *Node) DependOn(streams ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.depends == nil {
		n.depends = map[string]bool{}
	}
	for _, s := range streams {
		n.depends[s] = true
	}
}

// Fault is the store's failure as the server's own health check sees it,
// an error wrapping ErrStoreFailed, or nil: JetStream off (the server turns
// it off on a write it cannot make), or a failure (a write error it keeps,
// or no recovery) of a stream named by DependOn, or of any stream while
// none is named.
func (n *Node) Fault() error {
	hs := n.srv.Healthz(&server.HealthzOptions{Details: true})
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, he := range hs.Errors {
		switch {
		case he.Type == server.HealthzErrorJetStream,
			he.Type == server.HealthzErrorStream && (len(n.depends) == 0 || n.depends[he.Stream]):
			return fmt.Errorf("%w (%s): %s", ErrStoreFailed, n.dir, he.Error)
		}
	}
	return nil
}

// others are the failures of streams not depended on, each reported once.
func (n *Node) others() []server.HealthzError {
	hs := n.srv.Healthz(&server.HealthzOptions{Details: true})
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []server.HealthzError
	for _, he := range hs.Errors {
		if he.Type == server.HealthzErrorStream && len(n.depends) > 0 && !n.depends[he.Stream] && !n.warned[he.Stream] {
			if n.warned == nil {
				n.warned = map[string]bool{}
			}
			n.warned[he.Stream] = true
			out = append(out, he)
		}
	}
	return out
}

// Watch asks the server about its store every interval (0:
// DefaultWatchInterval) until ctx ends and returns nil then, or returns the
// Fault once two asks in a row have seen it (a stream being created or
// deleted is briefly missing). A server that cannot write cannot recover in
// place: the program should stop, so that its supervisor restarts it.
// Failures of streams not depended on are logged at warn, once each.
func (n *Node) Watch(ctx context.Context, every time.Duration) error {
	if every <= 0 {
		every = DefaultWatchInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	seen := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		for _, he := range n.others() {
			n.log.WarnContext(ctx, "a stream of the embedded store that run does not use has failed (not recovered, or a write error); run goes on",
				"store", n.dir, "stream", he.Stream, "err", he.Error)
		}
		err := n.Fault()
		if err == nil {
			seen = 0
			continue
		}
		if seen++; seen < 2 {
			continue
		}
		return err
	}
}
