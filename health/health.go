package health

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

// The states a Handler reports per check. Anyone who can reach the port
// reads them, so they say what is wrong, not where: the error, with its
// paths, goes to the log when a check's state changes.
const (
	StateOK           = "ok"
	StateNotConnected = "not_connected" // nats: the client is reconnecting
	StateUnavailable  = "unavailable"   // consumer: its info could not be read
	StateReadOnly     = "read_only"     // the file or its directory cannot be written
	StateDiskFull     = "disk_full"     // less than 1 MiB free on the disk
	StateAtMaxSize    = "at_max_size"   // database: at its maximum size
	StateWriteFailed  = "write_failed"  // store: the server failed a write and keeps the failure until restarted
	StateLinkDown     = "link_down"     // hub: an edge's leaf link is down; degraded, not unhealthy (the edge works on)
	StateAttention    = "attention"     // something needs a person (Report.Attention says what); healthy
	StateFailed       = "failed"        // any other error
)

// States are every state a Handler reports.
var States = []string{StateOK, StateNotConnected, StateUnavailable, StateReadOnly,
	StateDiskFull, StateAtMaxSize, StateWriteFailed, StateLinkDown, StateAttention, StateFailed}

// Defaults of Config.
const (
	// RefreshDefault is how long a round of checks answers: a prober
	// asking often costs one round, not one per request (the database
	// check reads the filesystem, the consumer's asks the server).
	RefreshDefault = 2 * time.Second
	// ProbeTimeoutDefault bounds each probe of a round.
	ProbeTimeoutDefault = 3 * time.Second
)

// Config configures a Handler. The zero value is the defaults.
type Config struct {
	// Refresh is how long the last round of checks answers requests
	// before a request runs them again. Default RefreshDefault (2s).
	Refresh time.Duration
	// ProbeTimeout bounds each probe's check. Default
	// ProbeTimeoutDefault (3s).
	ProbeTimeout time.Duration
	// Logger gets a line when a check's state changes, with its error.
	// Default slog.Default().
	Logger *slog.Logger
}

// Probe is one check: Check returns nil when healthy, else an error whose
// sentinel (errors.Is) StateOf maps to the reported state.
type Probe struct {
	Name  string
	Check func(context.Context) error
}

// Report is the body a Handler answers.
type Report struct {
	Healthy bool `json:"healthy"`
	// Degraded: a check that degrades rather than fails is failing (the
	// hub link of an edge): the process does its work and stays healthy.
	Degraded bool              `json:"degraded,omitempty"`
	Checks   map[string]string `json:"checks"`
	// Attention is what needs a person, from the probes that said so
	// (an *AttentionError); none while nothing does.
	Attention []Need `json:"attention,omitempty"`
}

// Need is one kind of thing that needs a person: how many, since when the
// oldest has, and what to do (a command or the page to read).
type Need struct {
	Kind   string    `json:"kind"`
	Count  int64     `json:"count"`
	Oldest time.Time `json:"oldest,omitzero"`
	Where  string    `json:"where,omitempty"` // the ledger or part it is in, where several are read (status)
	Do     string    `json:"do,omitempty"`
}

// Text says the need in one line: how many of what, where, for how
// long, and what to do.
func (n Need) Text(now time.Time) string {
	s := fmt.Sprintf("%d %s", n.Count, cmp.Or(kindWords[n.Kind], strings.ReplaceAll(n.Kind, "_", " ")))
	if n.Where != "" {
		s += " in " + n.Where
	}
	if !n.Oldest.IsZero() {
		s += ", the oldest for " + now.Sub(n.Oldest).Round(time.Second).String()
	}
	if n.Do != "" {
		s += ": " + n.Do
	}
	return s
}

// kindWords say the kinds of ledger.Attention as a count's noun.
var kindWords = map[string]string{ledger.AttentionReview: "outbox rows in review", ledger.AttentionDeadLetter: "dead letters",
	ledger.AttentionConflict: "conflicts not acknowledged", ledger.AttentionNearCap: "ledger near its size cap"}

// LedgerNeeds are the needs of a ledger's rows (ledger.Store.Attention),
// the kinds that have some, in where.
func LedgerNeeds(as []ledger.Attention, where string) []Need {
	var needs []Need
	for _, a := range as {
		if a.Count > 0 {
			needs = append(needs, Need{Kind: a.Kind, Count: a.Count, Oldest: a.Oldest, Where: where, Do: LedgerDo[a.Kind]})
		}
	}
	return needs
}

