package ledger

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"
)

// A ledger of the schema before 18 (processed_messages keyed by id) keeps
// every row through the migration, which copies none: they are in
// processed_messages_v1, still duplicates and conflicts, still pruned; new
// rows go to processed_messages in arrival order; and a view that named
// processed_messages names the table of new rows.
func TestALedgerBefore18KeepsItsRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path, raw := databaseAt(t, 17)
	sum := func(s string) []byte { b := sha256.Sum256([]byte(s)); return b[:] }
	const rows = 5000
	for i := range rows {
		id := fmt.Sprintf("old-%05d", i)
		if _, err := raw.Exec(`INSERT INTO processed_messages (message_id, stream, stream_seq, subject, payload_sha256, processed_at, last_seq, last_seen_at)
			VALUES (?, 'S', ?, 'ev', ?, 0, ?, 0)`, id, i+1, sum(id), i+1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := raw.Exec(`CREATE VIEW recent AS SELECT message_id FROM processed_messages`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	st, err := Open(path, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var old, now, view int
	if err := st.reader.QueryRow(`SELECT (SELECT count(*) FROM processed_messages_v1), (SELECT count(*) FROM processed_messages), (SELECT count(*) FROM recent)`).Scan(&old, &now, &view); err != nil {
		t.Fatal(err)
	}
	if old != rows || now != 0 || view != 0 {
		t.Fatalf("after the migration: %d rows of the old layout (want %d), %d new, %d in the view (want 0: it names the new table)", old, rows, now, view)
	}
	noop := func(context.Context, *Tx, Delivery) error { return nil }
	rs, err := st.ApplyBatch(ctx, []Delivery{
		{MessageID: "old-00007", Stream: "S", Sequence: 9001, Subject: "ev", Data: []byte("old-00007")},
		{MessageID: "old-04999", Stream: "S", Sequence: 9002, Subject: "ev", Data: []byte("another payload")},
		{MessageID: "new-1", Stream: "S", Sequence: 9003, Subject: "ev", Data: []byte("new-1")},
	}, noop, Budget{})
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Outcome != Duplicate || rs[1].Outcome != Conflict || rs[2].Outcome != Applied {
		t.Fatalf("outcomes %v %v %v, want a duplicate, a conflict, applied", rs[0].Outcome, rs[1].Outcome, rs[2].Outcome)
	}
	var seen int64
	if err := st.reader.QueryRow(`SELECT last_seq FROM processed_messages_v1 WHERE message_id = 'old-00007'`).Scan(&seen); err != nil || seen != 9001 {
		t.Fatalf("the old row's last copy: %d, %v; want 9001", seen, err)
	}
	res, err := st.Prune(ctx, PruneOptions{Stream: "S", FirstSeq: 100, Retention: 1})
	// Below 100, but for old-00007, seen again at 9001.
	if err != nil || res.Processed != 98 {
		t.Fatalf("prune: %+v, %v; want the 98 old rows last seen below 100", res, err)
	}
}
