package ledger

import (
	"context"
	"testing"
	"time"
)

// Review attack (issue 19, points 1-2 meet an upgrade): a ledger the
// previous release left (schema 6) with rows in sending (its worker gone)
// and queued with an earlier send that may have landed. After the upgrade
// none of them may gain a record of one instance: their earlier sends went
// nobody knows where, so no lookup may later prove them "never seen".
func TestUpgradedRowsGainNoInstanceRecord(t *testing.T) {
	t.Parallel()
	path, raw := databaseAt(t, 6)
	past := time.Now().Add(-time.Hour).UnixMilli()
	if _, err := raw.Exec(`INSERT INTO outbox (id, message_id, sink, payload, status, attempts, claimed_by, claimed_at, lease_until, maybe_sent, created_at, updated_at) VALUES
		('sending-old', 'm1', 'nats', x'00', 'sending', 1, 'old#1', ?1, ?1, 0, ?1, ?1),
		('queued-maybe', 'm2', 'nats', x'00', 'queued', 1, NULL, NULL, NULL, 1, ?1, ?1)`, past); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	st, err := Open(path, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	if _, err := st.ExpireLeases(ctx, "nats", true); err != nil { // an idempotent sink: re-sent with the same key
		t.Fatal(err)
	}
	a := Destination{Instance: "EFF@1", Position: 7}
	for _, id := range []string{"sending-old", "queued-maybe"} {
		it, err := st.Transition(ctx, id, Claim, Params{Worker: "new#1", Lease: time.Minute, SentTo: a})
		if err != nil {
			t.Fatal(id, err)
		}
		if it.SentTo != (Destination{}) {
			t.Fatalf("%s, sent before the upgrade to nobody knows where, records %+v after one claim", id, it.SentTo)
		}
	}
}
