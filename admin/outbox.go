package admin

import (
	"context"
	"encoding/json"
	"unicode/utf8"

	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/micro"
)

// ListLimitDefault and ListLimitMax bound outbox.list's rows.
const (
	ListLimitDefault = 100
	ListLimitMax     = 1000
)

// OutboxList is outbox.list's request: rows in Status ("" any), oldest
// first, at most Limit (default ListLimitDefault, at most ListLimitMax).
type OutboxList struct {
	Status ledger.Status `json:"status,omitempty"`
	Limit  int           `json:"limit,omitempty"`
}

// Rows is outbox.list's answer; payloads are left out (outbox.show has
// them: a payload may hold personal data).
type Rows struct {
	Rows []Row `json:"rows"`
}

// Row is an outbox row as the API says it: its payload decoded, as JSON
// when it is JSON, else as text when it is UTF-8, else as bytes (base64).
type Row struct {
	ledger.OutboxItem
	Payload      json.RawMessage `json:"payload,omitempty"`
	PayloadText  string          `json:"payload_text,omitempty"`
	PayloadBytes []byte          `json:"payload_bytes,omitempty"`
	// History is what people did to the row (outbox.show only).
	History []ledger.AuditRecord `json:"history,omitempty"`
}

// RowOf is it as a Row, its payload decoded when with is set.
func RowOf(it ledger.OutboxItem, with bool) Row {
	r := Row{OutboxItem: it}
	r.OutboxItem.Payload = nil
	if with {
		d := decoded(it.Payload)
		r.Payload, r.PayloadText, r.PayloadBytes = d.Payload, d.PayloadText, d.PayloadBytes
	}
	return r
}

// Decoded is a payload as the API says it: as JSON when it is JSON, else
// as text when it is UTF-8, else as bytes (base64).
type Decoded struct {
	Payload      json.RawMessage `json:"payload,omitempty"`
	PayloadText  string          `json:"payload_text,omitempty"`
	PayloadBytes []byte          `json:"payload_bytes,omitempty"`
}

func decoded(p []byte) Decoded {
	switch {
	case json.Valid(p):
		return Decoded{Payload: p}
	case utf8.Valid(p):
		return Decoded{PayloadText: string(p)}
	}
	return Decoded{PayloadBytes: p}
}

func (s *Server) outboxList(ctx context.Context, req micro.Request) (any, error) {
	var q OutboxList
	if err := decode(req, &q); err != nil {
		return nil, err
	}
	if q.Limit == 0 {
		q.Limit = ListLimitDefault
	}
	if q.Limit < 0 || q.Limit > ListLimitMax {
		return nil, badRequest("limit %d: want 1 to %d", q.Limit, ListLimitMax)
	}
	if err := (ledger.Listing{Status: q.Status, Limit: q.Limit, Names: map[string]string{"Status": "status", "Limit": "limit"}}).Check(); err != nil {
		return nil, badRequest("%v", err)
	}
	items, err := s.st.ListOutbox(ctx, q.Status, q.Limit)
	if err != nil {
		return nil, err
	}
	out := Rows{Rows: make([]Row, len(items))}
	for i, it := range items {
		out.Rows[i] = RowOf(it, false)
	}
	return out, nil
}

// OutboxShow is outbox.show's request: the row's id.
type OutboxShow struct {
	ID string `json:"id"`
}

func (s *Server) outboxShow(ctx context.Context, req micro.Request) (any, error) {
	var q OutboxShow
	if err := decode(req, &q); err != nil {
		return nil, err
	}
	if q.ID == "" {
		return nil, badRequest("no id: outbox.show takes {\"id\": \"<the row's id>\"}")
	}
	return ShowRow(ctx, s.st, q.ID)
}

// ShowRow is outbox row id of st as outbox.show answers it: its payload
// decoded, and what people did to it.
func ShowRow(ctx context.Context, st *ledger.Store, id string) (Row, error) {
	it, err := st.Get(ctx, id)
	if err != nil {
		return Row{}, err
	}
	r := RowOf(it, true)
	r.History, err = st.AuditOf(ctx, id)
	return r, err
}
