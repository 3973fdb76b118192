package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/micro"
)

// ActLimit is the most rows one action takes by a filter: their ids fit a
// NATS message of the default 1 MiB (a ULID and its quotes, 29 bytes).
const ActLimit = 20_000

// Act is the request of an action on outbox rows (outbox.resolve,
// outbox.retry): the rows by IDs, or every row in Status (the filter);
// Seen is when the caller saw them (a dry run's answer gives it): a row
// changed since is skipped and reported, never changed. DryRun answers the
// count and Seen only. Who is recorded with each row's change, with Note.
type Act struct {
	IDs    []string      `json:"ids,omitempty"`
	Status ledger.Status `json:"status,omitempty"`
	// Before narrows Status to rows last changed before it.
	Before time.Time `json:"before,omitzero"`
	Seen   time.Time `json:"seen,omitzero"`
	DryRun bool      `json:"dry_run,omitempty"`
	Who    string    `json:"who"`
	Note   string    `json:"note,omitempty"`
	// As and ExternalID: outbox.resolve's outcome, sent (with the
	// destination's id) or failed.
	As         ledger.Status `json:"as,omitempty"`
	ExternalID string        `json:"external_id,omitempty"`
}

// Acted is an action's answer: the rows matched, the ones changed, and
// the ones skipped with why (changed since Seen, not in a state the
// action takes, not found). A dry run's IDs are the rows it matched: give
// them, with its Seen, to act on exactly those, and have any that changed
// meanwhile reported.
type Acted struct {
	Matched int       `json:"matched"`
	Seen    time.Time `json:"seen"`
	DryRun  bool      `json:"dry_run,omitempty"`
	IDs     []string  `json:"ids,omitempty"`
	Done    []string  `json:"done"`
	// Skipped are the rows left, the first SkipsMax of them with why;
	// SkippedCount is how many in all.
	Skipped      []Skip `json:"skipped"`
	SkippedCount int    `json:"skipped_count"`
}

// SkipsMax is the most skipped rows an answer says why of: with their
// reasons, 20 000 would not fit a NATS message of the default 1 MiB.
const SkipsMax = 1000

// skip notes a row left as it was.
func (a *Acted) skip(s Skip) {
	if a.SkippedCount++; len(a.Skipped) < SkipsMax {
		a.Skipped = append(a.Skipped, s)
	}
}

// Skip is a row an action left as it was, and why.
type Skip struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
	// Changed: the row changed since it was seen.
	Changed bool `json:"changed,omitempty"`
}

