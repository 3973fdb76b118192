package admin

import (
	"context"
	"errors"
	"fmt"

	"github.com/jetledger/jetledger/consumer/requeue"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// DeadLetters is dlq.list's answer (payloads left out: dlq.show has them).
type DeadLetters struct {
	DeadLetters []ledger.DeadLetter `json:"dead_letters"`
}

// ByID is the request of an endpoint on one row by its numeric id
// (dlq.show), or of an action on it (dlq.discard, conflicts.ack: Who
// required, Note recorded).
type ByID struct {
	ID   int64  `json:"id"`
	Who  string `json:"who,omitempty"`
	Note string `json:"note,omitempty"`
}

// dlqList lists the oldest ListLimitMax dead letters.
func (s *Server) dlqList(ctx context.Context, _ micro.Request) (any, error) {
	dls, err := s.st.DeadLetters(ctx, ListLimitMax)
	if err != nil {
		return nil, err
	}
	for i := range dls {
		dls[i].Payload = nil
	}
	return DeadLetters{DeadLetters: dls}, nil
}

func (s *Server) dlqShow(ctx context.Context, req micro.Request) (any, error) {
	q, err := byID(req, false)
	if err != nil {
		return nil, err
	}
	return s.st.DeadLetter(ctx, q.ID)
}

func (s *Server) dlqDiscard(ctx context.Context, req micro.Request) (any, error) {
	q, err := byID(req, true)
	if err != nil {
		return nil, err
	}
	err = s.st.DiscardDeadLetterAs(ctx, q.ID, &ledger.Audit{Who: q.Who, From: origin(req), Note: q.Note})
	return struct{}{}, err
}

// Conflicts is conflicts.list's answer.
type Conflicts struct {
	Conflicts []ledger.ConflictRecord `json:"conflicts"`
}

// conflictsList lists the oldest ListLimitMax conflicts, acknowledged or not.
func (s *Server) conflictsList(ctx context.Context, _ micro.Request) (any, error) {
	cs, err := s.st.Conflicts(ctx, ListLimitMax)
	return Conflicts{Conflicts: cs}, err
}

func (s *Server) conflictsAck(ctx context.Context, req micro.Request) (any, error) {
	q, err := byID(req, true)
	if err != nil {
		return nil, err
	}
	err = s.st.AcknowledgeConflict(ctx, q.ID, ledger.Audit{Who: q.Who, From: origin(req), Note: q.Note})
	return struct{}{}, err
}

// byID reads a ByID request; an action's needs its who.
func byID(req micro.Request, action bool) (ByID, error) {
	var q ByID
	if err := decode(req, &q); err != nil {
		return q, err
	}
	switch {
	case q.ID <= 0:
		return q, badRequest("no id: this endpoint takes {\"id\": <the row's id>}")
	case action && q.Who == "":
		return q, badRequest("no who: every action is recorded with who took it")
	}
	return q, nil
}

// Requeued is dlq.requeue's answer: where the copy is (requeue.Result).
type Requeued struct {
	ID        int64  `json:"id"`
	MessageID string `json:"message_id"`
	Stream    string `json:"stream"`
	Seq       uint64 `json:"stream_seq"`
	// Via is where the copy was published when that is another stream
	// (an edge's hub's); Earlier: an earlier requeue's copy arrived.
	Via     string `json:"via,omitempty"`
	Earlier bool   `json:"earlier,omitempty"`
}

// dlqRequeue republishes a dead letter with its Nats-Msg-Id into its
// stream, then removes it (package requeue), recorded as the caller's.
func (s *Server) dlqRequeue(ctx context.Context, req micro.Request) (any, error) {
	q, err := byID(req, true)
	if err != nil {
		return nil, err
	}
	if s.js == nil {
		return nil, &Error{Code: CodeConflict, Err: errors.New("this API has no JetStream to requeue through: requeue with the CLI")}
	}
	d, err := s.st.DeadLetter(ctx, q.ID)
	if err != nil {
		return nil, err
	}
	r, err := requeue.Requeue(ctx, s.js, s.st, d, requeue.Config{Logger: s.log,
		Audit: &ledger.Audit{Who: q.Who, From: origin(req), Note: q.Note}})
	var re *requeue.Error
	switch {
	case errors.As(err, &re):
		if say := re.SayCommand(nil, d.MessageID); say != "" {
			err = fmt.Errorf("%w: %s", err, say)
		}
		return nil, &Error{Code: CodeConflict, Err: fmt.Errorf("dead letter %d is kept: %w", q.ID, err)}
	case errors.Is(err, requeue.ErrNoMsgID) || errors.Is(err, requeue.ErrStillInWindow) || errors.Is(err, requeue.ErrNotArrived):
		return nil, &Error{Code: CodeConflict, Err: fmt.Errorf("dead letter %d is kept: %w", q.ID, err)}
	case err != nil:
		return nil, err
	}
	return RequeuedOf(q.ID, d, r), nil
}

// RequeuedOf is what requeuing dead letter d (id) did, as the API says it.
func RequeuedOf(id int64, d ledger.DeadLetter, r requeue.Result) Requeued {
	out := Requeued{ID: id, MessageID: d.MessageID, Stream: d.Stream, Seq: r.Seq, Earlier: r.Earlier}
	if r.Via.Stream != d.Stream {
		out.Via = fmt.Sprintf("%s seq %d", r.Via.Stream, r.Via.Sequence)
	}
	return out
}

// String says it for a person.
func (r Requeued) String() string {
	switch {
	case r.Earlier:
		return fmt.Sprintf("dead letter %d: an earlier requeue's copy with its id %s reached %s seq %d; dead letter removed", r.ID, r.MessageID, r.Stream, r.Seq)
	case r.Via != "":
		return fmt.Sprintf("dead letter %d requeued as %s with its original id %s, sourced into %s seq %d", r.ID, r.Via, r.MessageID, r.Stream, r.Seq)
	}
	return fmt.Sprintf("dead letter %d requeued as %s seq %d with its original id %s", r.ID, r.Stream, r.Seq, r.MessageID)
}

// ConflictShown is conflicts.show's answer: the conflict, and the two
// messages that share its id, each as the stream still holds it or why it
// cannot be shown.
type ConflictShown struct {
	Conflict ledger.ConflictRecord `json:"conflict"`
	Applied  Copy                  `json:"applied"`
	Refused  Copy                  `json:"refused"`
	// History is what people did to it.
	History []ledger.AuditRecord `json:"history,omitempty"`
}

// Copy is one message of a conflict: where it is and, while its stream
// holds it there, its payload decoded; Missing says why it is not shown.
type Copy struct {
	Stream   string `json:"stream,omitempty"`
	Sequence uint64 `json:"stream_seq,omitempty"`
	Subject  string `json:"subject,omitempty"`
	Decoded
	Missing string `json:"missing,omitempty"`
}

func (s *Server) conflictsShow(ctx context.Context, req micro.Request) (any, error) {
	q, err := byID(req, false)
	if err != nil {
		return nil, err
	}
	c, applied, ok, err := s.st.Conflict(ctx, q.ID)
	if err != nil {
		return nil, err
	}
	out := ConflictShown{Conflict: c, Refused: s.copyOf(ctx, c.MessageID, c.Stream, c.Sequence, c.Subject)}
	if out.History, err = s.st.AuditOf(ctx, fmt.Sprintf("conflict %d", c.ID)); err != nil {
		return nil, err
	}
	if !ok {
		out.Applied = Copy{Missing: "the ledger no longer holds the id (pruned), so where it was applied from is not known"}
	} else {
		out.Applied = s.copyOf(ctx, c.MessageID, applied.Stream, applied.Sequence, applied.Subject)
	}
	return out, nil
}

// copyOf reads message id at seq of stream, as a Copy.
func (s *Server) copyOf(ctx context.Context, id, stream string, seq uint64, subject string) Copy {
	c := Copy{Stream: stream, Sequence: seq, Subject: subject}
	if s.js == nil {
		c.Missing = "this API has no JetStream to read it through"
		return c
	}
	st, err := s.js.Stream(ctx, stream)
	if err != nil {
		c.Missing = fmt.Sprintf("stream %s cannot be read: %v", stream, err)
		return c
	}
	m, err := st.GetMsg(ctx, seq)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		c.Missing = fmt.Sprintf("stream %s no longer holds seq %d (its limits removed it, or it was deleted)", stream, seq)
	case err != nil:
		c.Missing = fmt.Sprintf("stream %s seq %d cannot be read: %v", stream, seq, err)
	case m.Header.Get(jetstream.MsgIDHeader) != id:
		c.Missing = fmt.Sprintf("stream %s seq %d holds another message now (the stream was made again)", stream, seq)
	default:
		c.Decoded = decoded(m.Data)
	}
	return c
}