// AttentionError is a probe's answer when something needs a person: the
// process is healthy, and Needs say what.
type AttentionError struct{ Needs []Need }

func (e *AttentionError) Error() string {
	s := "needs a person:"
	for _, n := range e.Needs {
		s += fmt.Sprintf(" %d %s", n.Count, n.Kind)
	}
	return s
}

func (e *AttentionError) Is(target error) bool { return target == ErrAttention }

// Handler serves the last round of its probes as JSON (200 when all are
// healthy, 503 otherwise), run again when it is older than Config.Refresh.
type Handler struct {
	probes  []Probe
	refresh time.Duration
	timeout time.Duration
	log     *slog.Logger

	mu     sync.Mutex
	at     time.Time
	report Report
}

// New validates cfg and the probes and returns a Handler; it runs no
// probe until the first request.
func New(cfg Config, probes ...Probe) (*Handler, error) {
	if cfg.Refresh < 0 || cfg.ProbeTimeout < 0 {
		return nil, fmt.Errorf("%w: Refresh %v, ProbeTimeout %v: want 0 (default) or more", ErrInvalidConfig, cfg.Refresh, cfg.ProbeTimeout)
	}
	seen := map[string]bool{}
	for _, p := range probes {
		if p.Name == "" || p.Check == nil || seen[p.Name] {
			return nil, fmt.Errorf("%w: probe %q: want a unique name and a check", ErrInvalidConfig, p.Name)
		}
		seen[p.Name] = true
	}
	return &Handler{probes: probes, refresh: cmp.Or(cfg.Refresh, RefreshDefault),
		timeout: cmp.Or(cfg.ProbeTimeout, ProbeTimeoutDefault), log: cmp.Or(cfg.Logger, slog.Default())}, nil
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rep := h.Current(r.Context())
	w.Header().Set("Content-Type", "application/json")
	if !rep.Healthy {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	json.NewEncoder(w).Encode(rep) //nolint:errcheck // client gone
}

// Current returns the last report, after a new round of checks if it is
// stale; a state that changed is logged with its error. The probes run
// under ctx's values but not its cancellation, each within ProbeTimeout.
func (h *Handler) Current(ctx context.Context) Report {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.at.IsZero() && time.Since(h.at) < h.refresh {
		return h.report
	}
	rep := Report{Healthy: true, Checks: make(map[string]string, len(h.probes))}
	for _, p := range h.probes {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.timeout)
		err := p.Check(pctx)
		cancel()
		state := StateOf(err)
		rep.Checks[p.Name] = state
		var need *AttentionError
		switch {
		case errors.As(err, &need):
			rep.Attention = append(rep.Attention, need.Needs...)
		case errors.Is(err, ErrLinkDown):
			rep.Degraded = true
		default:
			rep.Healthy = rep.Healthy && err == nil
		}
		if was := h.report.Checks[p.Name]; was != state && (was != "" || err != nil) {
			if errors.Is(err, ErrAttention) {
				h.log.WarnContext(ctx, "something needs a person", "check", p.Name, "was", was, "needs", err)
			} else if err != nil {
				h.log.WarnContext(ctx, "health check failing", "check", p.Name, "state", state, "was", was, "err", err)
			} else {
				h.log.InfoContext(ctx, "health check ok again", "check", p.Name, "was", was)
			}
		}
	}
	h.report, h.at = rep, time.Now()
	return rep
}

// StateOf is the state an error of a probe stands for.
func StateOf(err error) string {
	switch {
	case err == nil:
		return StateOK
	case errors.Is(err, ErrWriteFailed):
		return StateWriteFailed
	case errors.Is(err, ErrLinkDown):
		return StateLinkDown
	case errors.Is(err, ErrAttention):
		return StateAttention
	case errors.Is(err, ErrNotConnected):
		return StateNotConnected
	case errors.Is(err, ErrConsumerUnavailable):
		return StateUnavailable
	case errors.Is(err, ledger.ErrAtMaxSize):
		return StateAtMaxSize
	case errors.Is(err, ledger.ErrFull):
		return StateDiskFull
	case errors.Is(err, ledger.ErrReadOnly):
		return StateReadOnly
	}
	return StateFailed
}
