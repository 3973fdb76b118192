package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/jetledger/jetledger/ledger"
)

// The payload is checked for JSON only when --apply fails on it: an --apply
// that does not read the payload applies one that is not JSON, and the
// events row is stamped with the ledger's processed_at.
func TestApplyThatDoesNotReadThePayloadTakesAnyPayload(t *testing.T) {
	ctx := context.Background()
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.DB().ExecContext(ctx, `CREATE TABLE counts (subject TEXT PRIMARY KEY, n INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	h, err := newEventsHandler(ctx, st, "", `INSERT INTO counts VALUES (:subject, 1) ON CONFLICT (subject) DO UPDATE SET n = n + 1`)
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.ApplyBatch(ctx, []ledger.Delivery{{MessageID: "a", Stream: "S", Sequence: 1, Subject: "ping", Data: []byte("not json")}},
		h.handle, ledger.Budget{})
	if err != nil || res[0].Outcome != ledger.Applied {
		t.Fatalf("outcome %+v, err %v; want applied", res, err)
	}
	var n, stamped int
	if err := st.DB().QueryRowContext(ctx, `SELECT (SELECT n FROM counts WHERE subject = 'ping'),
		(SELECT count(*) FROM events e JOIN processed_messages p USING (message_id) WHERE e.applied_at = p.processed_at)`).Scan(&n, &stamped); err != nil {
		t.Fatal(err)
	}
	if n != 1 || stamped != 1 {
		t.Fatalf("count = %d, events rows stamped with processed_at = %d; want 1 and 1", n, stamped)
	}
}
