package admin

import (
	"context"

	"github.com/jetledger/jetledger/ledger"
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
