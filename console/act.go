package console

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/stream"
)

// actions are what a person may do, by the admin endpoint that does it,
// with what the confirmation says will happen.
var actions = map[string]string{
	"outbox.resolve-sent":   "marked sent: the destination has them (give its id); nothing is sent again",
	"outbox.resolve-failed": "marked failed, as not at the destination: nothing is sent until someone retries it",
	"outbox.retry":          "queued to be sent again with the same idempotency key, as soon as a worker is free",
	"outbox.cancel":         "cancelled: one not yet sent is never sent; one sent is DELETED AT THE DESTINATION first (a row whose delete fails stays as it is, and the result says why); one being sent is cancelled when its send returns",
	"dlq.requeue":           "published again to its stream, to be applied anew; its dead-letter record is closed",
	"dlq.discard":           "discarded: the message is never applied; its record is closed",
	"conflicts.ack":         "acknowledged: the ledger keeps the first content, and the conflict leaves the queue",
}

// request is an action's form: the partition, the action, and its rows
// (ids, or every row in a status), with when the page showed them.
type request struct {
	Addr       admin.Address
	Action     string
	IDs        []string
	Status     ledger.Status
	Seen       time.Time
	ExternalID string
	Note       string
	// Row is the one row's status, for a confirmation that must say what
	// happens to it (a sent row cancelled is deleted at the destination).
	Row ledger.Status
}

func requestOf(r *http.Request) (request, error) {
	q := request{Addr: admin.Address{Site: r.PostFormValue("site"), Stream: r.PostFormValue("stream"), Durable: r.PostFormValue("durable")},
		Action: r.PostFormValue("action"), IDs: append(r.PostForm["id"], strings.Fields(r.PostFormValue("ids"))...), Status: ledger.Status(r.PostFormValue("status")),
		ExternalID: r.PostFormValue("external_id"), Note: r.PostFormValue("note")}
	if q.Addr.Site == admin.NoSite {
		q.Addr.Site = ""
	}
	if _, ok := actions[q.Action]; !ok {
		return q, fmt.Errorf("no action %q", q.Action)
	}
	if q.Status != "" && !slices.Contains(ledger.Statuses, q.Status) {
		return q, fmt.Errorf("status %q: want one of %v", q.Status, ledger.Statuses)
	}
	if strings.ContainsAny(q.Addr.Site, ". *>\t\r\n") {
		return q, fmt.Errorf("%q cannot name a site (no '.', '*', '>' or spaces)", q.Addr.Site)
	}
	for _, n := range []struct{ what, name string }{{"stream", q.Addr.Stream}, {"durable", q.Addr.Durable}} {
		if n.name != "" {
			if err := stream.CheckName(n.what, n.name); err != nil {
				return q, err
			}
		}
	}
	if s := r.PostFormValue("seen"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return q, fmt.Errorf("seen %q: %v", s, err)
		}
		q.Seen = t
	}
	if q.Addr.Stream == "" || q.Addr.Durable == "" || (len(q.IDs) == 0 && q.Status == "") {
		return q, fmt.Errorf("the form names no partition or no rows")
	}
	if !q.outboxAction() {
		if len(q.IDs) != 1 || q.Status != "" {
			return q, fmt.Errorf("%s takes one row by its id, not %d ids or a status", q.Action, len(q.IDs))
		}
		if _, err := strconv.ParseInt(q.IDs[0], 10, 64); err != nil {
			return q, fmt.Errorf("%s: id %q is not a number", q.Action, q.IDs[0])
		}
	}
	if len(q.IDs) > admin.ActLimit {
		return q, fmt.Errorf("%d rows: an action takes %d at the most", len(q.IDs), admin.ActLimit)
	}
	return q, nil
}

// endpoint is the admin endpoint of q's action, and its Act.
func (q request) endpoint(dry bool, name string) (string, admin.Act) {
	a := admin.Act{IDs: q.IDs, Seen: q.Seen, Who: name, Note: q.Note, DryRun: dry}
	if len(q.IDs) == 0 {
		a.Status = q.Status
	}
	switch q.Action {
	case "outbox.resolve-sent":
		a.As, a.ExternalID = ledger.StatusSent, q.ExternalID
		return "outbox.resolve", a
	case "outbox.resolve-failed":
		a.As = ledger.StatusFailed
		return "outbox.resolve", a
	}
	return q.Action, a
}

