package console

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/fleet"
	"github.com/jetledger/jetledger/health"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// Part is a partition (or a run's one durable) as the console sees it: its
// owner's status, and how many standbys answered.
type Part struct {
	admin.Address
	Owner    bool // its owner's API answered
	Standbys int
	Version  string
	Status   admin.Status // the owner's, when Owner
	Err      string       // why the status could not be read
	// Gone, when set, is when the partition's runs last answered: none
	// answers now (a run stopped, its host down), and Status is as it
	// was then.
	Gone time.Time
}

// State is the part's state: "no owner", "attention", "error" or "ok".
func (p Part) State() string {
	switch {
	case !p.Gone.IsZero():
		return "not answering"
	case !p.Owner:
		return "no owner"
	case p.Err != "":
		return "error"
	case len(p.Status.Attention) > 0:
		return "attention"
	}
	return "ok"
}

// Site is a site (a JetStream domain; admin.NoSite for runs of no edge):
// its record at the hub, if any, and its partitions.
type Site struct {
	Name  string
	Fleet *fleet.Status
	Parts []Part
	State string
	Why   []string
}

// Item is one entry of the attention queue: an outbox row in review or
// failed, a dead letter, a conflict not acknowledged, or a need with no
// row to act on (a site offline, a partition with no owner, a ledger near
// its cap).
type Item struct {
	Kind    string // review, failed, dead_letter, conflict, or a need's kind
	Addr    admin.Address
	ID      string // the row's id; "" for a need
	What    string
	Since   time.Time
	Updated time.Time // the row's, by its ledger's clock: what "seen" is
	// Stale, when set, is when the row was read last: its partition's runs
	// have not answered since, and it may have changed.
	Stale time.Time
}

// Snapshot is what the console read last.
type Snapshot struct {
	At       time.Time
	Sites    []Site
	Items    []Item
	Problems []string
}

// sample is one point of the graphs.
type sample struct {
	At                  time.Time
	Applied, Sites      int64 // the runs' applied counters, the sites' applied sequences
	Lag, Attention, Row int64
}

// watcher reads the sites every Refresh and keeps the last snapshot and
// the samples of History.
type watcher struct {
	o   Options
	log *slog.Logger

	mu      sync.Mutex
	snap    Snapshot
	samples []sample
	gen     uint64
	kick    chan struct{}
	// seen are the partitions that answered within History, as they did
	// last: one that stops answering stays shown, and its rows' needs too.
	seen map[admin.Address]seenPart
}

// seenPart is a partition as it answered last, and its rows then.
type seenPart struct {
	part  Part
	items []Item
	at    time.Time
}

func newWatcher(o Options, log *slog.Logger) *watcher {
	return &watcher{o: o, log: log, kick: make(chan struct{}, 1), seen: map[admin.Address]seenPart{}}
}

// refreshSoon has the sites read again now, not at the next tick: an
// action changed them.
func (w *watcher) refreshSoon() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

func (w *watcher) run(ctx context.Context) {
	t := time.NewTicker(w.o.Refresh)
	defer t.Stop()
	for {
		w.refresh(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-w.kick:
		}
	}
}

func (w *watcher) last() (Snapshot, []sample, uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.snap, slices.Clone(w.samples), w.gen
}

