package sqlhandler

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/ledger"
)

// Config is what New and Check run. The zero value is a handler that
// only records every message in the events table.
type Config struct {
	// Schema is SQL run once on the ledger before the handler is made
	// (CREATE TABLE IF NOT EXISTS ...), so that Apply's tables exist.
	// Default "": none.
	Schema string
	// SchemaName is where Schema came from, said after its name in error
	// messages (CheckError.Name; run passes the file's path). Default "":
	// none.
	SchemaName string
	// Apply is SQL run for every message in the batch's transaction, with
	// :msg_id, :subject, :seq (integer) and :data (the payload, as text)
	// bound; @, $ and # work as the prefix too. Default "": none.
	Apply string
	// Names are what the errors (*CheckError, *ConditionError,
	// *UnboundParamError) and the dead-letter reason of a payload that is
	// not JSON call the settings: a setting's path in Config ("Schema",
	// "Apply") to the caller's name for it (run: "--schema", "--apply").
	// Given, a message is in the caller's words alone, without the
	// package's name. Default: the fields ("Config.Apply"), after
	// "sqlhandler: ".
	Names map[string]string
	// Logger receives New's report of moving an events table made by an
	// older jetledger to today's layout. Default slog.Default().
	Logger *slog.Logger
	// Effect, if set, runs for every message after its events row and
	// before Apply, in the same savepoint (run enqueues the payload to its
	// outbox here, so the outbox row exists if and only if the message is
	// applied). Its context is not cancelled with the batch's. Default
	// nil: no effect.
	Effect ledger.Handler
}

// Handler is the built-in handler of jetledger run: it records every
// message in the events table and runs Config.Apply in the same
// transaction. Its Handle method is a ledger.Handler (consumer.Config's
// Handler). Safe for the consumer's use; not changed after New.
type Handler struct {
	apply     string
	applyName string // what Config.Names calls Apply
	// later: the events row is queued for the batch's multi-row insert;
	// only when nothing the handler runs reads the events table (see
	// New), since a queued row is not visible until then.
	later     bool
	events    *ledger.Insert // eventsInsert, or eventsAppend for a table with no unique index on the id
	params    []string       // the names of applyParams Apply uses
	readsData bool           // one of them is data: the payload must be JSON
	effect    ledger.Handler
}

// New runs cfg.Schema on st, creates the events table, then checks
// cfg.Apply (checkApply), so a typo fails at start, not per message. Bad
// SQL is a *CheckError (ErrSchema, ErrApplyInvalid); the ledger's own
// condition (ledger.ErrBusy, ErrFull, ...) is returned wrapped, as is a
// cancelled ctx.
func New(ctx context.Context, st *ledger.Store, cfg Config) (*Handler, error) {
	if st == nil {
		return nil, fmt.Errorf("%w: a store is required", ErrInvalidConfig)
	}
	if cfg.Schema != "" {
		if _, err := st.Exec(ctx, cfg.Schema); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err() // interrupted, not a bad schema
			}
			return nil, schemaError(cfg, err)
		}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if err := createEvents(ctx, st, log); err != nil {
		return nil, err
	}
	events := eventsAppend
	if unique, err := eventsUnique(ctx, st); err != nil {
		return nil, err
	} else if unique {
		events = eventsInsert
	}
	apply, names := cfg.Apply, cfg.Names
	if apply != "" {
		if err := checkApply(ctx, st, apply, names); err != nil {
			return nil, err
		}
	}
	later, err := eventsLater(ctx, st, apply)
	if err != nil {
		return nil, err
	}
	params := usedParams(apply)
	return &Handler{apply: apply, applyName: name(names, "Apply"), later: later, events: events, params: params, readsData: slices.Contains(params, "data"), effect: cfg.Effect}, nil
}

// databaseCondition reports an error that is the ledger file's condition
// (another process holds its writer, a full or read-only disk, an I/O
// error), not the SQL's: not a *CheckError, and the SQL may be fine.
func databaseCondition(err error) bool {
	return errors.Is(err, ledger.ErrBusy) || errors.Is(err, ledger.ErrFull) || errors.Is(err, ledger.ErrReadOnly) || errors.Is(err, ledger.ErrIO)
}

// schemaError is cfg's Schema that failed on the ledger, a *CheckError
// unless the ledger's condition failed it (a *ConditionError).
func schemaError(cfg Config, err error) error {
	if databaseCondition(err) {
		return &ConditionError{Field: "Schema", Name: cfg.SchemaName, Err: err, Names: cfg.Names}
	}
	return &CheckError{Kind: ErrSchema, Name: cfg.SchemaName, Err: err, Names: cfg.Names}
}

// usedParams are the names of applyParams that apply uses: binding only
// those spares the driver a lookup, and an allocation, per unused name.
func usedParams(apply string) []string {
	var used []string
	for _, name := range applyParams {
		for _, p := range sqlParams(apply) {
			if p[1:] == name && !slices.Contains(used, name) {
				used = append(used, name)
			}
		}
	}
	return used
}

