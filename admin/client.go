package admin

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// ErrNoRun: no run answered at the address: nothing consumes the durable
// now (a partition with no owner), or the site cannot be reached.
var ErrNoRun = errors.New("admin: no run answers")

// Call asks endpoint at a with req (marshalled as JSON; nil sends nothing)
// and decodes the answer into resp. A refusal is an *Error with its code;
// no answer is ErrNoRun, naming the subject asked; ctx bounds the wait.
func Call(ctx context.Context, nc *nats.Conn, a Address, endpoint string, req, resp any) error {
	return CallFrom(ctx, nc, a, endpoint, "", req, resp)
}

// CallFrom is Call naming the caller (HeaderOrigin: a host, a console and
// its client's address) for the audit of an action; "" names none.
func CallFrom(ctx context.Context, nc *nats.Conn, a Address, endpoint, from string, req, resp any) error {
	if !slices.Contains(Endpoints, endpoint) {
		return fmt.Errorf("admin: no endpoint %q: want one of %s", endpoint, strings.Join(Endpoints, ", "))
	}
	var data []byte
	if req != nil {
		var err error
		if data, err = json.Marshal(req); err != nil {
			return err
		}
	}
	subject := a.Subject(endpoint)
	m := nats.NewMsg(subject)
	m.Data = data
	if from != "" {
		m.Header.Set(HeaderOrigin, from)
	}
	msg, err := ask(ctx, nc, m)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return fmt.Errorf("%w at %s (site %s, stream %s, durable %s): no run of it is consuming, or the site is not reachable", ErrNoRun, subject, a.Site, a.Stream, a.Durable)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w at %s within the time given: %w", ErrNoRun, subject, err)
	case err != nil:
		return fmt.Errorf("admin: ask %s: %w", subject, err)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		return &Error{Code: code, Err: errors.New(msg.Header.Get(micro.ErrorHeader))}
	}
	if resp == nil {
		return nil
	}
	if err := json.Unmarshal(msg.Data, resp); err != nil {
		return fmt.Errorf("admin: the answer of %s is not the JSON expected: %w", subject, err)
	}
	return nil
}

// NotOwnerGrace is how long a request answered "not the owner" (an owner
// fenced but still subscribed, a standby's API) waits for the owner's
// answer, which every run at the address is asked for too.
const NotOwnerGrace = 2 * time.Second

// ask publishes m and returns the first answer that is not a refusal as
// not the owner (CodeNotOwner), or that refusal when no other comes
// within NotOwnerGrace: every run at an address gets each request (no
// queue group), and the first to answer may be one that lost the
// partition, while its owner acts.
func ask(ctx context.Context, nc *nats.Conn, m *nats.Msg) (*nats.Msg, error) {
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe() //nolint:errcheck // done
	m.Reply = inbox
	if err := nc.PublishMsg(m); err != nil {
		return nil, err
	}
	var refused *nats.Msg
	wait := ctx
	for {
		msg, err := sub.NextMsgWithContext(wait)
		switch {
		case err != nil && refused != nil:
			return refused, nil // no owner's answer within the grace
		case err != nil:
			return nil, err
		case msg.Header.Get("Status") == "503" && len(msg.Data) == 0:
			if refused != nil {
				continue
			}
			return nil, nats.ErrNoResponders
		case msg.Header.Get(micro.ErrorCodeHeader) != CodeNotOwner:
			return msg, nil
		case refused == nil:
			refused = msg
			var cancel context.CancelFunc
			wait, cancel = context.WithTimeout(ctx, NotOwnerGrace)
			defer cancel()
		}
	}
}

// DiscoverQuiet is how long Discover waits for another answer once one
// has come: runs answer at once, a site over a leaf link within
// milliseconds.
const DiscoverQuiet = 500 * time.Millisecond

// Found is a run's admin API that Discover found.
type Found struct {
	Address
	Role    string `json:"role"` // owner, or standby
	Version string `json:"version,omitempty"`
	ID      string `json:"id"` // the micro service's
}

// DiscoverAgain is how often Discover asks again while none has answered:
// across a cluster's routes a run's subscription reaches the other servers
// a moment after the run serves it, so a request sent through another
// server at once can find no one although the run is there.
const DiscoverAgain = 200 * time.Millisecond

// Discover asks every run's admin API reachable through nc (across leaf
// links too) to say where it is (micro's $SRV.INFO), gathering the answers
// for wait at the most, and until none has come for DiscoverQuiet after
// the first: owners' and standbys', sorted by site, stream and durable.
// Until one answers it asks again every DiscoverAgain; a run answering
// twice counts once.
func Discover(ctx context.Context, nc *nats.Conn, wait time.Duration) ([]Found, error) {
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("admin: discover: %w", err)
	}
	defer sub.Unsubscribe() //nolint:errcheck // done
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var out []Found
	seen := map[string]bool{}
	for {
		pause := DiscoverQuiet
		if len(out) == 0 {
			if err := nc.PublishRequest("$SRV.INFO."+ServiceName, inbox, nil); err != nil {
				return nil, fmt.Errorf("admin: discover: %w", err)
			}
			pause = DiscoverAgain
		}
		next, cancel := context.WithTimeout(ctx, pause)
		msg, err := sub.NextMsgWithContext(next)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil && len(out) == 0:
			continue // none yet: ask again
		case err != nil:
			return sorted(out), nil // the wait is over
		}
		var info micro.Info
		if json.Unmarshal(msg.Data, &info) != nil || seen[info.ID] {
			continue
		}
		seen[info.ID] = true
		m := info.Metadata
		out = append(out, Found{Address: Address{Site: m["site"], Stream: m["stream"], Durable: m["durable"], Standby: m["role"] == "standby"},
			Role: cmp.Or(m["role"], "owner"), Version: m["version"], ID: info.ID})
	}
}

// sorted orders found by site, stream, durable and role.
func sorted(out []Found) []Found {
	slices.SortFunc(out, func(a, b Found) int {
		return cmp.Or(cmp.Compare(a.Site, b.Site), cmp.Compare(a.Stream, b.Stream), cmp.Compare(a.Durable, b.Durable), cmp.Compare(a.Role, b.Role))
	})
	return out
}
