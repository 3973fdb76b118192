// Package console is jetledger's web console: an http.Handler over the
// admin API (package admin) that a Go program mounts under a prefix, and
// that `jetledger console` serves. It shows every site and partition its
// NATS connection reaches (the runs' admin APIs, found by micro's
// discovery, and the sites' records in a hub's fleet bucket), worst first;
// the attention queue across all of them; a row's detail, its payload
// hidden until asked for; and graphs of throughput, lag and attention
// over the hours the console has watched. A signed-in operator acts on a
// row or on a filter, after a confirmation that says what will happen;
// every action is the owner's, in its write transaction, and audited with
// the signed-in name.
//
// Pages are rendered on the server (html/template); the assets are
// embedded, so `go install` gives the whole console.
package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/jetledger/jetledger/fleet"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

//go:embed templates/*.html static/*
var assets embed.FS

// Defaults of Options.
const (
	RefreshDefault = 10 * time.Second
	HistoryDefault = 6 * time.Hour
	DiscoverWait   = 3 * time.Second
	SessionTTL     = 12 * time.Hour
)

// Options configure a Handler.
type Options struct {
	// Conn reaches the runs' admin APIs (and, at a hub, the fleet bucket):
	// what its permissions reach is what the console shows. Required.
	Conn *nats.Conn
	// JetStream reads the fleet bucket of the sites' records (fleet.Bucket);
	// default jetstream.New(Conn). No bucket: no fleet records shown.
	JetStream jetstream.JetStream
	// Users sign in (LoadUsers). Nil: no sign-in, every visitor is an
	// operator named Anonymous; serve it on loopback only (`jetledger
	// console` refuses anything else).
	Users *Users
	// Prefix the handler is mounted under ("/console"); "" or "/" for the root.
	Prefix string
	// Secure marks the session cookie Secure: set it when served over TLS.
	Secure bool
	// Refresh is how often the sites and the queue are read again
	// (RefreshDefault); History how long their samples are kept for the
	// graphs (HistoryDefault).
	Refresh, History time.Duration
	// Fleet judges the sites' records (fleet.List).
	Fleet fleet.ListConfig
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// Anonymous is who acts when the console has no sign-in.
const Anonymous = "console (no sign-in)"

// Handler is the console. Start it before serving: it reads the sites in
// the background.
type Handler struct {
	opts   Options
	prefix string
	mux    *http.ServeMux
	log    *slog.Logger
	pages  map[string]*pageTemplate
	sess   *sessions
	failed failures
	watch  *watcher
	csrf   *http.CrossOriginProtection
	start  sync.Once
}

// NewHandler makes a console with opts.
func NewHandler(opts *Options) (*Handler, error) {
	if opts == nil || opts.Conn == nil {
		return nil, errors.New("console: NewHandler needs Options with a NATS connection")
	}
	o := *opts
	if o.Refresh < 0 || o.History < 0 {
		return nil, fmt.Errorf("console: Refresh %s, History %s: want 0 (the default) or more", o.Refresh, o.History)
	}
	if o.Refresh == 0 {
		o.Refresh = RefreshDefault
	}
	if o.History == 0 {
		o.History = HistoryDefault
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.JetStream == nil {
		js, err := jetstream.New(o.Conn)
		if err != nil {
			return nil, fmt.Errorf("console: %w", err)
		}
		o.JetStream = js
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	h := &Handler{opts: o, prefix: NormalizePrefix(o.Prefix), log: o.Logger, pages: pages,
		sess: newSessions(o.Users == nil), csrf: http.NewCrossOriginProtection()}
	h.watch = newWatcher(o, h.log)
	h.routes()
	return h, nil
}

// Start reads the sites now and every Refresh until ctx ends.
func (h *Handler) Start(ctx context.Context) {
	h.start.Do(func() { go h.watch.run(ctx) })
}

// Refresh reads the sites and the queue now, and returns when done.
func (h *Handler) Refresh(ctx context.Context) { h.watch.refresh(ctx) }

// NormalizePrefix is p as a mount prefix: "" for the root, else with a
// leading slash and no trailing one.
func NormalizePrefix(p string) string {
	p = strings.TrimRight(p, "/")
	if p == "" {
		return ""
	}
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return p
}

// cleanPath is p without . and .. elements and repeated slashes, keeping
// a trailing slash, as ServeMux cleans it.
func cleanPath(p string) string {
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c
}

// ServeHTTP serves the console under its prefix.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	if h.prefix != "" {
		if path == h.prefix {
			http.Redirect(w, r, h.prefix+"/", http.StatusMovedPermanently)
			return
		}
		rest, ok := strings.CutPrefix(path, h.prefix+"/")
		if !ok {
			http.NotFound(w, r)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + rest
		// An escaped path (a %2F in a name) keeps its escapes, as
		// http.StripPrefix does; the prefix itself has none to cut.
		rawRest, ok := strings.CutPrefix(r.URL.RawPath, h.prefix+"/")
		if !ok {
			rawRest = ""
		}
		r2.URL.RawPath = "/" + rawRest
		if rawRest == "" {
			r2.URL.RawPath = ""
		}
		r = r2
	}
	// ServeMux would redirect an unclean path to its clean form without the
	// prefix; done here, the redirect keeps it.
	if clean := cleanPath(r.URL.Path); clean != r.URL.Path {
		u := *r.URL
		u.Path, u.RawPath = h.prefix+clean, ""
		http.Redirect(w, r, u.RequestURI(), http.StatusMovedPermanently)
		return
	}
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
	w.Header().Set("Referrer-Policy", "same-origin")
	h.csrf.Handler(h.mux).ServeHTTP(w, r)
}

func (h *Handler) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(assets, "static")
	m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	m.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) }) //nolint:errcheck // the client left
	m.HandleFunc("GET /signin", h.signInPage)
	m.HandleFunc("POST /signin", h.signIn)
	m.HandleFunc("POST /signout", h.signed(h.signOut))
	m.HandleFunc("GET /{$}", h.signed(h.sitesPage))
	m.HandleFunc("GET /attention", h.signed(h.attentionPage))
	m.HandleFunc("GET /site/{site}", h.signed(h.sitePage))
	m.HandleFunc("GET /graphs", h.signed(h.graphsPage))
	m.HandleFunc("GET /groups", h.signed(h.groupsPage))
	m.HandleFunc("GET /outbox/{site}/{stream}/{durable}/{id}", h.signed(h.outboxPage))
	m.HandleFunc("GET /dlq/{site}/{stream}/{durable}/{id}", h.signed(h.dlqPage))
	m.HandleFunc("GET /conflict/{site}/{stream}/{durable}/{id}", h.signed(h.conflictPage))
	m.HandleFunc("POST /confirm", h.signed(h.operator(h.confirm)))
	m.HandleFunc("POST /act", h.signed(h.operator(h.act)))
	h.mux = m
}
