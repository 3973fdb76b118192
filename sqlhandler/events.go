package sqlhandler

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

// eventsSchema is the events table a ledger gets since schema 18 of the
// ledger: a rowid table, in the order rows are applied, with an index on
// stream_seq (which grows) and none on message_id. The ledger keeps one
// row per id already; a unique index on the id wrote a page of it per
// random id (a webhook provider's, UUIDv4s, hashes), as processed_messages
// did. A table made before keeps its unique index (eventsSchemaUnique),
// and so does one another table's foreign key names (ensureUnique).
const eventsSchema = `CREATE TABLE IF NOT EXISTS events (
	message_id TEXT    NOT NULL,
	subject    TEXT    NOT NULL,
	stream_seq INTEGER NOT NULL,
	data       BLOB,
	applied_at INTEGER NOT NULL -- unix milliseconds
);
CREATE INDEX IF NOT EXISTS events_stream_seq ON events (stream_seq)`

// eventsSchemaUnique is the events table from v0.2.0 to schema 18: a rowid
// table with a unique index on the id. It was WITHOUT ROWID until v0.1.0:
// there a row is kept in the primary key's b-tree, which stores a row over
// about a quarter of a page out of line, so every payload of a kilobyte
// took a page of its own (4.7 KB a message). A rowid table keeps rows of
// up to nearly a page inline. A table of v0.1.0 moves to this one.
const eventsSchemaUnique = `CREATE TABLE IF NOT EXISTS events (
	message_id TEXT    NOT NULL UNIQUE,
	subject    TEXT    NOT NULL,
	stream_seq INTEGER NOT NULL,
	data       BLOB,
	applied_at INTEGER NOT NULL -- unix milliseconds
)`

// eventsColumns are the events table's columns, in order, in every
// layout it has had.
var eventsColumns = []string{"message_id", "subject", "stream_seq", "data", "applied_at"}

// CopyTables makes the tables New makes on a ledger outside its
// changelog (the events table), where there are none: a standby's copy
// runs it with the run's schema, as no changelog entry carries a table,
// and a copy that follows a log from its first entry (no snapshot yet)
// applies the owner's rows to them.
func CopyTables(ctx context.Context, st *ledger.Store) error {
	var have int
	if err := st.DB().QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'events'`).Scan(&have); err != nil {
		return fmt.Errorf("look up the events table: %w", ledger.Interpret(err))
	}
	if have > 0 {
		return nil
	}
	if _, err := st.Exec(ctx, eventsSchema); err != nil {
		return fmt.Errorf("create events table: %w", err)
	}
	return nil
}

// createEvents creates the events table, or moves an existing one of the
// old layout (WITHOUT ROWID) to the new, keeping its rows, indexes and
// triggers, in one transaction: a crash leaves the old table whole. Its
// errors carry the ledger's conditions (ledger.ErrBusy: another process
// holds the writer; ErrFull; ...).
func createEvents(ctx context.Context, st *ledger.Store, log *slog.Logger) error {
	if err := CopyTables(ctx, st); err != nil {
		return err
	}
	old, err := eventsWithoutRowid(ctx, st.DB())
	if err != nil || !old {
		return ledger.Interpret(err)
	}
	start := time.Now()
	rows, err := migrateEvents(ctx, st.DB())
	if err != nil {
		return fmt.Errorf("move the events table to its rowid layout (v0.2.0): %w; the table is unchanged", ledger.Interpret(err))
	}
	if rows >= 0 {
		log.InfoContext(ctx, "moved the events table to its rowid layout, which keeps a payload of a kilobyte in its row instead of a page of its own",
			"rows", rows, "took", time.Since(start).Round(time.Millisecond))
	}
	return nil
}

type queryRower interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}

// eventsWithoutRowid says whether main's events table has the old layout.
func eventsWithoutRowid(ctx context.Context, db queryRower) (bool, error) {
	var wr bool
	err := db.QueryRowContext(ctx, `SELECT wr FROM pragma_table_list WHERE schema = 'main' AND name = 'events'`).Scan(&wr)
	if err != nil {
		return false, fmt.Errorf("look up the events table's layout: %w", err)
	}
	return wr, nil
}

// moveTable is the new table's name while rows are copied into it.
const moveTable = "events_jetledger_move"

// migrateEvents copies events into a table of the new layout and puts it
// in its place, with the indexes, triggers and views that named it
// (SQLite's own procedure for a change ALTER TABLE cannot make), on one
// connection with foreign keys off, as that procedure says: DROP TABLE
// would delete every row first, and a user's ON DELETE CASCADE to events
// would take its rows with them. It returns the rows moved, or -1 when
// another process moved them first.
func migrateEvents(ctx context.Context, db *sql.DB) (moved int64, err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	// Not settable inside a transaction; set back on this pooled
	// connection whatever happens, or it is closed rather than reused.
	if _, err := conn.ExecContext(ctx, `PRAGMA foreign_keys = OFF`); err != nil {
		return 0, err
	}
	defer func() {
		if _, ferr := conn.ExecContext(context.WithoutCancel(ctx), `PRAGMA foreign_keys = ON`); ferr != nil {
			conn.Raw(func(any) error { return driver.ErrBadConn }) //nolint:errcheck // closes it
		}
	}()
	// The writer's transactions are IMMEDIATE: this one holds the write
	// lock before it reads the layout again.
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	if old, err := eventsWithoutRowid(ctx, tx); err != nil || !old {
		return -1, err
	}
	if err := checkEventsColumns(ctx, tx); err != nil {
		return 0, err
	}
	steps, copyStep, err := moveSteps(ctx, tx)
	if err != nil {
		return 0, err
	}
	for i, q := range steps {
		res, err := tx.ExecContext(ctx, q)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", firstLine(q), err)
		}
		if i == copyStep {
			moved, _ = res.RowsAffected()
		}
	}
	if err := checkForeignKeys(ctx, tx); err != nil {
		return 0, err
	}
	return moved, tx.Commit()
}

// moveSteps are the statements of the move, and which of them copies the
// rows. DROP and RENAME parse every view and trigger again, and one that
// names events would fail while it is missing: all of them go and come
// back, as they were written, around the move. Indexes on events go with
// the table and are made again on the new one.
func moveSteps(ctx context.Context, tx *sql.Tx) ([]string, int, error) {
	rows, err := tx.QueryContext(ctx, `SELECT type, name, sql FROM main.sqlite_schema
		WHERE sql IS NOT NULL AND (type IN ('view', 'trigger') OR (type = 'index' AND tbl_name = 'events'))
		ORDER BY CASE type WHEN 'index' THEN 0 WHEN 'view' THEN 1 ELSE 2 END, rowid`)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var drops, keep []string
	for rows.Next() {
		var typ, name, ddl string
		if err := rows.Scan(&typ, &name, &ddl); err != nil {
			return nil, 0, err
		}
		if typ != "index" {
			drops = append(drops, "DROP "+strings.ToUpper(typ)+` main."`+strings.ReplaceAll(name, `"`, `""`)+`"`)
		}
		keep = append(keep, ddl)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	slices.Reverse(drops) // triggers, which may name a view, before views
	cols := strings.Join(eventsColumns, ", ")
	steps := append(drops,
		strings.Replace(eventsSchemaUnique, "IF NOT EXISTS events", "main."+moveTable, 1),
		`INSERT INTO main.`+moveTable+` (`+cols+`) SELECT `+cols+` FROM main.events`,
		`DROP TABLE main.events`,
		`ALTER TABLE main.`+moveTable+` RENAME TO events`)
	return append(steps, keep...), len(drops) + 1, nil
}

