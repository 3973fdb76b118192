package sqlhandler

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

// A new ledger's events table has no index on message_id (the ledger keeps
// one row per id already), only one on stream_seq, by which prune deletes
// an id's events row with its ledger row.
func TestNewEventsHaveNoIndexOnTheID(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h, err := New(ctx, st, Config{})
	if err != nil {
		t.Fatal(err)
	}
	var byID, bySeq int
	if err := st.DB().QueryRow(`SELECT
		(SELECT count(*) FROM pragma_index_list('events') il WHERE (SELECT group_concat(name) FROM pragma_index_info(il.name)) = 'message_id'),
		(SELECT count(*) FROM pragma_index_list('events') il WHERE (SELECT group_concat(name) FROM pragma_index_info(il.name)) = 'stream_seq')`).Scan(&byID, &bySeq); err != nil {
		t.Fatal(err)
	}
	if byID != 0 || bySeq != 1 {
		t.Fatalf("events has %d indexes on message_id (want 0) and %d on stream_seq (want 1)", byID, bySeq)
	}
	var batch []ledger.Delivery
	for i, id := range []string{"c3", "a1", "b2"} {
		batch = append(batch, ledger.Delivery{MessageID: id, Stream: "S", Sequence: uint64(i + 1), Subject: "s", Data: []byte(`{}`)})
	}
	if _, err := st.ApplyBatch(ctx, append(batch, batch[0]), h.Handle, ledger.Budget{}); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, st, `SELECT count(*) FROM events`); n != 3 {
		t.Fatalf("%d events rows for 3 ids, one delivered twice", n)
	}
	now = now.Add(8 * 24 * time.Hour)
	res, err := st.Prune(ctx, ledger.PruneOptions{Stream: "S", FirstSeq: 3, AlsoFrom: []string{"events"}})
	if err != nil || res.Processed != 2 {
		t.Fatalf("prune: %+v, %v; want 2 rows", res, err)
	}
	if n := countRows(t, st, `SELECT count(*) FROM events WHERE message_id = 'b2'`); n != 1 || countRows(t, st, `SELECT count(*) FROM events`) != 1 {
		t.Fatalf("after the prune: events rows %d, want b2's alone", countRows(t, st, `SELECT count(*) FROM events`))
	}
}

// A table whose foreign key names events(message_id) needs a unique index
// there (SQLite's rule for a parent key): New makes one, and the events
// row is then replaced, not doubled, when its id comes back.
func TestAForeignKeyToEventsGetsItsUniqueIndex(t *testing.T) {
	ctx := context.Background()
	st := openHandlerStore(t, `CREATE TABLE receipts (message_id TEXT REFERENCES events(message_id), note TEXT)`)
	h, err := New(ctx, st, Config{Apply: `INSERT INTO receipts VALUES (:msg_id, 'ok')`})
	if err != nil {
		t.Fatal(err)
	}
	if h.events != eventsInsert {
		t.Fatal("the handler does not replace events rows, beside a foreign key to them")
	}
	rs, err := st.ApplyBatch(ctx, []ledger.Delivery{{MessageID: "x", Stream: "S", Sequence: 1, Subject: "s", Data: []byte(`{}`)}}, h.Handle, ledger.Budget{})
	if err != nil || rs[0].Outcome != ledger.Applied {
		t.Fatalf("apply beside the foreign key: %+v, %v", rs, err)
	}
	if n := countRows(t, st, `SELECT count(*) FROM receipts JOIN events USING (message_id)`); n != 1 {
		t.Fatalf("%d receipts with their events row, want 1", n)
	}
}

func countRows(t *testing.T, st *ledger.Store, query string) int {
	t.Helper()
	var n int
	if err := st.DB().QueryRow(query).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