// outboxAction says whether q acts on outbox rows (by the Act request,
// with a dry run first).
func (q request) outboxAction() bool {
	return strings.HasPrefix(q.Action, "outbox.")
}

type confirmPage struct {
	request
	Will    string
	Matched int
	Problem string
}

// confirm says what an action will do and to how many rows (a dry run),
// and asks for the go-ahead.
func (h *Handler) confirm(w http.ResponseWriter, r *http.Request) {
	q, err := requestOf(r)
	if err != nil {
		h.badForm(w, r, err)
		return
	}
	p := confirmPage{request: q, Will: actions[q.Action], Matched: len(q.IDs)}
	if q.outboxAction() {
		ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
		defer cancel()
		endpoint, a := q.endpoint(true, sessionOf(r).Name)
		var dry admin.Acted
		if err := admin.Call(ctx, h.opts.Conn, q.Addr, endpoint, a, &dry); err != nil {
			p.Problem = explain(err)
		}
		p.Matched = dry.Matched
		if len(q.IDs) == 0 { // by filter: act on exactly the rows counted, as they were when counted
			p.IDs, p.Seen = dry.IDs, dry.Seen
		}
		if len(q.IDs) == 1 && q.Action == "outbox.cancel" {
			var row admin.Row
			if admin.Call(ctx, h.opts.Conn, q.Addr, "outbox.show", admin.OutboxShow{ID: q.IDs[0]}, &row) == nil {
				p.Row = row.Status
			}
		}
	}
	h.render(w, r, "confirm", sessionOf(r), p)
}

func (h *Handler) badForm(w http.ResponseWriter, r *http.Request, err error) {
	w.WriteHeader(http.StatusBadRequest)
	h.render(w, r, "message", sessionOf(r), message{Title: "Nothing done", Text: "The form is not one the console takes: " + err.Error()})
}

type resultPage struct {
	request
	Acted   admin.Acted
	Problem string
}

// act does the action confirmed, as the signed-in user, and says what was
// done and what was left (a row changed since it was shown is left).
func (h *Handler) act(w http.ResponseWriter, r *http.Request) {
	q, err := requestOf(r)
	if err != nil {
		h.badForm(w, r, err)
		return
	}
	se := sessionOf(r)
	from := "console, client " + r.RemoteAddr
	// A row's action is the owner's within its sink's timeout (a cancel
	// deletes); a filter's, on up to ActLimit rows, takes longer.
	wait := time.Minute
	if len(q.IDs) > 1 {
		wait = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	p := resultPage{request: q, Acted: admin.Acted{Done: []string{}, Skipped: []admin.Skip{}}}
	if q.outboxAction() {
		if q.Seen.IsZero() {
			h.badForm(w, r, fmt.Errorf("no seen: confirm the action again"))
			return
		}
		endpoint, a := q.endpoint(false, se.Name)
		err = admin.CallFrom(ctx, h.opts.Conn, q.Addr, endpoint, from, a, &p.Acted)
	} else {
		id, _ := strconv.ParseInt(q.IDs[0], 10, 64)
		err = admin.CallFrom(ctx, h.opts.Conn, q.Addr, q.Action, from, admin.ByID{ID: id, Who: se.Name, Note: q.Note}, nil)
		if err == nil {
			p.Acted.Matched, p.Acted.Done = 1, q.IDs[:1]
		}
	}
	if err != nil {
		p.Problem = explain(err)
		w.WriteHeader(http.StatusConflict)
	}
	h.log.Info("console: action", "who", se.Name, "action", q.Action, "stream", q.Addr.Stream, "durable", q.Addr.Durable,
		"done", len(p.Acted.Done), "skipped", p.Acted.SkippedCount, "err", err)
	h.watch.refreshSoon()
	h.render(w, r, "result", se, p)
}