// refresh reads every run's status and the sites' records, then the rows
// of each part that has some needing a person.
func (w *watcher) refresh(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, DiscoverWait+time.Minute)
	defer cancel()
	snap := Snapshot{At: time.Now()}
	found, err := admin.Discover(ctx, w.o.Conn, DiscoverWait)
	if err != nil {
		snap.Problems = append(snap.Problems, err.Error())
	}
	parts := partsOf(found)
	readAll(ctx, parts, func(p *Part) {
		// Quick: the row counts would read every row of a large ledger each Refresh.
		cctx, cancel := context.WithTimeout(ctx, readTimeout)
		defer cancel()
		if err := admin.Call(cctx, w.o.Conn, p.Address, "status", admin.StatusRequest{Quick: true}, &p.Status); err != nil {
			p.Err = err.Error()
		}
	})
	parts = w.remember(parts, snap.At)
	recs, err := fleet.List(ctx, w.o.JetStream, w.o.Fleet)
	if err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
		snap.Problems = append(snap.Problems, err.Error())
	}
	snap.Sites = sitesOf(parts, recs)
	snap.Items = w.items(ctx, snap.Sites)
	w.rememberItems(snap.Items, snap.At)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.snap = snap
	w.gen++
	w.samples = append(w.samples, sampleOf(snap))
	for len(w.samples) > 0 && snap.At.Sub(w.samples[0].At) > w.o.History {
		w.samples = w.samples[1:]
	}
}

// readTimeout bounds each of a refresh's calls: a run that takes a
// request and never answers (paused, its disk stuck) costs the others no
// more than this.
const readTimeout = 5 * time.Second

// readAll runs read on each part whose owner answered, eight at a time.
func readAll(ctx context.Context, parts []Part, read func(*Part)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range parts {
		if !parts[i].Owner || !parts[i].Gone.IsZero() {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if ctx.Err() == nil {
				read(&parts[i])
			}
		}()
	}
	wg.Wait()
}

// remember keeps each part that answers, and adds to parts those that
// answered within History and do not now, as they were (Gone).
func (w *watcher) remember(parts []Part, now time.Time) []Part {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range parts {
		if p.Owner || p.Standbys > 0 {
			sp := w.seen[p.Address]
			sp.part, sp.at = p, now
			w.seen[p.Address] = sp
		}
	}
	for a, sp := range w.seen {
		switch {
		case now.Sub(sp.at) > w.o.History:
			delete(w.seen, a)
		case sp.at.Before(now) && !slices.ContainsFunc(parts, func(p Part) bool { return p.Address == a }):
			gone := sp.part
			gone.Gone, gone.Err = sp.at, ""
			parts = append(parts, gone)
		}
	}
	return parts
}

// rememberItems keeps the rows of each part that answered now.
func (w *watcher) rememberItems(items []Item, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	by := map[admin.Address][]Item{}
	for _, it := range items {
		if it.Stale.IsZero() {
			by[it.Addr] = append(by[it.Addr], it)
		}
	}
	for a, sp := range w.seen {
		if sp.at.Equal(now) {
			sp.items = by[a]
			w.seen[a] = sp
		}
	}
}

// staleItems are the rows a part that no longer answers had when it last
// did, marked as of then.
func (w *watcher) staleItems(p Part) []Item {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []Item
	for _, it := range w.seen[p.Address].items {
		it.Stale = p.Gone
		out = append(out, it)
	}
	return out
}

// partsOf gathers the APIs found into parts: one per site, stream and durable.
func partsOf(found []admin.Found) []Part {
	var parts []Part
	for _, f := range found {
		a := f.Address
		a.Standby = false
		i := slices.IndexFunc(parts, func(p Part) bool { return p.Address == a })
		if i < 0 {
			parts = append(parts, Part{Address: a})
			i = len(parts) - 1
		}
		if f.Role == "standby" {
			parts[i].Standbys++
			continue
		}
		parts[i].Owner, parts[i].Version = true, f.Version
	}
	return parts
}

// sitesOf groups parts by site with the sites' records, worst first.
func sitesOf(parts []Part, recs []fleet.Status) []Site {
	var sites []Site
	at := func(name string) *Site {
		i := slices.IndexFunc(sites, func(s Site) bool { return s.Name == name })
		if i < 0 {
			sites = append(sites, Site{Name: name})
			i = len(sites) - 1
		}
		return &sites[i]
	}
	for i := range recs {
		at(recs[i].Site).Fleet = &recs[i]
	}
	for _, p := range parts {
		s := at(cmp.Or(p.Site, admin.NoSite))
		s.Parts = append(s.Parts, p)
	}
	for i := range sites {
		sites[i].State, sites[i].Why = judge(sites[i])
	}
	slices.SortFunc(sites, func(a, b Site) int {
		return cmp.Or(cmp.Compare(rank(a.State), rank(b.State)), -cmp.Compare(len(a.Why), len(b.Why)), strings.Compare(a.Name, b.Name))
	})
	return sites
}

