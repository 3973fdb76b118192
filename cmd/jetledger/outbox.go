package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

// outboxCmd is `jetledger outbox`: inspect and operate the outbox of
// external side effects.
type outboxCmd struct {
	dbFlag
	jsonFlag
	List    outboxListCmd    `cmd:"" help:"rows, oldest first, with status, attempts, external id and the last error"`
	Review  outboxReviewCmd  `cmd:"" help:"rows whose send has an unknown outcome, waiting for a person"`
	Cancel  outboxCancelCmd  `cmd:"" help:"cancel a row; an item that may be at the destination is deleted there first (--webhook-delete-url)"`
	Resolve outboxResolveCmd `cmd:"" help:"settle a row in review after checking the destination: --as sent --external-id X, or --as failed"`
	Retry   outboxRetryCmd   `cmd:"" help:"put a failed row back in the queue; a running run sends it again with the same key"`
}

func (outboxCmd) Help() string {
	return `Each subcommand prints what it did (--json for machines) and exits 1 when
the row's state does not allow the change, naming that state.`
}

// report prints what was done to row id, and its state now.
func (o *outboxCmd) report(inv *invocation, st *ledger.Store, id, did string) error {
	it, err := st.Get(inv.ctx, id)
	if err != nil {
		return err
	}
	if o.JSON {
		return json.NewEncoder(inv.stdout).Encode(map[string]any{"result": did, "row": it})
	}
	fmt.Fprintf(inv.stdout, "%s: %s (now %s)\n", it.ID, did, it.Status)
	return nil
}

// change runs f, a change of row id that says what it did, and reports it;
// a change the row's state does not allow is said in the command's words,
// naming that state.
func (o *outboxCmd) change(inv *invocation, verb, id string, f func(*ledger.Store) (string, error)) error {
	if id == "" {
		return usagef("the row's id is required (see 'outbox list')")
	}
	return o.withStore(func(st *ledger.Store) error {
		did, err := f(st)
		var se *ledger.StateError
		if errors.As(err, &se) && errors.Is(err, ledger.ErrIllegalTransition) {
			return fmt.Errorf("cannot %s %s: it is %s (%w)", verb, id, se.Status, ledger.ErrIllegalTransition)
		}
		if err != nil {
			return err
		}
		return o.report(inv, st, id, did)
	})
}

// list prints the rows l asks for, oldest first.
func (o *outboxCmd) list(inv *invocation, l ledger.Listing) error {
	fetch := func(st *ledger.Store) ([]ledger.OutboxItem, error) { return st.ListOutbox(inv.ctx, l.Status, l.Limit) }
	return listRows(inv, o.dbFlag, o.JSON, l, fetch, []string{"ID", "STATUS", "MESSAGE ID", "SINK", "ATTEMPTS", "EXTERNAL ID", "SENT TO", "UPDATED", "ERROR"},
		func(it ledger.OutboxItem) []string {
			return []string{it.ID, string(it.Status), it.MessageID, it.Sink, fmt.Sprint(it.Attempts),
				it.ExternalID, sentTo(it.SentTo), it.UpdatedAt.Format(time.RFC3339), it.Error}
		})
}

// sentTo shows where a row's sends went, as its sink named it (a stream:
// name@creation in unix ns, after its last sequence before the first send).
func sentTo(d ledger.Destination) string {
	if d.Instance == "" {
		return ""
	}
	return fmt.Sprintf("%s after %d", d.Instance, d.Position)
}

type outboxListCmd struct {
	limitFlag
	Status string `name:"status" values:"queued,sending,sent,failed,review,cancelled,suppressed" help:"only rows in this status: queued, sending, sent, failed, review, cancelled or suppressed"`
}

func (c *outboxListCmd) Run(inv *invocation, o *outboxCmd) error {
	return o.list(inv, ledger.Listing{Status: ledger.Status(c.Status), Limit: c.Limit})
}

type outboxReviewCmd struct {
	limitFlag
}

func (c *outboxReviewCmd) Run(inv *invocation, o *outboxCmd) error {
	return o.list(inv, ledger.Listing{Status: ledger.StatusReview, Limit: c.Limit})
}

// outboxRow is the argument of the commands that change one row.
type outboxRow struct {
	ID string `arg:"" name:"id" help:"the row's id, which is also its idempotency key"`
}

type outboxCancelCmd struct {
	outboxRow
	Webhook webhookDelete `embed:"" group:"webhook"`
}

func (outboxCancelCmd) Help() string {
	return `queued/failed: cancelled, nothing was sent. sending: too late, already
sending, so the row is marked cancelled and the item is deleted at the
destination when the send returns (review if that fails). sent/review with an
external id: deleted at the destination (--webhook-delete-url) first,
cancelled only after the destination said it deleted it (2xx). A 404 is also
what a server without the route answers, so it counts as gone only when
--webhook-lookup-url does not find the item either; otherwise exit 1 saying
the item may still be at the destination, row unchanged.`
}

func (c *outboxCancelCmd) Run(inv *invocation, o *outboxCmd) error {
	s, err := deleteSink(c.Webhook)
	if err != nil {
		return err
	}
	return o.change(inv, "cancel", c.ID, func(st *ledger.Store) (string, error) {
		return cancelOutbox(inv.ctx, st, s, c.ID)
	})
}

type outboxResolveCmd struct {
	outboxRow
	As         string `name:"as" placeholder:"sent|failed" values:"sent,failed" help:"sent or failed (required)"`
	ExternalID string `name:"external-id" help:"the destination's id for the item (required with --as sent)"`
}

func (c *outboxResolveCmd) Run(inv *invocation, o *outboxCmd) error {
	if err := (ledger.Resolution{As: ledger.Status(c.As), ExternalID: c.ExternalID, Names: ledgerNames}).Check(); err != nil {
		return configUsage(err)
	}
	return o.change(inv, "resolve", c.ID, func(st *ledger.Store) (string, error) {
		it, err := st.Resolve(inv.ctx, c.ID, ledger.Status(c.As), c.ExternalID)
		if err != nil || string(it.Status) == c.As {
			return "resolved as " + c.As, err
		}
		// A row whose cancel was pending ends cancelled, not failed: say
		// what it is now.
		return "resolved: " + string(it.Status) + " (its cancel was pending)", nil
	})
}

type outboxRetryCmd struct {
	outboxRow
}

func (c *outboxRetryCmd) Run(inv *invocation, o *outboxCmd) error {
	return o.change(inv, "retry", c.ID, func(st *ledger.Store) (string, error) {
		return "queued again; a running 'jetledger run' with the sink will send it", st.Retry(inv.ctx, c.ID)
	})
}
