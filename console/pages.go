package console

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/ledger"
)

// pageTemplate is one page: the layout with its main.
type pageTemplate struct{ t *template.Template }

var funcs = template.FuncMap{
	"seg": url.PathEscape,
	"ago": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return time.Since(t).Round(time.Second).String()
	},
	"when": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"stamp": func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
	"after": func(t time.Time) string { return t.Add(time.Millisecond).UTC().Format(time.RFC3339Nano) },
	"mib":   func(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) },
	"slug":  func(s string) string { return strings.ReplaceAll(s, " ", "-") },
	// join is ids as one field: a form of one field per id is refused
	// past 10 000 fields (net/url), and an action takes 20 000.
	"join": func(ids []string) string { return strings.Join(ids, " ") },
	// sub is v showing data: a partial's view.
	"sub": func(v view, data any) view { v.Data = data; return v },
}

func parsePages() (map[string]*pageTemplate, error) {
	names, err := fs.Glob(assets, "templates/*.html")
	if err != nil {
		return nil, err
	}
	out := map[string]*pageTemplate{}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if name == "layout" || name == "partials" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/partials.html", n)
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", name, err)
		}
		out[name] = &pageTemplate{t}
	}
	return out, nil
}

// view is what every page's template gets.
type view struct {
	Prefix  string
	Session *session
	Title   string
	Live    bool // the page updates itself (console.js)
	Now     time.Time
	Data    any
}

// Operator says whether the visitor may act: pages offer actions only then.
func (v view) Operator() bool { return v.Session != nil && v.Session.Role == RoleOperator }

