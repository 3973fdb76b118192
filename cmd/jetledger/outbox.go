package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/internal/adminctl"
	"github.com/jetledger/jetledger/internal/table"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
)

// outboxCmd is `jetledger outbox`: inspect and operate the outbox of
// external side effects.
type outboxCmd struct {
	dbFlag
	jsonFlag
	List    outboxListCmd    `cmd:"" help:"rows, oldest first, with status, attempts, external id and the last error"`
	Show    outboxShowCmd    `cmd:"" help:"one row with its payload decoded (JSON, text or base64) and what people did to it"`
	Review  outboxReviewCmd  `cmd:"" help:"rows whose send has an unknown outcome, waiting for a person"`
	Cancel  outboxCancelCmd  `cmd:"" help:"cancel a row; an item that may be at the destination is deleted there first (--webhook-delete-url)"`
	Resolve outboxResolveCmd `cmd:"" help:"settle a row in review after checking the destination: --as sent --external-id X, or --as failed"`
	Retry   outboxRetryCmd   `cmd:"" help:"put a failed row back in the queue; a running run sends it again with the same key"`
}

func (outboxCmd) Help() string {
	return `Each subcommand prints what it did (--json for machines) and exits 1 when
the row's state does not allow the change, naming that state. With --nats (or
--context) it acts through the admin API of the run that owns the ledger,
wherever it runs (--site, --api-stream, --partition, --durable choose the run
when several answer), each action recorded with --who; resolve, retry and
cancel then take several ids, or --status (and --before) for every row in it:
the count first, acted on only with --all, rows changed meanwhile skipped
(exit 1, each said).`
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

// list prints the rows l asks for, oldest first, from the ledger or the API.
func (o *outboxCmd) list(inv *invocation, a apiFlags, l ledger.Listing) error {
	header := []string{"ID", "STATUS", "MESSAGE ID", "SINK", "ATTEMPTS", "EXTERNAL ID", "SENT TO", "UPDATED", "ERROR"}
	row := func(it admin.Row) []string {
		return []string{it.ID, string(it.Status), it.MessageID, it.Sink, fmt.Sprint(it.Attempts),
			it.ExternalID, sentTo(it.SentTo), it.UpdatedAt.Format(time.RFC3339), it.Error}
	}
	if !a.remote() { // JSON with the payloads decoded
		fetch := func(st *ledger.Store) ([]admin.Row, error) {
			items, err := st.ListOutbox(inv.ctx, l.Status, l.Limit)
			rows := make([]admin.Row, len(items))
			for i, it := range items {
				rows[i] = admin.RowOf(it, true)
			}
			return rows, err
		}
		return listRows(inv, o.dbFlag, o.JSON, l, fetch, header, row)
	}
	return a.with(inv, func(nc *nats.Conn, addr admin.Address) error {
		items, err := adminctl.Outbox(inv.ctx, nc, addr, l.Status, cmp.Or(min(l.Limit, admin.ListLimitMax), admin.ListLimitMax))
		if err != nil {
			return err
		}
		return table.Print(inv.stdout, o.JSON, items, header, row)
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
	apiFlags
	limitFlag
	Status string `name:"status" values:"queued,sending,sent,failed,review,cancelled,suppressed" help:"only rows in this status: queued, sending, sent, failed, review, cancelled or suppressed"`
}

func (c *outboxListCmd) Run(inv *invocation, o *outboxCmd) error {
	return o.list(inv, c.apiFlags, ledger.Listing{Status: ledger.Status(c.Status), Limit: c.Limit})
}

type outboxReviewCmd struct {
	apiFlags
	limitFlag
}

func (c *outboxReviewCmd) Run(inv *invocation, o *outboxCmd) error {
	return o.list(inv, c.apiFlags, ledger.Listing{Status: ledger.StatusReview, Limit: c.Limit})
}

// outboxRow are the rows a change takes: ids (one with --db), or with
// --nats every row in --status.
type outboxRow struct {
	apiFlags
	IDs    []string `arg:"" optional:"" name:"id" help:"the rows' ids, which are also their idempotency keys (one with --db)"`
	Status string   `name:"status" group:"api" values:",queued,failed,review,sent,sending" default:"" help:"with --nats, instead of ids: every row in this status (the count first; --all acts)"`
	Before string   `name:"before" group:"api" placeholder:"TIME" help:"with --status: only rows last changed before this time (2026-12-01 or RFC 3339)"`
	All    bool     `name:"all" group:"api" help:"with --status: act on the rows counted"`
	Note   string   `name:"note" group:"api" help:"with --nats: why, recorded with the action"`
}

// each runs the change of one row locally, or the action through the API.
func (r outboxRow) each(inv *invocation, o *outboxCmd, endpoint string, q admin.Act, local func(id string) error) error {
	if r.remote() {
		before, err := adminctl.ParseTime(r.Before, "--before")
		if err != nil || len(r.IDs) == 0 && r.Status == "" {
			return usagef("%v", cmp.Or(err, errors.New("give the rows' ids, or --status")))
		}
		q.IDs, q.Status, q.Before, q.Note = r.IDs, ledger.Status(r.Status), before, r.Note
		return r.bulk(inv, o.JSON, adminctl.Bulk{Endpoint: "outbox." + endpoint, Verb: endpoint, All: r.All, Act: q})
	}
	if len(r.IDs) != 1 || r.Status != "" || r.All {
		return usagef("with --db, one row's id: several, --status and --all act through the admin API (--nats)")
	}
	return local(r.IDs[0])
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
--webhook-lookup-url does not find the item either; else exit 1, row
unchanged. A delete that may have deleted (a timeout, a 5xx): exit 1, the row
in review with its cancel pending, for a lookup or a person.`
}

func (c *outboxCancelCmd) Run(inv *invocation, o *outboxCmd) error {
	s, err := deleteSink(c.Webhook)
	if err != nil {
		return err
	}
	return c.each(inv, o, "cancel", admin.Act{}, func(id string) error {
		return o.change(inv, "cancel", id, func(st *ledger.Store) (string, error) { return cancelOutbox(inv.ctx, st, s, id) })
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
	return c.each(inv, o, "resolve", admin.Act{As: ledger.Status(c.As), ExternalID: c.ExternalID}, func(id string) error {
		return o.change(inv, "resolve", id, func(st *ledger.Store) (string, error) {
			it, err := st.Resolve(inv.ctx, id, ledger.Status(c.As), c.ExternalID)
			if err != nil || string(it.Status) == c.As {
				return "resolved as " + c.As, err
			}
			// A row whose cancel was pending ends cancelled, not failed:
			// say what it is now.
			return "resolved: " + string(it.Status) + " (its cancel was pending)", nil
		})
	})
}

type outboxRetryCmd struct {
	outboxRow
}

func (c *outboxRetryCmd) Run(inv *invocation, o *outboxCmd) error {
	return c.each(inv, o, "retry", admin.Act{}, func(id string) error {
		return o.change(inv, "retry", id, func(st *ledger.Store) (string, error) {
			return "queued again; a running 'jetledger run' with the sink will send it", st.Retry(inv.ctx, id)
		})
	})
}

type outboxShowCmd struct {
	apiFlags
	ID string `arg:"" name:"id" help:"the row's id"`
}

func (c *outboxShowCmd) Run(inv *invocation, o *outboxCmd) error {
	if c.remote() {
		return c.with(inv, func(nc *nats.Conn, addr admin.Address) error {
			return adminctl.Show(inv.ctx, nc, addr, "outbox.show", admin.OutboxShow{ID: c.ID}, inv.stdout)
		})
	}
	return o.withStore(func(st *ledger.Store) error {
		r, err := admin.ShowRow(inv.ctx, st, c.ID)
		if err != nil {
			return err
		}
		return adminctl.Print(inv.stdout, r)
	})
}
