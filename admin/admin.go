// Package admin is the admin API every run serves over NATS, with nats.go's
// micro framework (so `nats micro ls|info|stats` see it): one service per
// run and partition, on subjects under _JETLEDGER.admin that name the site
// (JetStream domain), the stream and the durable. Only the run that
// consumes the durable serves it (one run per durable holds its lease), so
// every answer is the owner's, from its own ledger.
//
// It answers reads (status, the outbox's rows, dead letters, conflicts,
// consumers) and takes people's actions (resolve, retry, cancel, requeue,
// discard, acknowledge, forget), each in the ledger's own write
// transaction with its record (ledger.Audit).
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/health"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// ServiceName is the micro service's name: every run's admin API has it.
const ServiceName = "jetledger"

// APIVersion is the admin API's version (semver, as micro wants): its
// endpoints and their JSON.
const APIVersion = "1.0.0"

// SubjectPrefix is where every admin subject begins: the runs' own
// subjects, which publishers cannot reach (docs/security.md).
const SubjectPrefix = "_JETLEDGER.admin"

// InboxPrefix begins the reply subject of every request the API takes
// (nats.go's default _INBOX., a role's _INBOX.operators, a context's
// _INBOX_<name>): an answer is never published anywhere else.
const InboxPrefix = "_INBOX"

// serviceImportReply begins the reply subject nats-server gives a request
// that came through a service import (an operators' account importing the
// API): its answer goes back to the importer.
const serviceImportReply = "_R_."

// gatewayReply begins the reply subject nats-server gives a request that
// crossed a gateway (another cluster of a super-cluster): it routes the
// answer back.
const gatewayReply = "_GR_."

// NoSite stands for the site of a run that is no edge (no JetStream domain).
const NoSite = "-"

// Errors a request is refused with, as micro error codes.
const (
	CodeBadRequest = "400" // the request is malformed or asks for nothing
	CodeNotFound   = "404" // no row has that id
	CodeConflict   = "409" // the row was settled before: nothing changed
	// CodeNotOwner: this run does not own the partition (now): a standby,
	// or an owner fenced by another that took the partition over. Nothing
	// changed; ask the owner.
	CodeNotOwner = "421"
	CodeFailed   = "500" // the ledger failed to answer
	// CodeStopping: the run is stopping and takes no new request; ask
	// again once the partition has an owner.
	CodeStopping = "503"
)

// Address names one run's admin API: the site, stream and durable (a
// partition's durable, <durable>-p<I>) it serves.
type Address struct {
	Site    string `json:"site"`
	Stream  string `json:"stream"`
	Durable string `json:"durable"`
	// Standby addresses the partition's standbys (Config.Standby) instead
	// of its owner: their API answers reads of their copies.
	Standby bool `json:"standby,omitempty"`
}

// Subject is the subject of endpoint at a.
func (a Address) Subject(endpoint string) string {
	return a.group() + "." + endpoint
}

func (a Address) group() string {
	site := a.Site
	if site == "" {
		site = NoSite
	}
	g := strings.Join([]string{SubjectPrefix, site, a.Stream, a.Durable}, ".")
	if a.Standby {
		g += "." + standbyToken
	}
	return g
}

// standbyToken ends a standby's group: no endpoint's group is named so.
const standbyToken = "standby"

// Config is what Serve serves.
type Config struct {
	// Conn carries the service. Required.
	Conn *nats.Conn
	// Store is the run's ledger. Required.
	Store *ledger.Store
	// Address names the API. Stream and Durable required.
	Address Address
	// Version is jetledger's, in the service's metadata.
	Version string
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// JetStream is the run's, to requeue dead letters (dlq.requeue) and
	// read a conflict's messages (conflicts.show). Without it, requeue is
	// refused and conflicts.show says where the messages are.
	JetStream jetstream.JetStream
	// Standby, when set, makes this the API of a standby's copy: served at
	// the standby address (Address.Standby), it answers reads and refuses
	// every action (CodeNotOwner) naming the partition's owner, which
	// Standby says ("" none now).
	Standby func(ctx context.Context) (owner string, err error)
	// Applied, when set, is how many messages the run has applied since it
	// started (its consumer's count): status says it, so that a watcher
	// (the console) draws throughput from the run's own counter.
	Applied func() uint64
	// Pending, when set, reads how many messages of its stream the run's
	// durable has not delivered yet (its lag): status says it.
	Pending func(ctx context.Context) (uint64, error)
	// Canceller cancels outbox rows (outbox.cancel), deleting at the
	// destination what was sent: the run's dispatcher, whose sink
	// deletes. Default: rows not yet sent are cancelled, sent ones are
	// refused as still at the destination.
	Canceller Canceller
}