// eventsInsert is the events row, in one statement for the whole batch.
// An id applied again after its ledger row was pruned is a new message
// (README: retention): it replaces the old events row rather than failing
// on it until it is dead-lettered.
var eventsInsert = &ledger.Insert{Table: "events", Columns: []string{"message_id", "subject", "stream_seq", "data", "applied_at"},
	OnConflict: `(message_id) DO UPDATE SET subject = excluded.subject, stream_seq = excluded.stream_seq,
		data = excluded.data, applied_at = excluded.applied_at`}

// eventsAppend is the events row of a table with no unique index on the id
// (eventsSchema): prune deletes an id's events row with its ledger row, so
// an id applied again after that has no row to replace.
var eventsAppend = &ledger.Insert{Table: "events", Columns: eventsInsert.Columns}

// eventsLater says whether the events row can wait for the batch's
// multi-row insert: Apply, with the triggers it fires, does not touch the
// events table, and no trigger on the events table would fire later than
// it does today relative to Apply.
func eventsLater(ctx context.Context, st *ledger.Store, apply string) (bool, error) {
	var triggers int
	if err := st.DB().QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND lower(tbl_name) = 'events'`).
		Scan(&triggers); err != nil {
		return false, fmt.Errorf("look up triggers on events: %w", err)
	}
	if triggers > 0 || apply == "" {
		return triggers == 0, nil
	}
	tables, err := st.TablesUsed(ctx, sqlStatements(apply))
	if err != nil {
		return false, fmt.Errorf("sqlhandler: tables Config.Apply uses: %w", err)
	}
	return !tables["events"], nil
}

// checkApply compiles every statement of Apply as a handler runs it, so a
// typo or a statement a handler may not run (BEGIN, COMMIT, ...) fails New
// instead of every message; and checks its parameters. Its errors name
// the settings as names (Config.Names) says.
func checkApply(ctx context.Context, st *ledger.Store, apply string, names map[string]string) error {
	err := st.CheckHandlerSQL(ctx, sqlStatements(apply))
	switch {
	case err != nil && ctx.Err() != nil:
		return ctx.Err()
	case databaseCondition(err):
		return &ConditionError{Field: "Apply", Err: err, Names: names}
	case err != nil:
		return &CheckError{Kind: ErrApplyInvalid, Err: err, Names: names}
	}
	// SQLite compiles any parameter name; Handle binds only four.
	if err := checkApplyParams(apply, name(names, "Apply")); err != nil {
		return &CheckError{Kind: ErrApplyInvalid, Err: err, Names: names}
	}
	return nil
}

// Handle records d in the events table and runs Apply for it, in tx: a
// ledger.Handler. A payload Apply reads that is not JSON, and that Apply
// failed on or would read only in part, is a consumer.Term failure
// wrapping ErrNotJSON (dead-lettered at once); another Apply failure is
// returned as "sqlhandler: Config.Apply: ..." to be tried again.
func (h *Handler) Handle(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
	if h.readsData && bytes.IndexByte(d.Data, 0) >= 0 {
		// Not JSON (a NUL is never one), and SQLite's JSON functions would
		// read it only up to the NUL: the rest would be lost to Apply.
		return consumer.Term(&notJSONError{name: h.applyName})
	}
	row := []any{d.MessageID, d.Subject, int64(d.Sequence), d.Data, tx.Time().UnixMilli()}
	var err error
	switch {
	case h.later:
		err = tx.InsertLater(h.events, row...)
	case h.events.OnConflict == "":
		_, err = tx.ExecContext(ctx, `INSERT INTO events (message_id, subject, stream_seq, data, applied_at) VALUES (?, ?, ?, ?, ?)`, row...)
	default:
		_, err = tx.ExecContext(ctx, `INSERT INTO events (message_id, subject, stream_seq, data, applied_at)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT `+eventsInsert.OnConflict, row...)
	}
	if err != nil {
		return fmt.Errorf("record event: %w", err)
	}
	// Same savepoint: the outbox row exists if and only if the message is applied.
	if h.effect != nil {
		if err := h.effect(context.WithoutCancel(ctx), tx, d); err != nil {
			return err
		}
	}
	if h.apply == "" {
		return nil
	}
	args := make([]any, len(h.params))
	for i, name := range h.params {
		switch name {
		case "msg_id":
			args[i] = sql.Named(name, d.MessageID)
		case "subject":
			args[i] = sql.Named(name, d.Subject)
		case "seq":
			args[i] = sql.Named(name, int64(d.Sequence))
		case "data":
			// As text: SQLite reads a BLOB given to json_extract as JSONB.
			args[i] = sql.Named(name, string(d.Data))
		}
	}
	if _, err := tx.ExecContext(ctx, h.apply, args...); err != nil {
		// Checked only now: a payload Apply can read (SQLite's JSON5)
		// is applied, and the check costs nothing on the common path. An
		// Apply that does not read the payload failed for another
		// reason, which may pass: tried again as for any payload.
		if h.readsData && !json.Valid(d.Data) {
			return consumer.Term(&notJSONError{name: h.applyName, err: err})
		}
		return fmt.Errorf("sqlhandler: Config.Apply: %w", err)
	}
	return nil
}
