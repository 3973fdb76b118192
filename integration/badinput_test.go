package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/publisher"
	"github.com/nats-io/nats.go"
)

// Malformed JSON for --apply, a missing Nats-Msg-Id and a payload that reuses
// an applied id each end as a dead letter or conflict row with a reason; the
// consumer keeps going and the good messages around them are applied once.
func TestBadInputDeadLettersAndConflicts(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 100*time.Millisecond)
	ctx := context.Background()
	good := []event{{ID: "g1", Account: "a", Amount: 10}, {ID: "g2", Account: "b", Amount: 20}}
	w.publish(good[:1])
	if _, err := w.pub.Publish(ctx, publisher.Message{Subject: subject, ID: "bad-json", Data: []byte(`{"account": "a", amount: 1`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.js.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: []byte(`{"account":"a","amount":1000}`)}); err != nil {
		t.Fatal(err) // no Nats-Msg-Id
	}
	// Reuse g1's id with another payload, once the stream has forgotten it.
	consumertest.Eventually(t, 10*time.Second, "duplicate window to pass", func() bool {
		a, err := w.pub.Publish(ctx, publisher.Message{Subject: subject, ID: "g1", Data: []byte(`{"account":"a","amount":999}`)})
		return err == nil && !a.Duplicate
	})
	w.publish(good[1:])

	p := w.runConsumer(nil)
	w.finish(p, 30*time.Second)
	db := w.ledgerDB()
	w.checkExact(db, good)

	reasons := map[string]string{}
	rows, err := db.Query(`SELECT message_id, reason FROM dead_letters`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, reason string
		if err := rows.Scan(&id, &reason); err != nil {
			t.Fatal(err)
		}
		reasons[id] = reason
	}
	rows.Close()
	if len(reasons) != 2 || !strings.Contains(reasons["bad-json"], "not valid JSON") || !strings.Contains(reasons[""], "Nats-Msg-Id") {
		t.Fatalf("dead letters = %q", reasons)
	}
	if got := count(t, db, `SELECT count(*) FROM conflicts WHERE message_id = 'g1' AND existing_sha256 != new_sha256`); got != 1 {
		t.Fatalf("conflict rows for g1 = %d, want 1", got)
	}
	out, code := cli(t, "ledger", "conflicts", "--db", w.db, "--json")
	var listed []struct {
		MessageID      string `json:"message_id"`
		ExistingSHA256 string `json:"existing_sha256"` // hex, as the table says it
		NewSHA256      string `json:"new_sha256"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 1 || listed[0].MessageID != "g1" ||
		len(listed[0].ExistingSHA256) != 64 || len(listed[0].NewSHA256) != 64 {
		t.Fatalf("ledger conflicts: exit %d\n%s", code, out)
	}
	if out, code := cli(t, "ledger", "conflicts", "--db", w.db); code != 0 || !strings.Contains(out, "g1") || !strings.Contains(out, "NEW SHA256") ||
		!strings.Contains(out, listed[0].NewSHA256[:16]) {
		t.Fatalf("ledger conflicts: exit %d\n%s", code, out)
	}
	totals := p.stopped()
	if totals["dead_letters"] != 2 || totals["conflicts"] != 1 || totals["applied"] != 2 {
		t.Fatalf("totals = %v", totals)
	}
	// Nothing is left pending: the bad messages were terminated, not left to loop.
	if info := w.consumerInfo(); info.NumAckPending != 0 || info.NumRedelivered != 0 {
		t.Fatalf("consumer: ack pending %d, redelivered %d", info.NumAckPending, info.NumRedelivered)
	}
}