// Canceller cancels an outbox row as a person's action
// (*outbox.Dispatcher).
type Canceller interface {
	CancelAs(ctx context.Context, id string, p ledger.Params) (outbox.CancelOutcome, error)
}

var _ Canceller = (*outbox.Dispatcher)(nil)

// storeCanceller cancels without a sink (outbox.CancelAs with no deleter).
type storeCanceller struct{ st *ledger.Store }

func (c storeCanceller) CancelAs(ctx context.Context, id string, p ledger.Params) (outbox.CancelOutcome, error) {
	return outbox.CancelAs(ctx, c.st, nil, id, p)
}

// Server is a run's admin API, served until Stop.
type Server struct {
	svc     micro.Service
	st      *ledger.Store
	cancel  Canceller
	js      jetstream.JetStream
	standby func(context.Context) (string, error)
	applied func() uint64
	pending func(context.Context) (uint64, error)
	addr    Address
	log     *slog.Logger

	mu       sync.Mutex
	stopping bool
	inflight sync.WaitGroup
}

// Serve starts serving cfg's admin API.
func Serve(cfg Config) (*Server, error) {
	if cfg.Conn == nil || cfg.Store == nil || cfg.Address.Stream == "" || cfg.Address.Durable == "" {
		return nil, errors.New("admin: Serve needs a connection, a ledger, a stream and a durable")
	}
	a := cfg.Address
	a.Standby = cfg.Standby != nil
	role := "owner"
	if a.Standby {
		role = "standby"
	}
	// No queue group: every run at the address gets each request and the
	// first answer wins. An owner paused after its partition was taken
	// over keeps its subscriptions until its server drops it, and would
	// otherwise be handed requests it never answers; woken, its actions
	// are fenced (ledger.ErrNotChangelogOwner).
	svc, err := micro.AddService(cfg.Conn, micro.Config{Name: ServiceName, Version: APIVersion, QueueGroupDisabled: true,
		Description: "jetledger's admin API of " + a.Stream + "/" + a.Durable,
		Metadata:    map[string]string{"site": a.Site, "stream": a.Stream, "durable": a.Durable, "role": role, "version": cfg.Version}})
	if err != nil {
		return nil, fmt.Errorf("admin: serve %s: %w", a.group(), err)
	}
	s := &Server{svc: svc, st: cfg.Store, cancel: cfg.Canceller, js: cfg.JetStream, addr: a, standby: cfg.Standby, applied: cfg.Applied, pending: cfg.Pending, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.cancel == nil {
		s.cancel = storeCanceller{cfg.Store}
	}
	g := svc.AddGroup(a.group())
	for name, h := range s.endpoints() {
		// An endpoint's name has no dots: "outbox.list" is endpoint list of
		// the group outbox, at the same subject.
		at, leaf := g, name
		if i := strings.LastIndexByte(name, '.'); i >= 0 {
			at, leaf = g.AddGroup(name[:i]), name[i+1:]
		}
		if s.standby != nil && !slices.Contains(Reads, name) {
			h = s.refuseOnStandby
		}
		if err := at.AddEndpoint(leaf, s.handle(h)); err != nil {
			svc.Stop() //nolint:errcheck // the error that matters is err
			return nil, fmt.Errorf("admin: endpoint %s: %w", name, err)
		}
	}
	// The endpoints' subscriptions at the server before Serve returns: a
	// request sent on another connection right after met no responders
	// (node's TestAViewersReplySubjectCannotActAsTheRun in CI). Cut off,
	// the client sends them again as it reconnects.
	_ = cfg.Conn.FlushTimeout(5 * time.Second)
	return s, nil
}

// Endpoints are every endpoint's name ("outbox.list": endpoint list of the
// group outbox).
var Endpoints = []string{"status", "outbox.list", "outbox.show", "outbox.resolve", "outbox.retry", "outbox.cancel",
	"dlq.list", "dlq.show", "dlq.discard", "dlq.requeue", "conflicts.list", "conflicts.show", "conflicts.ack",
	"consumers.list", "consumers.forget"}

// Reads are the endpoints that change nothing: a viewer's (node's roles).
var Reads = []string{"status", "outbox.list", "outbox.show", "dlq.list", "dlq.show",
	"conflicts.list", "conflicts.show", "consumers.list"}

// endpoints are the handlers of Endpoints.
func (s *Server) endpoints() map[string]func(context.Context, micro.Request) (any, error) {
	return map[string]func(context.Context, micro.Request) (any, error){
		"status": s.status, "outbox.list": s.outboxList, "outbox.show": s.outboxShow,
		"outbox.resolve": s.outboxResolve, "outbox.retry": s.outboxRetry, "outbox.cancel": s.outboxCancel,
		"dlq.list": s.dlqList, "dlq.show": s.dlqShow, "dlq.discard": s.dlqDiscard, "dlq.requeue": s.dlqRequeue,
		"conflicts.list": s.conflictsList, "conflicts.show": s.conflictsShow, "conflicts.ack": s.conflictsAck,
		"consumers.list": s.consumersList, "consumers.forget": s.consumersForget,
	}
}

// StopWait bounds how long Stop waits for the requests in hand: a
// person's cancel deletes at the destination within its sink's timeout.
const StopWait = 30 * time.Second

// Stop stops serving: a request arriving from now on is refused
// (CodeStopping), and the ones in hand are waited for, StopWait at the
// most, so that their changes are written and answered while the run
// still owns its ledger.
func (s *Server) Stop() error {
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
	err := s.svc.Stop()
	done := make(chan struct{})
	go func() { s.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(StopWait):
		s.log.Warn("admin API: a person's action is still in hand at the stop; its answer may be lost (list the rows again)", "waited", StopWait)
	}
	return err
}

// begin counts a request in hand, or says the server is stopping.
func (s *Server) begin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return false
	}
	s.inflight.Add(1)
	return true
}

