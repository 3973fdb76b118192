package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/ledger"
)

// errNotJSON is the dead-letter reason of a payload --apply cannot read.
var errNotJSON = errors.New("payload is not valid JSON, which --apply needs for json_extract")

// eventsHandler is the built-in handler of `run`: it records every message in
// the events table and runs the user's --apply SQL in the same transaction.
type eventsHandler struct {
	apply string
	sink  string // non-empty: enqueue the payload to this outbox sink
	// suppressThrough records the outbox rows of messages up to this stream
	// sequence as suppressed, never sent: a replay rebuilding state must not
	// repeat effects that run already had. Past it, effects are queued for
	// run to send.
	suppressThrough uint64
}

const eventsSchema = `CREATE TABLE IF NOT EXISTS events (
	message_id TEXT    NOT NULL PRIMARY KEY,
	subject    TEXT    NOT NULL,
	stream_seq INTEGER NOT NULL,
	data       BLOB,
	applied_at INTEGER NOT NULL -- unix milliseconds
) WITHOUT ROWID`

// newEventsHandler creates the events table and the user's schema, then
// checks that --apply compiles, so a typo fails at start, not per message.
func newEventsHandler(ctx context.Context, db *sql.DB, schemaFile, apply string) (*eventsHandler, error) {
	if schemaFile != "" {
		schema, err := os.ReadFile(schemaFile)
		if err != nil {
			return nil, usagef("--schema: %v", err)
		}
		if _, err := db.ExecContext(ctx, string(schema)); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err() // interrupted, not a bad schema
			}
			return nil, usagef("--schema %s: %v", schemaFile, err)
		}
	}
	if _, err := db.ExecContext(ctx, eventsSchema); err != nil {
		return nil, fmt.Errorf("create events table: %w", err)
	}
	if apply != "" {
		stmt, err := db.PrepareContext(ctx, apply)
		if err != nil && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			return nil, usagef("--apply does not compile: %v (tables it uses must exist: create them with --schema)", err)
		}
		stmt.Close()
		// SQLite compiles any parameter name; handle binds only four.
		if err := checkApplyParams(apply); err != nil {
			return nil, usageError{err}
		}
	}
	return &eventsHandler{apply: apply}, nil
}

func (h *eventsHandler) handle(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
	if h.apply != "" && !json.Valid(d.Data) {
		return consumer.Term(errNotJSON)
	}
	// This insert is bounded, so it runs without the deadline: the driver
	// starts a watcher goroutine for every cancellable statement, which cost
	// more than the insert itself. The user's --apply SQL keeps the deadline.
	// An id applied again after its ledger row was pruned is a new message
	// (README: retention): it replaces the old events row rather than
	// failing on it until it is dead-lettered.
	if _, err := tx.ExecContext(context.WithoutCancel(ctx), `INSERT INTO events (message_id, subject, stream_seq, data, applied_at)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT (message_id) DO UPDATE SET subject = excluded.subject,
		stream_seq = excluded.stream_seq, data = excluded.data, applied_at = excluded.applied_at`,
		d.MessageID, d.Subject, int64(d.Sequence), d.Data, time.Now().UnixMilli()); err != nil {
		return fmt.Errorf("record event: %w", err)
	}
	if h.sink != "" {
		// Same savepoint: the outbox row exists if and only if the message is applied.
		enqueue := tx.Enqueue
		if d.Sequence <= h.suppressThrough {
			enqueue = tx.EnqueueSuppressed
		}
		if _, err := enqueue(context.WithoutCancel(ctx), h.sink, d.Data); err != nil {
			return err
		}
	}
	if h.apply == "" {
		return nil
	}
	// :data is bound as text: SQLite reads a BLOB given to json_extract as JSONB.
	if _, err := tx.ExecContext(ctx, h.apply,
		sql.Named("msg_id", d.MessageID), sql.Named("subject", d.Subject),
		sql.Named("seq", int64(d.Sequence)), sql.Named("data", string(d.Data))); err != nil {
		return fmt.Errorf("--apply: %w", err)
	}
	return nil
}