// render writes page with data; a request for the fragment (console.js's
// polling) gets its main only.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, page string, se *session, data any) {
	p := h.pages[page]
	v := view{Prefix: h.prefix, Session: se, Title: page, Live: slices.Contains([]string{"sites", "attention", "site", "graphs", "groups"}, page), Now: time.Now(), Data: data}
	name := "layout.html"
	if r.Header.Get("X-Console-Fragment") != "" {
		name = "main"
	}
	var buf bytes.Buffer
	if err := p.t.ExecuteTemplate(&buf, name, v); err != nil {
		h.log.Error("console: render", "page", page, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(buf.Bytes()) //nolint:errcheck // the client left
}

func (h *Handler) sitesPage(w http.ResponseWriter, r *http.Request) {
	snap, _, _ := h.watch.last()
	h.render(w, r, "sites", sessionOf(r), snap)
}

// Filter narrows the attention queue.
type Filter struct {
	Site, Kind, Stream string
}

func (f Filter) keep(it Item) bool {
	return (f.Site == "" || it.Addr.Site == f.Site || (f.Site == admin.NoSite && it.Addr.Site == "")) &&
		(f.Kind == "" || it.Kind == f.Kind) && (f.Stream == "" || it.Addr.Stream == f.Stream)
}

// Group is the queue's rows of one kind at one partition: what a bulk
// action by filter takes.
type Group struct {
	Addr  admin.Address
	Kind  string
	Count int
}

type queue struct {
	Snapshot
	Filter Filter
	Items  []Item
	Groups []Group
	Kinds  []string
	Sites  []string
}

func (h *Handler) attentionPage(w http.ResponseWriter, r *http.Request) {
	snap, _, _ := h.watch.last()
	q := r.URL.Query()
	h.render(w, r, "attention", sessionOf(r), queueOf(snap, Filter{Site: q.Get("site"), Kind: q.Get("kind"), Stream: q.Get("stream")}))
}

func queueOf(snap Snapshot, f Filter) queue {
	out := queue{Snapshot: snap, Filter: f}
	for _, it := range snap.Items {
		if !slices.Contains(out.Kinds, it.Kind) {
			out.Kinds = append(out.Kinds, it.Kind)
		}
		if s := it.Addr.Site; !slices.Contains(out.Sites, s) {
			out.Sites = append(out.Sites, s)
		}
		if !f.keep(it) {
			continue
		}
		out.Items = append(out.Items, it)
		if it.Kind != string(ledger.StatusReview) && it.Kind != string(ledger.StatusFailed) {
			continue
		}
		i := slices.IndexFunc(out.Groups, func(g Group) bool { return g.Addr == it.Addr && g.Kind == it.Kind })
		if i < 0 {
			out.Groups = append(out.Groups, Group{Addr: it.Addr, Kind: it.Kind})
			i = len(out.Groups) - 1
		}
		out.Groups[i].Count++
	}
	slices.Sort(out.Kinds)
	slices.Sort(out.Sites)
	return out
}

func (h *Handler) sitePage(w http.ResponseWriter, r *http.Request) {
	snap, _, _ := h.watch.last()
	name := r.PathValue("site")
	i := slices.IndexFunc(snap.Sites, func(s Site) bool { return s.Name == name })
	if i < 0 {
		h.notFound(w, r, fmt.Sprintf("no site %q is known now: it has no record at the hub and no run of it answers", name))
		return
	}
	q := queueOf(snap, Filter{Site: name})
	h.render(w, r, "site", sessionOf(r), struct {
		Site  Site
		Queue queue
	}{snap.Sites[i], q})
}

func (h *Handler) notFound(w http.ResponseWriter, r *http.Request, why string) {
	w.WriteHeader(http.StatusNotFound)
	h.render(w, r, "message", sessionOf(r), message{Title: "Not found", Text: why})
}

// message is a page that says one thing.
type message struct {
	Title, Text string
	Back        string
}

// addrOf is the partition the request's path names.
func addrOf(r *http.Request) admin.Address {
	site := r.PathValue("site")
	if site == admin.NoSite {
		site = ""
	}
	return admin.Address{Site: site, Stream: r.PathValue("stream"), Durable: r.PathValue("durable")}
}

// callTimeout bounds a page's own call to a run's API.
const callTimeout = 10 * time.Second

// ask calls endpoint at a for a page; on failure it answers the page with why.
func (h *Handler) ask(w http.ResponseWriter, r *http.Request, a admin.Address, endpoint string, req, resp any) bool {
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	err := admin.Call(ctx, h.opts.Conn, a, endpoint, req, resp)
	if err == nil {
		return true
	}
	status := http.StatusBadGateway
	var e *admin.Error
	if errors.As(err, &e) && e.Code == admin.CodeNotFound {
		status = http.StatusNotFound
	}
	w.WriteHeader(status)
	h.render(w, r, "message", sessionOf(r), message{Title: "The run could not answer", Text: explain(err)})
	return false
}

// explain says an API error as a person reads it.
func explain(err error) string {
	var e *admin.Error
	switch {
	case errors.Is(err, admin.ErrNoRun):
		return "No run answers for this partition now (no owner, or the site is not reachable): " + err.Error()
	case errors.As(err, &e) && e.Code == admin.CodeNotOwner:
		return "No run that owns the partition answered, only one that no longer does; the new owner may have acted since: look at the row again once the page shows it: " + e.Error()
	case errors.As(err, &e) && e.Code == admin.CodeStopping:
		return "The run that owns the partition is stopping; act again once the page shows its new owner: " + e.Error()
	case errors.As(err, &e) && e.Code == admin.CodeNotFound:
		return "No such row (gone since the page was shown?): " + e.Error()
	}
	return err.Error()
}

type rowPage struct {
	Addr    admin.Address
	Row     admin.Row
	Payload bool
}

func (h *Handler) outboxPage(w http.ResponseWriter, r *http.Request) {
	a := addrOf(r)
	var row admin.Row
	if !h.ask(w, r, a, "outbox.show", admin.OutboxShow{ID: r.PathValue("id")}, &row) {
		return
	}
	show := r.URL.Query().Get("payload") == "1"
	if !show {
		row.Payload, row.PayloadText, row.PayloadBytes = nil, "", nil
	}
	h.render(w, r, "outbox", sessionOf(r), rowPage{Addr: a, Row: row, Payload: show})
}

type dlqPage struct {
	Addr    admin.Address
	DL      ledger.DeadLetter
	Payload bool
	Text    string
}

func (h *Handler) dlqPage(w http.ResponseWriter, r *http.Request) {
	a := addrOf(r)
	var id int64
	fmt.Sscan(r.PathValue("id"), &id) //nolint:errcheck // 0: the run says not found
	var dl ledger.DeadLetter
	if !h.ask(w, r, a, "dlq.show", admin.ByID{ID: id}, &dl) {
		return
	}
	p := dlqPage{Addr: a, DL: dl, Payload: r.URL.Query().Get("payload") == "1"}
	if p.Payload {
		p.Text = string(dl.Payload)
	}
	p.DL.Payload = nil
	h.render(w, r, "dlq", sessionOf(r), p)
}

func (h *Handler) conflictPage(w http.ResponseWriter, r *http.Request) {
	a := addrOf(r)
	var id int64
	fmt.Sscan(r.PathValue("id"), &id) //nolint:errcheck // 0: the run says not found
	var c admin.Conflicts
	if !h.ask(w, r, a, "conflicts.list", nil, &c) {
		return
	}
	i := slices.IndexFunc(c.Conflicts, func(c ledger.ConflictRecord) bool { return c.ID == id })
	if i < 0 {
		h.notFound(w, r, fmt.Sprintf("no conflict %d at %s/%s", id, a.Stream, a.Durable))
		return
	}
	h.render(w, r, "conflict", sessionOf(r), struct {
		Addr     admin.Address
		Conflict ledger.ConflictRecord
	}{a, c.Conflicts[i]})
}
