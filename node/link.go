package node

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// LinkStatus is an edge node's leaf link to its hub, as the node sees it.
type LinkStatus struct {
	Leaf      bool      `json:"leaf"`               // the node is a leaf node of a hub at all
	Up        bool      `json:"up"`                 // connected now
	Since     time.Time `json:"since"`              // when it last went up or down (the start, if neither)
	Connected time.Time `json:"connected,omitzero"` // when it last came up; zero: never since the start
	Drops     int       `json:"drops"`              // times it went down since the start
	Reason    string    `json:"reason,omitempty"`   // the last error the server met on the link, while down
	Refused   bool      `json:"refused,omitempty"`  // Reason is the hub refusing it (credentials, TLS, a duplicate), not a network error
}

// Link is the leaf link's status; a node that is no leaf says Leaf false.
func (n *Node) Link() LinkStatus {
	if n.link == nil {
		return LinkStatus{}
	}
	return n.link.status()
}

// linkPoll is how often the link watch looks at the server's leaf
// connections.
const linkPoll = 250 * time.Millisecond

// linkFlood is how many changes of the link a window logs one by one; the
// rest are counted and said once at the window's end.
const (
	linkFlood       = 3
	linkFloodWindow = time.Minute
)

// linkWatch follows the leaf link and logs its changes: the embedded
// server's own log is off (its lines are not the program's), so without
// it a link refused or knocked off the hub would be silent.
type linkWatch struct {
	srv  *server.Server
	log  *slog.Logger
	hub  string
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	st      LinkStatus
	reason  string // the server's last line about the link
	said    string // the last refusal logged
	window  time.Time
	logged  int // changes logged in the window
	skipped int // changes not logged in the window
}

// newLinkWatch is the watch of srv's link to hub; it takes the server's
// log before the server starts (its first tries to connect are in it),
// and watches once started (watch).
func newLinkWatch(srv *server.Server, log *slog.Logger, hub string) *linkWatch {
	w := &linkWatch{srv: srv, log: log, hub: hub, stop: make(chan struct{}), done: make(chan struct{})}
	w.st = LinkStatus{Leaf: true, Since: time.Now()}
	srv.SetLogger(serverLog{w}, false, false)
	return w
}

func (w *linkWatch) watch() { go w.run() }

func (w *linkWatch) status() LinkStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.st
}

func (w *linkWatch) close() {
	close(w.stop)
	<-w.done
}

func (w *linkWatch) run() {
	defer close(w.done)
	t := time.NewTicker(linkPoll)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case now := <-t.C:
			w.look(now, w.srv.NumLeafNodes() > 0)
		}
	}
}

// look takes one reading of the link: up or not now.
func (w *linkWatch) look(now time.Time, up bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if now.Sub(w.window) >= linkFloodWindow {
		if w.skipped > 0 {
			w.log.Warn(fmt.Sprintf("the link to the hub went up or down %d more times in the last %s, not logged one by one: "+
				"another site with the same domain (--edge-domain) knocks this one off the hub, or the network drops it", w.skipped, linkFloodWindow),
				"hub", w.hub, "up", w.st.Up, "drops", w.st.Drops, "reason", w.reason)
		}
		w.window, w.logged, w.skipped, w.said = now, 0, 0, ""
	}
	if up == w.st.Up {
		if !up {
			w.sayRefusal()
		}
		return
	}
	was := w.st.Since
	w.st.Up, w.st.Since = up, now
	if up {
		w.st.Connected, w.st.Reason, w.st.Refused, w.reason = now, "", false, ""
	} else {
		w.st.Drops++
	}
	if w.logged >= linkFlood {
		w.skipped++
		return
	}
	w.logged++
	if up {
		w.log.Info("the link to the hub is up", "hub", w.hub, "down_for", now.Sub(was).Round(time.Millisecond))
		return
	}
	w.log.Warn("the link to the hub is down: processing goes on; new messages from the hub and effects to it wait for the link", "hub", w.hub, "up_for", now.Sub(was).Round(time.Millisecond))
}

// sayRefusal logs the hub refusing the link, once per kind of refusal in
// a window; called with w.mu held while the link is down.
func (w *linkWatch) sayRefusal() {
	w.st.Reason = w.reason
	what := refusal(w.reason)
	w.st.Refused = what != ""
	if what == "" || w.said == what {
		return
	}
	w.said = what
	w.log.Error("the hub refuses the link: "+what, "hub", w.hub, "reason", w.reason)
}

// refusal says what to check when reason, a server line about the link,
// is the hub refusing it; "" when it is not (a network error).
func refusal(reason string) string {
	r := strings.ToLower(reason)
	switch {
	case strings.Contains(r, "duplicate"):
		return "the hub already has a leaf of this name: another site has the same domain (--edge-domain); give each site its own"
	case strings.Contains(r, "authorization") || strings.Contains(r, "authentication") || strings.Contains(r, "permissions"):
		return "the hub does not accept this site's credentials: check the user and password in --hub-url, or --hub-creds"
	case strings.Contains(r, "tls") || strings.Contains(r, "x509") || strings.Contains(r, "certificate"):
		return "TLS with the hub fails: check --hub-tls-ca, --hub-tls-cert and --hub-tls-key against the hub's certificates"
	}
	return ""
}

// serverLog is the embedded server's logger: it keeps the last error or
// warning about the leaf link, for the watch, and drops the rest, as the
// server's NoLog did.
type serverLog struct{ w *linkWatch }

func (l serverLog) keep(format string, v []any) {
	line := fmt.Sprintf(format, v...)
	if !strings.Contains(strings.ToLower(line), "leaf") && !strings.Contains(line, "lid:") {
		return
	}
	l.w.mu.Lock()
	l.w.reason = line
	l.w.mu.Unlock()
}

func (l serverLog) Errorf(format string, v ...any) { l.keep(format, v) }
func (l serverLog) Warnf(format string, v ...any)  { l.keep(format, v) }
func (l serverLog) Fatalf(format string, v ...any) { l.keep(format, v) }
func (serverLog) Noticef(string, ...any)           {}
func (serverLog) Debugf(string, ...any)            {}
func (serverLog) Tracef(string, ...any)            {}