// States of a site, worst first.
var states = []string{fleet.StateMismatch, fleet.StateOffline, "not answering", "no owner", "error", fleet.StateAttention, fleet.StateBehind, fleet.StateOK}

func rank(state string) int { return slices.Index(states, state) }

// judge is a site's worst state, from its record and its parts, and why.
func judge(s Site) (string, []string) {
	state, why := fleet.StateOK, []string(nil)
	worse := func(st, reason string) {
		if rank(st) < rank(state) {
			state = st
		}
		why = append(why, reason)
	}
	if s.Fleet != nil && s.Fleet.State != fleet.StateOK {
		reasons := s.Fleet.Why
		if len(reasons) == 0 {
			reasons = []string{s.Fleet.State}
		}
		for _, r := range reasons { // as the site reported them, up to a minute ago
			worse(s.Fleet.State, "its record at the hub: "+r)
		}
	}
	for _, p := range s.Parts {
		switch st := p.State(); st {
		case "no owner":
			worse(st, fmt.Sprintf("%s/%s: no run owns it now (only %d standby answered)", p.Stream, p.Durable, p.Standbys))
		case "not answering":
			worse(st, fmt.Sprintf("%s/%s: no run of it has answered since %s", p.Stream, p.Durable, p.Gone.UTC().Format(time.TimeOnly)))
		case "error":
			worse(st, fmt.Sprintf("%s/%s: %s", p.Stream, p.Durable, p.Err))
		case "attention":
			for _, n := range p.Status.Attention {
				worse(fleet.StateAttention, fmt.Sprintf("%s/%s: %s", p.Stream, p.Durable, n.Text(time.Now())))
			}
		}
	}
	return state, why
}

// sampleOf sums a snapshot for the graphs.
func sampleOf(s Snapshot) sample {
	out := sample{At: s.At, Row: int64(len(s.Items))}
	for _, site := range s.Sites {
		if r := site.Fleet; r != nil {
			out.Sites += int64(r.AppliedSeq)
			out.Lag += int64(r.Pending) + int64(r.Link.Lag)
		}
		for _, p := range site.Parts {
			if !p.Gone.IsZero() {
				continue // as it was: no sample of now
			}
			out.Applied += int64(p.Status.Applied)
			if n := p.Status.Pending; n != nil {
				out.Lag += int64(*n)
			}
			for _, n := range p.Status.Attention {
				out.Attention += n.Count
			}
		}
	}
	return out
}

// needKinds are the kinds of attention whose rows the queue lists.
var rowKinds = map[string]bool{ledger.AttentionReview: true, ledger.AttentionDeadLetter: true, ledger.AttentionConflict: true}