// act runs change on each row req names, as req.Who, from the request's
// origin; a dry run only counts them.
func (s *Server) act(ctx context.Context, req micro.Request, check func(Act) error, change func(context.Context, string, Act, ledger.Params) error) (any, error) {
	var q Act
	if err := decode(req, &q); err != nil {
		return nil, err
	}
	switch {
	case q.Who == "":
		return nil, badRequest("no who: every action is recorded with who took it")
	case len(q.IDs) == 0 && q.Status == "":
		return nil, badRequest("neither ids nor a status: an action names its rows, or every row in one status")
	case len(q.IDs) > 0 && q.Status != "":
		return nil, badRequest("both ids and a status: give one")
	case !q.Before.IsZero() && q.Status == "":
		return nil, badRequest("before without a status: it narrows a status's rows")
	case !q.DryRun && q.Seen.IsZero():
		return nil, badRequest("no seen: an action acts on rows as the caller saw them; ask a dry run first, and give its seen")
	}
	if err := check(q); err != nil {
		return nil, badRequest("%v", err)
	}
	if err := (ledger.Listing{Status: q.Status, Names: map[string]string{"Status": "status"}}).Check(); err != nil {
		return nil, badRequest("%v", err)
	}
	if len(q.IDs) > ActLimit {
		return nil, badRequest("%d ids: an action takes %d at the most", len(q.IDs), ActLimit)
	}
	seen := s.st.Now() // before the rows are read: what a dry run saw
	ids := uniq(q.IDs)
	if q.Status != "" {
		items, err := s.st.ListOutbox(ctx, q.Status, ActLimit)
		if err != nil {
			return nil, err
		}
		ids = ids[:0]
		for _, it := range items {
			if !q.DryRun && it.UpdatedAt.UnixMilli() >= q.Seen.UnixMilli() {
				continue // in the status now, not when seen: the caller did not count it
			}
			if !q.Before.IsZero() && !it.UpdatedAt.Before(q.Before) {
				continue
			}
			ids = append(ids, it.ID)
		}
	}
	out := Acted{Matched: len(ids), Seen: q.Seen, DryRun: q.DryRun, Done: []string{}, Skipped: []Skip{}}
	if q.DryRun {
		out.Seen, out.IDs = seen, ids
		return out, nil
	}
	p := ledger.Params{Seen: q.Seen, Audit: &ledger.Audit{Who: q.Who, From: origin(req), Note: q.Note}, ExternalID: q.ExternalID}
	for _, id := range ids {
		err := change(ctx, id, q, p)
		switch {
		case err == nil:
			out.Done = append(out.Done, id)
		case errors.Is(err, ledger.ErrChanged):
			out.skip(Skip{ID: id, Reason: err.Error(), Changed: true})
		case errors.Is(err, ledger.ErrNotFound) || errors.As(err, new(*ledger.StateError)) || errors.Is(err, outbox.ErrStillAtDestination):
			out.skip(Skip{ID: id, Reason: err.Error()})
		default: // the ledger failed: the error says how far the action got
			doubt := ""
			if errors.Is(err, ledger.ErrNotChangelogOwner) {
				// An entry that landed as the lease ended is rolled back
				// here and applied by the next owner from the log.
				doubt = "; its change may be in the partition's log all the same, which the next owner applies"
			}
			return nil, fmt.Errorf("%d of %d rows done, %d skipped, when the ledger failed at %s%s (the rest untouched; list them again): %w",
				len(out.Done), len(ids), out.SkippedCount, id, doubt, err)
		}
	}
	return out, nil
}

// origin is where a request came from, as the audit records it: the
// client's own header, else its reply subject.
func origin(req micro.Request) string {
	if o := req.Headers().Get(HeaderOrigin); o != "" {
		return o
	}
	return "reply " + req.Reply()
}

// HeaderOrigin is the header a client names itself with (a host, a
// console's user agent), for the audit.
const HeaderOrigin = "Jetledger-Origin"

func (s *Server) outboxResolve(ctx context.Context, req micro.Request) (any, error) {
	return s.act(ctx, req, func(q Act) error {
		switch {
		case q.As == ledger.StatusSent && q.ExternalID == "":
			return errors.New("resolving as sent needs the destination's external_id")
		case q.As != ledger.StatusSent && q.As != ledger.StatusFailed:
			return errors.New("as: want sent or failed")
		}
		return nil
	}, func(ctx context.Context, id string, q Act, p ledger.Params) error {
		c := ledger.ResolveFailed
		if q.As == ledger.StatusSent {
			c = ledger.ResolveSent
		}
		_, err := s.st.Transition(ctx, id, c, p)
		if c == ledger.ResolveFailed && errors.Is(err, ledger.ErrCancelPending) {
			// Cancelled, and the item is not at the destination: the cancel is done.
			p.Reason = "cancel pending; a person found the item not at the destination"
			_, err = s.st.Transition(ctx, id, ledger.SettleCancel, p)
		}
		return err
	})
}

func (s *Server) outboxRetry(ctx context.Context, req micro.Request) (any, error) {
	return s.act(ctx, req, func(Act) error { return nil }, func(ctx context.Context, id string, _ Act, p ledger.Params) error {
		_, err := s.st.Transition(ctx, id, ledger.Requeue, p)
		return err
	})
}

// outboxCancel cancels rows: those not yet sent at once, one being sent
// when its send returns, one sent deleted at the destination first
// (Config.Canceller); one still there is skipped, saying why.
func (s *Server) outboxCancel(ctx context.Context, req micro.Request) (any, error) {
	return s.act(ctx, req, func(Act) error { return nil }, func(ctx context.Context, id string, _ Act, p ledger.Params) error {
		_, err := s.cancel.CancelAs(ctx, id, p)
		return err
	})
}

// uniq is ids without repeats, in their order.
func uniq(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	out := ids[:0:0]
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}