// checkEventsColumns refuses to move an events table whose columns are not
// the five this package made (a schema that added one, generated columns
// included), rather than drop a column's values.
func checkEventsColumns(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, `SELECT name FROM pragma_table_xinfo('events', 'main') ORDER BY cid`)
	if err != nil {
		return err
	}
	defer rows.Close()
	var have []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return err
		}
		have = append(have, c)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if !slices.Equal(have, eventsColumns) {
		return errors.New("its columns are " + strings.Join(have, ", ") + ", not " + strings.Join(eventsColumns, ", ") +
			": move it by hand (SQLite's 'Making Other Kinds Of Table Schema Changes'), or keep an older jetledger")
	}
	return nil
}

// checkForeignKeys refuses a move that would leave a user's row pointing at
// no events row (none should: every row is copied).
func checkForeignKeys(ctx context.Context, tx *sql.Tx) error {
	var child string
	err := tx.QueryRowContext(ctx, `SELECT "table" FROM pragma_foreign_key_check WHERE parent = 'events' LIMIT 1`).Scan(&child)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return err
	}
	return fmt.Errorf("rows of %s would reference no events row", child)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// eventsUnique says whether events has a unique index on message_id alone
// (a table made before schema 18, or one ensureUnique gave it): its row is
// then replaced when an id comes back after its ledger row was pruned.
// Without it, a foreign key of another table that names events(message_id)
// gets one, as SQLite requires of a foreign key's parent.
func eventsUnique(ctx context.Context, st *ledger.Store) (bool, error) {
	const unique = `SELECT count(*) FROM pragma_index_list('events') il
		WHERE il."unique" AND (SELECT group_concat(name) FROM pragma_index_info(il.name)) = 'message_id'`
	var n, refs int
	if err := st.DB().QueryRowContext(ctx, unique).Scan(&n); err != nil || n > 0 {
		return n > 0, err
	}
	err := st.DB().QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema s, pragma_foreign_key_list(s.name) f
		WHERE s.type = 'table' AND f."table" = 'events'`).Scan(&refs)
	if err != nil || refs == 0 {
		return false, err
	}
	if _, err := st.Exec(ctx, `CREATE UNIQUE INDEX IF NOT EXISTS events_message_id ON events (message_id)`); err != nil {
		return false, fmt.Errorf("give events the unique index on message_id a foreign key to it needs: %w", err)
	}
	return true, nil
}