// items lists what needs a person: the rows of each part that has some,
// and the needs no row stands for.
func (w *watcher) items(ctx context.Context, sites []Site) []Item {
	var mu sync.Mutex
	var out []Item
	add := func(it ...Item) {
		mu.Lock()
		defer mu.Unlock()
		out = append(out, it...)
	}
	var all []Part
	for _, s := range sites {
		if s.Fleet != nil && (s.Fleet.State == fleet.StateOffline || s.Fleet.State == fleet.StateMismatch) {
			add(Item{Kind: s.Fleet.State, Addr: admin.Address{Site: s.Name}, What: strings.Join(s.Fleet.Why, "; "), Since: s.Fleet.At})
		}
		for _, p := range s.Parts {
			switch {
			case !p.Gone.IsZero():
				add(Item{Kind: "not_answering", Addr: p.Address, Since: p.Gone,
					What: "no run of the partition answers (stopped, or its host down): its rows below are as they were when it last answered"})
				add(w.staleItems(p)...)
				continue
			case !p.Owner:
				add(Item{Kind: "no_owner", Addr: p.Address, What: "no run owns the partition now: its standbys wait for the lease, or every host is down"})
			}
			for _, n := range p.Status.Attention {
				if !rowKinds[n.Kind] {
					add(Item{Kind: n.Kind, Addr: p.Address, What: n.Text(time.Now()), Since: n.Oldest})
				}
			}
		}
		all = append(all, s.Parts...)
	}
	readAll(ctx, all, func(p *Part) { add(w.rowsOf(ctx, *p)...) }) // all sites' at once: one slow site delays no other
	slices.SortFunc(out, func(a, b Item) int {
		return cmp.Or(compareSince(a.Since, b.Since), strings.Compare(a.Addr.Site, b.Addr.Site), strings.Compare(a.ID, b.ID))
	})
	return out
}

func compareSince(a, b time.Time) int {
	if a.IsZero() != b.IsZero() {
		if a.IsZero() {
			return 1
		}
		return -1
	}
	return a.Compare(b)
}

// rowsOf lists p's rows that need a person, each kind only when its
// status counts some.
func (w *watcher) rowsOf(ctx context.Context, p Part) []Item {
	ctx, cancel := context.WithTimeout(ctx, 2*readTimeout)
	defer cancel()
	var out []Item
	has := func(kind string) bool {
		return slices.ContainsFunc(p.Status.Attention, func(n health.Need) bool { return n.Kind == kind && n.Count > 0 })
	}
	for _, st := range []ledger.Status{ledger.StatusReview, ledger.StatusFailed} {
		if p.Status.Outbox[st] == 0 {
			continue
		}
		var rows admin.Rows
		if err := admin.Call(ctx, w.o.Conn, p.Address, "outbox.list", admin.OutboxList{Status: st, Limit: admin.ListLimitMax}, &rows); err != nil {
			out = append(out, Item{Kind: "error", Addr: p.Address, What: err.Error()})
			continue
		}
		for _, r := range rows.Rows {
			out = append(out, Item{Kind: string(st), Addr: p.Address, ID: r.ID, Since: r.UpdatedAt, Updated: r.UpdatedAt,
				What: fmt.Sprintf("%s to %s after %d attempts: %s", r.MessageID, r.Sink, r.Attempts, r.Error)})
		}
	}
	if has(ledger.AttentionDeadLetter) {
		var dls admin.DeadLetters
		if err := admin.Call(ctx, w.o.Conn, p.Address, "dlq.list", nil, &dls); err != nil {
			out = append(out, Item{Kind: "error", Addr: p.Address, What: err.Error()})
		}
		for _, d := range dls.DeadLetters {
			out = append(out, Item{Kind: ledger.AttentionDeadLetter, Addr: p.Address, ID: fmt.Sprint(d.ID), Since: d.CreatedAt,
				What: fmt.Sprintf("%s seq %d (%s): %s", d.Stream, d.Sequence, d.Subject, d.Reason)})
		}
	}
	if has(ledger.AttentionConflict) {
		var cs admin.Conflicts
		if err := admin.Call(ctx, w.o.Conn, p.Address, "conflicts.list", nil, &cs); err != nil {
			out = append(out, Item{Kind: "error", Addr: p.Address, What: err.Error()})
		}
		for _, c := range cs.Conflicts {
			if c.Acknowledged.IsZero() {
				out = append(out, Item{Kind: ledger.AttentionConflict, Addr: p.Address, ID: fmt.Sprint(c.ID), Since: c.SeenAt,
					What: fmt.Sprintf("id %s seen again with other content at %s seq %d", c.MessageID, c.Stream, c.Sequence)})
			}
		}
	}
	return out
}
