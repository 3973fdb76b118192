package fleet

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The states of a site in List, worst first.
const (
	// StateMismatch: the record under a site's key names another site, or
	// none, or the key is no site's domain: a misconfigured or forged
	// reporter, whose record cannot be taken as the site's.
	StateMismatch  = "mismatch"
	StateOffline   = "offline"   // no record for longer than ListConfig.Stale
	StateAttention = "attention" // review rows, dead letters, conflicts or a disk short of space
	StateBehind    = "behind"    // lagging, or running another version
	StateOK        = "ok"
)

// Defaults of ListConfig.
const (
	StaleDefault   = time.Minute
	LowDiskDefault = 256 << 20
	LagDefault     = 1000
)

// ListConfig says when a site needs a person. The zero value is the
// defaults.
type ListConfig struct {
	// Stale: a site whose last record the hub stored longer ago than this
	// is offline. Default StaleDefault.
	Stale time.Duration
	// LowDisk: less free than this on the ledger's or the store's disk
	// needs a person. Default LowDiskDefault.
	LowDisk int64
	// Lag: more of the hub's messages not yet copied, or of the copy not
	// yet applied, than this is behind. Default LagDefault.
	Lag uint64
	// Version, when set, is the release sites should run; another is
	// behind. Default "": not checked.
	Version string
}

// Status is a site as List sees it.
type Status struct {
	// Site is the key the record is stored under in Bucket: the site the
	// key belongs to. Never the record's own Record.Site, which whoever
	// wrote the key chose (in JSON, this "site" hides that one).
	Site string `json:"site"`
	Record
	// RecordSite is the site the record says it is (its Record.Site; ""
	// when it names none or is not JSON). One other than Site, or a Site
	// that is no domain, is StateMismatch.
	RecordSite string `json:"record_site"`
	// Age is how long ago the hub stored the record, by the hub's clock.
	Age   time.Duration `json:"age"`
	State string        `json:"state"`
	// Why says what makes the state, one reason each.
	Why []string `json:"why,omitempty"`
	// Attention says whether a person is needed (mismatch, offline or
	// attention).
	Attention bool `json:"attention"`
}

// List reads every site's record from the hub's bucket, over js (a client
// of the hub), and says each one's state, worst first, then by site.
func List(ctx context.Context, js jetstream.JetStream, cfg ListConfig) ([]Status, error) {
	if cfg.Stale < 0 || cfg.LowDisk < 0 {
		return nil, fmt.Errorf("%w: Stale %s, LowDisk %d: want 0 (the default) or more", ErrInvalidConfig, cfg.Stale, cfg.LowDisk)
	}
	kv, err := js.KeyValue(ctx, Bucket)
	if err != nil {
		return nil, fmt.Errorf("fleet: the bucket %s: %w (jetledger hub --domain <site> makes it)", Bucket, err)
	}
	keys, err := kv.Keys(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, fmt.Errorf("fleet: the bucket %s: %w", Bucket, err)
	}
	out := []Status{}
	for _, k := range keys {
		e, err := kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("fleet: the record of %s: %w", k, err)
		}
		out = append(out, judge(k, e.Value(), time.Since(e.Created()), cfg))
	}
	slices.SortFunc(out, func(a, b Status) int {
		// Of one state, the site whose need has waited longest first.
		return cmp.Or(cmp.Compare(rank(a.State), rank(b.State)), compareWaited(a.oldestNeed(), b.oldestNeed()),
			-cmp.Compare(len(a.Why), len(b.Why)), strings.Compare(a.Site, b.Site))
	})
	return out, nil
}

