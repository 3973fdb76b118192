package sqlhandler

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

// eventsSchema is a rowid table with a unique index on the id. It was
// WITHOUT ROWID until v0.1.0: there a row is kept in the primary key's
// b-tree, which stores a row over about a quarter of a page out of line,
// so every payload of a kilobyte took a page of its own (4.7 KB a
// message). A rowid table keeps rows of up to nearly a page inline.
const eventsSchema = `CREATE TABLE IF NOT EXISTS events (
	message_id TEXT    NOT NULL UNIQUE,
	subject    TEXT    NOT NULL,
	stream_seq INTEGER NOT NULL,
	data       BLOB,
	applied_at INTEGER NOT NULL -- unix milliseconds
)`

// eventsColumns are the events table's columns, in order, in every
// layout it has had.
var eventsColumns = []string{"message_id", "subject", "stream_seq", "data", "applied_at"}

// createEvents creates the events table, or moves an existing one of the
// old layout (WITHOUT ROWID) to the new, keeping its rows, indexes and
// triggers, in one transaction: a crash leaves the old table whole.
func createEvents(ctx context.Context, st *ledger.Store, log *slog.Logger) error {
	if _, err := st.Exec(ctx, eventsSchema); err != nil {
		return fmt.Errorf("create events table: %w", err)
	}
	old, err := eventsWithoutRowid(ctx, st.DB())
	if err != nil || !old {
		return err
	}
	start := time.Now()
	rows, err := migrateEvents(ctx, st.DB())
	if err != nil {
		return fmt.Errorf("move the events table to its rowid layout (v0.2.0): %w; the table is unchanged", err)
	}
	if rows >= 0 {
		log.InfoContext(ctx, "moved the events table to its rowid layout, which keeps a payload of a kilobyte in its row instead of a page of its own",
			"rows", rows, "took", time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// eventsWithoutRowid says whether the events table has the old layout.
func eventsWithoutRowid(ctx context.Context, db interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (bool, error) {
	var wr bool
	err := db.QueryRowContext(ctx, `SELECT wr FROM pragma_table_list WHERE schema = 'main' AND name = 'events'`).Scan(&wr)
	if err != nil {
		return false, fmt.Errorf("look up the events table's layout: %w", err)
	}
	return wr, nil
}

// migrateEvents copies events into a table of the new layout and puts it
// in its place, with the indexes, triggers and views that named it (SQLite's
// own procedure for a change ALTER TABLE cannot make). It returns the rows
// moved, or -1 when another process moved them first.
func migrateEvents(ctx context.Context, db *sql.DB) (int64, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	// The first statement writes, so the transaction holds the write lock
	// before it reads the layout again.
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS events_rowid_layout (x)`); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `DROP TABLE events_rowid_layout`); err != nil {
		return 0, err
	}
	if old, err := eventsWithoutRowid(ctx, tx); err != nil || !old {
		return -1, err
	}
	if err := checkEventsColumns(ctx, tx); err != nil {
		return 0, err
	}
	// DROP and RENAME parse every view and trigger again, and one that
	// names events would fail while it is missing: all of them go and come
	// back, as they were written, around the move. Indexes on events go
	// with the table and are made again on the new one.
	rows, err := tx.QueryContext(ctx, `SELECT type, name, sql FROM sqlite_schema
		WHERE sql IS NOT NULL AND (type IN ('view', 'trigger') OR (type = 'index' AND tbl_name = 'events'))
		ORDER BY CASE type WHEN 'index' THEN 0 WHEN 'view' THEN 1 ELSE 2 END, rowid`)
	if err != nil {
		return 0, err
	}
	var drops, keep []string
	for rows.Next() {
		var typ, name, ddl string
		if err := rows.Scan(&typ, &name, &ddl); err != nil {
			rows.Close()
			return 0, err
		}
		if typ != "index" {
			drops = append(drops, "DROP "+strings.ToUpper(typ)+` "`+strings.ReplaceAll(name, `"`, `""`)+`"`)
		}
		keep = append(keep, ddl)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	slices.Reverse(drops) // triggers, which may name a view, before views
	cols := strings.Join(eventsColumns, ", ")
	steps := append(drops,
		strings.Replace(eventsSchema, "IF NOT EXISTS events", "events_new", 1),
		`INSERT INTO events_new (`+cols+`) SELECT `+cols+` FROM events`,
		`DROP TABLE events`,
		`ALTER TABLE events_new RENAME TO events`)
	steps = append(steps, keep...)
	var moved int64
	for i, q := range steps {
		res, err := tx.ExecContext(ctx, q)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", firstLine(q), err)
		}
		if i == len(drops)+1 {
			moved, _ = res.RowsAffected()
		}
	}
	return moved, tx.Commit()
}

// checkEventsColumns refuses to move an events table whose columns are not
// the five this package made (a schema that added one, say), rather than
// drop a column's values.
func checkEventsColumns(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, `SELECT name FROM pragma_table_info('events') ORDER BY cid`)
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

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
