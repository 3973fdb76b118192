package sqlhandler

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jetledger/jetledger/ledger"
)

// oldEventsSchema is the events table as v0.1.0 made it.
const oldEventsSchema = `CREATE TABLE events (
	message_id TEXT    NOT NULL PRIMARY KEY,
	subject    TEXT    NOT NULL,
	stream_seq INTEGER NOT NULL,
	data       BLOB,
	applied_at INTEGER NOT NULL -- unix milliseconds
) WITHOUT ROWID`

// A ledger whose events table has v0.1.0's layout (WITHOUT ROWID) is moved
// to the rowid layout by New: every row, the index, the trigger on it and
// the view over it are kept, the trigger still fires, a redelivered id
// still replaces its row, and it says so once.
func TestNewMovesAnOldEventsTableKeepingItsRowsIndexesTriggersAndViews(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "l.db")
	st, err := ledger.Open(path, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	setup := []string{oldEventsSchema,
		`CREATE TABLE seen (message_id TEXT, at INTEGER)`,
		`CREATE INDEX events_by_subject ON events (subject, stream_seq)`,
		`CREATE TRIGGER events_seen AFTER INSERT ON events BEGIN INSERT INTO seen VALUES (NEW.message_id, NEW.applied_at); END`,
		`CREATE VIEW per_subject AS SELECT subject, count(*) AS n FROM events GROUP BY subject`,
		`CREATE VIEW big AS SELECT * FROM per_subject WHERE n > 1`,
	}
	for _, q := range setup {
		if _, err := st.DB().Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for i := range 500 {
		if _, err := st.DB().Exec(`INSERT INTO events VALUES (?, ?, ?, ?, ?)`, fmt.Sprintf("id-%03d", i), fmt.Sprintf("s.%d", i%3), i+1, strings.Repeat("x", 1000), 7); err != nil {
			t.Fatal(err)
		}
	}
	var logs bytes.Buffer
	h, err := New(ctx, st, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if old, err := eventsWithoutRowid(ctx, st.DB()); err != nil || old {
		t.Fatalf("events is still WITHOUT ROWID (%v, %v)", old, err)
	}
	if got := strings.Count(logs.String(), "moved the events table"); got != 1 || !strings.Contains(logs.String(), "rows=500") {
		t.Fatalf("log %q: want one line saying 500 rows were moved", logs.String())
	}
	res, err := st.ApplyBatch(ctx, []ledger.Delivery{
		{MessageID: "new", Stream: "S", Sequence: 600, Subject: "s.0", Data: []byte(`{}`)},
		{MessageID: "id-001", Stream: "S", Sequence: 601, Subject: "s.9", Data: []byte(`{}`)},
	}, h.Handle, ledger.Budget{})
	if err != nil || res[0].Outcome != ledger.Applied || res[1].Outcome != ledger.Applied {
		t.Fatalf("outcomes %+v, err %v", res, err)
	}
	var rows, kept, seen, views, indexed int
	if err := st.DB().QueryRow(`SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM events WHERE length(data) = 1000),
		(SELECT count(*) FROM seen), (SELECT count(*) FROM big),
		(SELECT count(*) FROM sqlite_schema WHERE name = 'events_by_subject')`).Scan(&rows, &kept, &seen, &views, &indexed); err != nil {
		t.Fatal(err)
	}
	// 500 moved, "new" added, id-001 replaced in place; the trigger fired
	// for the 500 before the move and for "new" after it.
	if rows != 501 || kept != 499 || seen != 501 || views != 3 || indexed != 1 {
		t.Fatalf("rows %d (want 501), old payloads %d (499), trigger rows %d (501), view rows %d (3), index %d (1)", rows, kept, seen, views, indexed)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// Opened again, nothing is left to move.
	st2, err := ledger.Open(path, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	logs.Reset()
	if _, err := New(ctx, st2, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))}); err != nil || logs.Len() != 0 {
		t.Fatalf("second New: %v, logged %q", err, logs.String())
	}
}

// An old events table with a column this package did not make is left as
// it is, and New says what to do instead of dropping the column's values.
func TestNewRefusesToMoveAnEventsTableWithAnotherColumn(t *testing.T) {
	ctx := context.Background()
	st := openHandlerStore(t, oldEventsSchema)
	if _, err := st.DB().Exec(`ALTER TABLE events ADD COLUMN note TEXT; INSERT INTO events VALUES ('a', 's', 1, NULL, 1, 'keep me')`); err != nil {
		t.Fatal(err)
	}
	_, err := New(ctx, st, Config{Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "note") || !strings.Contains(err.Error(), "unchanged") {
		t.Fatalf("New: %v; want a refusal naming the column", err)
	}
	var note string
	if err := st.DB().QueryRow(`SELECT note FROM events`).Scan(&note); err != nil || note != "keep me" {
		t.Fatalf("note %q, %v", note, err)
	}
}

// A row of a kilobyte's payload stays in its row: the events table and
// its index take about a third of a page of 4 KiB each (three rows fit a
// page), not the page and more each of the old layout.
func TestEventsRowsOfAKilobyteDoNotTakeAPageEach(t *testing.T) {
	ctx := context.Background()
	st := openHandlerStore(t, `SELECT 1`)
	h, err := New(ctx, st, Config{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 2000
	var ds []ledger.Delivery
	for i := range n {
		ds = append(ds, ledger.Delivery{MessageID: fmt.Sprintf("01JX%022d", i), Stream: "S", Sequence: uint64(i + 1), Subject: "s", Data: bytes.Repeat([]byte("y"), 1024)})
	}
	for i := 0; i < n; i += 500 {
		if _, err := st.ApplyBatch(ctx, ds[i:i+500], h.Handle, ledger.Budget{}); err != nil {
			t.Fatal(err)
		}
	}
	var bytesUsed int64
	if err := st.DB().QueryRow(`SELECT sum(pgsize) FROM dbstat WHERE name = 'events' OR name LIKE 'sqlite_autoindex_events%'`).Scan(&bytesUsed); err != nil {
		t.Fatal(err)
	}
	if per := bytesUsed / n; per > 1500 {
		t.Fatalf("events takes %d bytes a message for 1 KiB payloads; want at most 1500", per)
	}
}