// compareWaited orders the earlier of two times first, and a zero (no
// need) last.
func compareWaited(a, b time.Time) int {
	if a.IsZero() || b.IsZero() {
		return cmp.Compare(boolInt(a.IsZero()), boolInt(b.IsZero()))
	}
	return a.Compare(b)
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func rank(state string) int {
	return slices.Index([]string{StateMismatch, StateOffline, StateAttention, StateBehind, StateOK}, state)
}

// judge is the state of the site key, whose record value the hub stored
// age ago. The row is the key's: a record naming another site is judged
// as it stands and flagged, so that it can neither pass for that site nor
// take this one out of the list.
func judge(key string, value []byte, age time.Duration, cfg ListConfig) Status {
	stale, low, lag := cmp.Or(cfg.Stale, StaleDefault), cmp.Or(cfg.LowDisk, LowDiskDefault), cmp.Or(cfg.Lag, LagDefault)
	s := Status{Site: key, Age: age, State: StateOK}
	need := func(state, why string, args ...any) {
		s.Why = append(s.Why, fmt.Sprintf(why, args...))
		if rank(state) < rank(s.State) {
			s.State = state
		}
	}
	if err := json.Unmarshal(value, &s.Record); err != nil {
		s.Record = Record{LedgerFree: -1, StoreFree: -1}
		need(StateAttention, "its record is not JSON: %s", err)
	} else if why := claimWrong(key, s.Record.Site); why != "" {
		need(StateMismatch, "%s", why)
	}
	r := s.Record
	s.RecordSite = r.Site
	if age > stale {
		need(StateOffline, "no record for %s (its link: %s)", age.Round(time.Second), linkWord(r.Link))
	}
	for _, p := range r.Problems {
		need(StateAttention, "%s", p)
	}
	for _, n := range r.Attention {
		n.Where, n.Do = "", "" // the site's own paths and commands: the row names the site
		need(StateAttention, "%s", n.Text(time.Now()))
	}
	if r.Attention == nil { // an edge of an earlier version: its counts
		if r.Review > 0 {
			need(StateAttention, "%d outbox rows in review", r.Review)
		}
		if r.DeadLetters > 0 {
			need(StateAttention, "%d dead letters", r.DeadLetters)
		}
		if r.Conflicts > 0 {
			need(StateAttention, "%d conflicts", r.Conflicts)
		}
	}
	for _, d := range []struct {
		what string
		free int64
	}{{"ledger", r.LedgerFree}, {"store", r.StoreFree}} {
		if d.free >= 0 && d.free < low {
			need(StateAttention, "%d MiB free on the %s's disk", d.free>>20, d.what)
		}
	}
	if r.Link.Lag > lag || r.Pending > lag {
		need(StateBehind, "behind: %d not yet copied, %d not yet applied", r.Link.Lag, r.Pending)
	}
	if cfg.Version != "" && r.Version != cfg.Version && !strings.Contains(r.Version, " "+cfg.Version+" ") {
		need(StateBehind, "runs %s, not %s", cmp.Or(r.Version, "an unknown version"), cfg.Version)
	}
	s.Attention = rank(s.State) <= rank(StateAttention)
	return s
}

// claimWrong says why a record naming site cannot be the own record of
// the site whose key it is under, "" when it can. Every release's
// Reporter keys its record by its Site and names it in the record, so
// any other record was put there by something else, or by a reporter
// configured for another site.
func claimWrong(key, site string) string {
	switch {
	case !validName.MatchString(key):
		return fmt.Sprintf("the key %q is no site's JetStream domain: a misconfigured or forged reporter", key)
	case site == "":
		return fmt.Sprintf("the record under key %s names no site: a misconfigured or forged reporter", key)
	case site != key:
		return fmt.Sprintf("the record under key %s claims to be site %s: a misconfigured or forged reporter", key, site)
	}
	return ""
}

func linkWord(l Link) string {
	switch {
	case !l.Leaf:
		return "none"
	case l.Up:
		return "up"
	case l.Refused:
		return "refused"
	}
	return "down"
}

// WriteTable writes sites as a table, one line each, worst first as List
// sorts them.
func WriteTable(w io.Writer, sites []Status) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SITE\tSTATE\tSEEN\tVERSION\tLINK\tAPPLIED\tPENDING\tLAG\tREVIEW\tDEAD\tWHY")
	for _, s := range sites {
		fmt.Fprintf(tw, "%s\t%s\t%s ago\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", s.Site, s.State, s.Age.Round(time.Second), cmp.Or(s.Version, "?"), linkWord(s.Link),
			s.AppliedSeq, s.Pending, s.Link.Lag, s.Review, s.DeadLetters, strings.Join(s.Why, "; "))
	}
	return tw.Flush()
}

// NeedPerson is an error saying how many of sites need a person, nil if
// none does.
func NeedPerson(sites []Status) error {
	need := 0
	for _, s := range sites {
		if s.Attention {
			need++
		}
	}
	if need == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d sites need a person", need, len(sites))
}