// Consumers is consumers.list's answer: every stream and durable the
// ledger served (ledger.Store.Consumers).
type Consumers struct {
	Consumers []ledger.Consumer `json:"consumers"`
}

func (s *Server) consumersList(ctx context.Context, _ micro.Request) (any, error) {
	cs, err := s.st.Consumers(ctx)
	return Consumers{Consumers: cs}, err
}

// Forget is consumers.forget's request: a stream and durable the ledger
// served once, and no longer does.
type Forget struct {
	Stream  string `json:"stream"`
	Durable string `json:"durable"`
	Who     string `json:"who"`
	Note    string `json:"note,omitempty"`
}

// consumersForget forgets a durable the ledger once served; never the one
// this API's run serves.
func (s *Server) consumersForget(ctx context.Context, req micro.Request) (any, error) {
	var q Forget
	if err := decode(req, &q); err != nil {
		return nil, err
	}
	switch {
	case q.Stream == "" || q.Durable == "":
		return nil, badRequest("no stream or no durable: consumers.forget takes {\"stream\": ..., \"durable\": ..., \"who\": ...}")
	case q.Who == "":
		return nil, badRequest("no who: every action is recorded with who took it")
	case q.Stream == s.addr.Stream && q.Durable == s.addr.Durable:
		return nil, &Error{Code: CodeConflict, Err: fmt.Errorf("%s/%s is the consumer this run serves: it is remembered again at once; forget only one the ledger no longer serves", q.Stream, q.Durable)}
	}
	return struct{}{}, s.st.ForgetConsumer(ctx, q.Stream, q.Durable, &ledger.Audit{Who: q.Who, From: origin(req), Note: q.Note})
}