// requestTimeout bounds the ledger's work for one request: an action on
// ActLimit rows, each its own transaction, included.
const requestTimeout = 5 * time.Minute

// handle answers a request with h's result as JSON, or its error as a
// micro error (a *Error says its code).
func (s *Server) handle(h func(context.Context, micro.Request) (any, error)) micro.HandlerFunc {
	return func(req micro.Request) {
		if r := req.Reply(); !strings.HasPrefix(r, InboxPrefix) && !strings.HasPrefix(r, serviceImportReply) && !strings.HasPrefix(r, gatewayReply) {
			// The answer would go where the client names, with the run's
			// rights: into a stream or the JetStream API. Nothing is done.
			s.log.Warn("admin API: a request whose reply subject is no inbox is not taken", "subject", req.Subject(), "reply", req.Reply())
			return
		}
		if !s.begin() {
			req.Error(CodeStopping, fmt.Sprintf("the run serving %s/%s is stopping: ask again once the partition has an owner", s.addr.Stream, s.addr.Durable), nil) //nolint:errcheck // the client times out
			return
		}
		defer s.inflight.Done()
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		defer cancel()
		out, err := h(ctx, req)
		if err != nil {
			code := CodeFailed
			var e *Error
			switch {
			case errors.As(err, &e):
				code = e.Code
			case errors.Is(err, ledger.ErrNotFound):
				code = CodeNotFound
			case errors.Is(err, ledger.ErrAlreadySettled):
				code = CodeConflict
			case errors.Is(err, ledger.ErrNotChangelogOwner) || errors.Is(err, ledger.ErrChangelogCopy):
				code = CodeNotOwner
			}
			req.Error(code, err.Error(), nil) //nolint:errcheck // the client times out
			return
		}
		if err := req.RespondJSON(out); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			// Too big for a message, say: the work is done, and the
			// client is told so rather than left to time out.
			s.log.Warn("admin API: the answer could not be sent", "subject", req.Subject(), "err", err)
			req.Error(CodeFailed, fmt.Sprintf("done, but the answer could not be sent (%v): list the rows again to see them", err), nil) //nolint:errcheck // the client times out
		}
	}
}

