package sqlhandler

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

// oldLedger is a ledger with v0.1.0's events table holding n rows, and
// setup run after it.
func oldLedger(t *testing.T, n int, setup ...string) *storeT {
	t.Helper()
	st := openHandlerStore(t, oldEventsSchema)
	for i := range n {
		if _, err := st.DB().Exec(`INSERT INTO events VALUES (?, 's', ?, '{}', 7)`, fmt.Sprintf("id-%03d", i), i+1); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range setup {
		if _, err := st.DB().Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return &storeT{st}
}

func quietCfg() Config { return Config{Logger: slog.New(slog.DiscardHandler)} }

func count(t *testing.T, s *storeT, q string) int {
	t.Helper()
	var n int
	if err := s.DB().QueryRow(q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// A user table whose rows reference events(message_id) ON DELETE CASCADE
// (the ledger opens with foreign_keys ON) keeps its rows across the move:
// DROP TABLE events runs an implicit DELETE FROM events first, which
// cascades.
func TestMigrationKeepsRowsOfAForeignKeyOnDeleteCascade(t *testing.T) {
	s := oldLedger(t, 10,
		`CREATE TABLE receipts (message_id TEXT REFERENCES events(message_id) ON DELETE CASCADE, note TEXT)`,
		`INSERT INTO receipts SELECT message_id, 'r' FROM events`)
	if _, err := New(context.Background(), s.Store, quietCfg()); err != nil {
		t.Fatalf("New: %v", err)
	}
	if n := count(t, s, `SELECT count(*) FROM events`); n != 10 {
		t.Fatalf("events %d, want 10", n)
	}
	if n := count(t, s, `SELECT count(*) FROM receipts`); n != 10 {
		t.Fatalf("receipts %d after the move, want 10: the DROP's implicit DELETE cascaded", n)
	}
}

// ON DELETE SET NULL: the references are nulled by the move.
func TestMigrationKeepsReferencesOfAForeignKeyOnDeleteSetNull(t *testing.T) {
	s := oldLedger(t, 10,
		`CREATE TABLE receipts (message_id TEXT REFERENCES events(message_id) ON DELETE SET NULL, note TEXT)`,
		`INSERT INTO receipts SELECT message_id, 'r' FROM events`)
	if _, err := New(context.Background(), s.Store, quietCfg()); err != nil {
		t.Fatalf("New: %v", err)
	}
	if n := count(t, s, `SELECT count(*) FROM receipts WHERE message_id IS NOT NULL`); n != 10 {
		t.Fatalf("receipts referencing an event %d after the move, want 10", n)
	}
}

// A plain foreign key (NO ACTION) to events: the move must not fail (or,
// if it must, say so, not leave the service unable to start for a reason
// it cannot name).
func TestMigrationWithAPlainForeignKeyToEvents(t *testing.T) {
	s := oldLedger(t, 10,
		`CREATE TABLE receipts (message_id TEXT REFERENCES events(message_id), note TEXT)`,
		`INSERT INTO receipts SELECT message_id, 'r' FROM events`)
	if _, err := New(context.Background(), s.Store, quietCfg()); err != nil {
		t.Fatalf("New: %v", err)
	}
}

// The same with the foreign key deferred.
func TestMigrationWithADeferredForeignKeyToEvents(t *testing.T) {
	s := oldLedger(t, 10,
		`CREATE TABLE receipts (message_id TEXT REFERENCES events(message_id) DEFERRABLE INITIALLY DEFERRED, note TEXT)`,
		`INSERT INTO receipts SELECT message_id, 'r' FROM events`)
	if _, err := New(context.Background(), s.Store, quietCfg()); err != nil {
		t.Fatalf("New: %v", err)
	}
}

// A view created before the view it reads (the one it reads was dropped
// and made again later, so it has a later rowid in sqlite_schema).
func TestMigrationRecreatesViewsOutOfRowidOrder(t *testing.T) {
	s := oldLedger(t, 3,
		`CREATE VIEW a AS SELECT message_id FROM events`,
		`CREATE VIEW b AS SELECT * FROM a`,
		`DROP VIEW a`,
		`CREATE VIEW a AS SELECT message_id FROM events WHERE stream_seq > 1`)
	if _, err := New(context.Background(), s.Store, quietCfg()); err != nil {
		t.Fatalf("New: %v", err)
	}
	if n := count(t, s, `SELECT count(*) FROM b`); n != 2 {
		t.Fatalf("b %d rows, want 2", n)
	}
}

// A view left dangling by the user (its table dropped, which SQLite
// allows), on no relation to events.
func TestMigrationWithADanglingViewElsewhere(t *testing.T) {
	s := oldLedger(t, 3,
		`CREATE TABLE gone (x)`,
		`CREATE VIEW old_report AS SELECT x FROM gone`,
		`DROP TABLE gone`)
	if _, err := New(context.Background(), s.Store, quietCfg()); err != nil {
		t.Fatalf("New: %v", err)
	}
}

// INSTEAD OF triggers on views over events, a view over a view, a trigger
// on another table writing events, and partial and expression indexes.
func TestMigrationKeepsInsteadOfTriggersAndOddIndexes(t *testing.T) {
	s := oldLedger(t, 5,
		`CREATE VIEW ev AS SELECT message_id, subject FROM events`,
		`CREATE VIEW ev2 AS SELECT * FROM ev`,
		`CREATE TABLE inbox (id TEXT)`,
		`CREATE TRIGGER ev_ins INSTEAD OF INSERT ON ev2 BEGIN INSERT INTO inbox VALUES (NEW.message_id); END`,
		`CREATE TRIGGER inbox_ev AFTER INSERT ON inbox BEGIN UPDATE events SET subject = 'touched' WHERE message_id = NEW.id; END`,
		`CREATE INDEX ev_partial ON events (stream_seq) WHERE subject <> 's'`,
		`CREATE INDEX ev_expr ON events (lower(subject), stream_seq * 2)`,
		`CREATE UNIQUE INDEX ev_seq ON events (stream_seq)`)
	if _, err := New(context.Background(), s.Store, quietCfg()); err != nil {
		t.Fatalf("New: %v", err)
	}
	if _, err := s.DB().Exec(`INSERT INTO ev2 (message_id, subject) VALUES ('id-001', 'x')`); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, `SELECT count(*) FROM events WHERE subject = 'touched'`); n != 1 {
		t.Fatalf("touched %d", n)
	}
	if n := count(t, s, `SELECT count(*) FROM sqlite_schema WHERE name IN ('ev_partial', 'ev_expr', 'ev_seq', 'ev_ins', 'inbox_ev', 'ev', 'ev2')`); n != 7 {
		t.Fatalf("schema objects %d, want 7", n)
	}
}

// A user table that happens to be named events_rowid_layout is not the
// migration's scratch table: it must survive.
func TestMigrationKeepsAUserTableNamedLikeItsScratchTable(t *testing.T) {
	s := oldLedger(t, 3, `CREATE TABLE events_rowid_layout (x)`, `INSERT INTO events_rowid_layout VALUES (42)`)
	if _, err := New(context.Background(), s.Store, quietCfg()); err != nil {
		t.Fatalf("New: %v", err)
	}
	if n := count(t, s, `SELECT count(*) FROM sqlite_schema WHERE name = 'events_rowid_layout'`); n != 1 {
		t.Fatalf("the user's table events_rowid_layout was dropped by the migration")
	}
}

// A user table named events_new.
func TestMigrationWithATableNamedEventsNew(t *testing.T) {
	s := oldLedger(t, 3, `CREATE TABLE events_new (x)`)
	_, err := New(context.Background(), s.Store, quietCfg())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
}

// A TEMP table named events on the writer's connection (a --schema may
// make one): the move must read main.events, not temp.events.
func TestMigrationWithATempTableNamedEvents(t *testing.T) {
	s := oldLedger(t, 4, `CREATE TEMP TABLE events (message_id, subject, stream_seq, data, applied_at)`)
	if _, err := New(context.Background(), s.Store, quietCfg()); err != nil {
		t.Fatalf("New: %v", err)
	}
	if n := count(t, s, `SELECT count(*) FROM main.events`); n != 4 {
		t.Fatalf("main.events %d rows, want 4", n)
	}
}

// A virtual (hidden from table_info) generated column on the old table:
// the column check must see it instead of dropping it silently.
func TestMigrationSeesAGeneratedColumn(t *testing.T) {
	s := oldLedger(t, 2, `ALTER TABLE events ADD COLUMN subj_upper TEXT GENERATED ALWAYS AS (upper(subject)) VIRTUAL`)
	_, err := New(context.Background(), s.Store, quietCfg())
	if err != nil && !strings.Contains(err.Error(), "subj_upper") {
		t.Fatalf("New: %v; want either a move that keeps subj_upper or a refusal naming it", err)
	}
	if err == nil {
		if n := count(t, s, `SELECT count(*) FROM pragma_table_xinfo('events') WHERE name = 'subj_upper'`); n != 1 {
			t.Fatal("subj_upper was dropped by the move")
		}
	}
}

type storeT struct{ *ledger.Store }

// Another process holds the writer while New finds an old table to move
// (two services started at once on one file; the first is moving a big
// table): New's failure must be ledger.ErrBusy, which the service waits
// out (service.handler), not a raw driver error that ends the start.
func TestMigrationBusyIsErrBusy(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := dir + "/l.db"
	a, err := ledger.Open(path, ledger.Config{BusyTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.DB().Exec(oldEventsSchema); err != nil {
		t.Fatal(err)
	}
	b, err := ledger.Open(path, ledger.Config{BusyTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	tx, err := a.DB().BeginTx(ctx, nil) // IMMEDIATE: holds the write lock
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	_, err = New(ctx, b, quietCfg())
	if !errors.Is(err, ledger.ErrBusy) {
		t.Fatalf("New while another process holds the writer: %v; want ledger.ErrBusy so the service waits", err)
	}
}

// A ledger at its --db-max-size whose copy of events needs room: the move
// fails with ledger.ErrFull (what every other full-ledger failure is, and
// what the operator's runbook keys on), leaving the old table whole.
func TestMigrationAtMaxSizeIsErrFull(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/l.db"
	a, err := ledger.Open(path, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.DB().Exec(oldEventsSchema); err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		if _, err := a.DB().Exec(`INSERT INTO events VALUES (?, 's', ?, ?, 7)`, fmt.Sprintf("id-%03d", i), i+1, strings.Repeat("x", 1000)); err != nil {
			t.Fatal(err)
		}
	}
	var pages int64
	if err := a.DB().QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	a.Close()
	b, err := ledger.Open(path, ledger.Config{MaxSizeBytes: (pages + 20) * 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, err = New(ctx, b, quietCfg())
	if !errors.Is(err, ledger.ErrFull) {
		t.Fatalf("New on a full ledger: %v; want ledger.ErrFull", err)
	}
	var n int
	if err := b.DB().QueryRow(`SELECT count(*) FROM events`).Scan(&n); err != nil || n != 300 {
		t.Fatalf("events %d, %v", n, err)
	}
	if old, err := eventsWithoutRowid(ctx, b.DB()); err != nil || !old {
		t.Fatalf("old layout %v %v", old, err)
	}
}

// Check's scratch copy of an old ledger has the old events table too, and
// New moves it there: that must not be logged (on slog.Default, rows=0) as
// if the real table had been moved, with none of its rows, before the real
// move is logged again with its rows.
func TestCheckDoesNotLogAMoveOfItsScratchCopy(t *testing.T) {
	path := t.TempDir() + "/l.db"
	st, err := ledger.Open(path, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().Exec(oldEventsSchema + `; INSERT INTO events VALUES ('a', 's', 1, '{}', 7)`); err != nil {
		t.Fatal(err)
	}
	st.Close()
	var logs bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	defer slog.SetDefault(prev)
	if err := Check(context.Background(), path, Config{Apply: `SELECT 1`}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "moved the events table") {
		t.Fatalf("Check of the scratch copy logged: %s", logs.String())
	}
}

// A process killed in the middle of the move leaves the old table whole.
func TestMigrationKilledMidwayLeavesTheOldTable(t *testing.T) {
	if p := os.Getenv("JETLEDGER_TEST_MOVE_CHILD"); p != "" {
		st, err := ledger.Open(p, ledger.Config{})
		if err != nil {
			fmt.Println("open:", err)
			os.Exit(2)
		}
		fmt.Println("start")
		_, err = New(context.Background(), st, quietCfg())
		fmt.Println("done", err)
		os.Exit(0)
	}
	path := t.TempDir() + "/l.db"
	st, err := ledger.Open(path, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().Exec(oldEventsSchema); err != nil {
		t.Fatal(err)
	}
	const n = 40000
	if _, err := st.DB().Exec(`WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM c WHERE i < ?)
		INSERT INTO events SELECT printf('id-%08d', i), 's', i+1, randomblob(1000), 7 FROM c`, n-1); err != nil {
		t.Fatal(err)
	}
	st.Close()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestMigrationKilledMidwayLeavesTheOldTable$")
	cmd.Env = append(os.Environ(), "JETLEDGER_TEST_MOVE_CHILD="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(out)
	line, _ := r.ReadString('\n')
	if line != "start\n" {
		t.Fatalf("child: %q", line)
	}
	time.Sleep(150 * time.Millisecond) // the moment of the kill is the experiment's variable: 40 MB to copy take longer
	cmd.Process.Kill()
	rest, _ := io.ReadAll(r)
	cmd.Wait()
	if strings.Contains(string(rest), "done") {
		t.Skipf("the move finished before the kill: %s", rest)
	}
	st2, err := ledger.Open(path, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	ctx := context.Background()
	if old, err := eventsWithoutRowid(ctx, st2.DB()); err != nil || !old {
		t.Fatalf("after the kill: old layout %v, %v", old, err)
	}
	var rows int
	var ok string
	if err := st2.DB().QueryRow(`SELECT (SELECT count(*) FROM events), (SELECT group_concat(integrity_check) FROM pragma_integrity_check)`).Scan(&rows, &ok); err != nil || rows != n || ok != "ok" {
		t.Fatalf("rows %d, integrity %q, %v", rows, ok, err)
	}
	if _, err := New(ctx, st2, quietCfg()); err != nil {
		t.Fatalf("New after the kill: %v", err)
	}
}