// Error is a refusal with its micro code.
type Error struct {
	Code string
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// badRequest refuses a request.
func badRequest(format string, a ...any) error {
	return &Error{Code: CodeBadRequest, Err: fmt.Errorf(format, a...)}
}

// decode reads req's JSON body into v; an empty body is v's zero value.
func decode(req micro.Request, v any) error {
	if len(req.Data()) == 0 {
		return nil
	}
	if err := json.Unmarshal(req.Data(), v); err != nil {
		return badRequest("the request is not the JSON this endpoint takes: %v", err)
	}
	return nil
}

// StatusRequest is the status endpoint's request (an empty body is its
// zero value). Quick leaves out the ledger's row counts, which read every
// row of a large ledger: Ledger then says the file's path and size only.
type StatusRequest struct {
	Quick bool `json:"quick,omitempty"`
}

// Status is the status endpoint's answer.
type Status struct {
	// Role is "owner", or "standby" for a standby's copy, whose Owner is
	// the partition's owner ("" none now).
	Role      string                  `json:"role"`
	Owner     string                  `json:"owner,omitempty"`
	Attention []health.Need           `json:"attention"`
	Ledger    ledger.Stats            `json:"ledger"`
	Outbox    map[ledger.Status]int64 `json:"outbox"`
	// Applied is how many messages the run has applied since it started
	// (absent from a standby's and a run's that does not say).
	Applied uint64 `json:"applied,omitempty"`
	// Pending is how many messages the durable has not delivered yet (nil
	// when the run does not say, or could not read it).
	Pending *uint64 `json:"pending,omitempty"`
}

func (s *Server) status(ctx context.Context, req micro.Request) (any, error) {
	var q StatusRequest
	if err := decode(req, &q); err != nil {
		return nil, err
	}
	as, err := s.st.Attention(ctx)
	if err != nil {
		return nil, err
	}
	stats := ledger.Stats{Path: s.st.Path()}
	if q.Quick {
		stats.SizeBytes, err = s.st.Size(ctx)
	} else {
		stats, err = s.st.Stats(ctx)
	}
	if err != nil {
		return nil, err
	}
	counts, err := s.st.OutboxCounts(ctx)
	if err != nil {
		return nil, err
	}
	needs := health.LedgerNeeds(as, "")
	if needs == nil {
		needs = []health.Need{}
	}
	out := Status{Role: "owner", Attention: needs, Ledger: stats, Outbox: counts}
	if s.applied != nil {
		out.Applied = s.applied()
	}
	if s.pending != nil {
		if n, err := s.pending(ctx); err == nil {
			out.Pending = &n
		}
	}
	if s.standby != nil {
		out.Role = "standby"
		out.Owner, _ = s.standby(ctx) // "" when it cannot be read: the counts stand
	}
	return out, nil
}

// refuseOnStandby refuses an action asked of a standby's API, naming the
// owner and where its API is.
func (s *Server) refuseOnStandby(ctx context.Context, _ micro.Request) (any, error) {
	owner, err := s.standby(ctx)
	who := "no run owns the partition now"
	switch {
	case err != nil:
		who = fmt.Sprintf("who owns it could not be read (%v)", err)
	case owner != "":
		who = "its owner is " + owner
	}
	at := s.addr
	at.Standby = false
	return nil, &Error{Code: CodeNotOwner, Err: fmt.Errorf("this is a standby's copy of %s/%s, which takes no action: %s; act through the owner's API at %s",
		s.addr.Stream, s.addr.Durable, who, at.group())}
}
