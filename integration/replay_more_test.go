package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/publisher"
	"github.com/nats-io/nats.go/jetstream"
)

// fixedApply is balanceApply after the operator fixed it to take a null
// amount as 0: what makes a poisoned event applicable.
var fixedApply = strings.Replace(balanceApply, "json_extract(:data, '$.amount')", "coalesce(json_extract(:data, '$.amount'), 0)", 1)

// A message run dead-lettered is applied by a replay with the fix, its
// effect queued (run never sent it) and its dead letter removed; run then
// sends it, once.
func TestReplayAppliesADeadLetterWithItsEffect(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Minute)
	dest := webhooktest.NewDestination(t, false)
	good := event{ID: "good-1", Account: "a", Amount: 5}
	w.publish([]event{good})
	if _, err := w.pub.Publish(context.Background(), publisher.Message{Subject: subject, ID: "bad-1", Data: []byte(`{"account":"a","amount":null}`)}); err != nil {
		t.Fatal(err)
	}
	run := w.runConsumer(nil, "--webhook", dest.URL(), "--max-deliver", "1")
	consumertest.Eventually(t, 30*time.Second, "good-1 sent", func() bool { return len(dest.Items()) == 1 })
	w.finish(run, 30*time.Second)
	db := w.ledgerDB()
	if n := count(t, db, `SELECT count(*) FROM dead_letters WHERE message_id = 'bad-1'`); n != 1 {
		t.Fatalf("dead letters for bad-1: %d, want 1", n)
	}

	got := runReplay(t, w, "--webhook", dest.URL(), "--apply", fixedApply)
	if got.Applied != 1 || got.Duplicates != 1 {
		t.Fatalf("replay: %+v; want bad-1 applied and good-1 a duplicate", got)
	}
	if n := count(t, db, `SELECT count(*) FROM dead_letters`); n != 0 {
		t.Fatalf("%d dead letters left after the replay applied them", n)
	}
	run = start(t, nil, append([]string{"run", "--nats", w.srv.ClientURL(), "--db", w.db, "--stream", stream, "--schema", w.schema,
		"--log-format", "json", "--apply", fixedApply, "--webhook", dest.URL()}, fastPlan...)...)
	consumertest.Eventually(t, 30*time.Second, "bad-1 sent", func() bool { return len(dest.Items()) == 2 })
	w.finish(run, 30*time.Second)
	sent := map[string]int{}
	for _, it := range dest.Items() {
		sent[it.MessageID]++
	}
	if sent["good-1"] != 1 || sent["bad-1"] != 1 {
		t.Fatalf("deliveries %v, want each event once", sent)
	}
}

// One message retrying with backoff pins the ack floor while run applies and
// acks everything after it. If the host is lost then, a replay on a new host
// goes up to the last message run was delivered, so the rebuilt state lacks
// nothing; the effects run may have sent meanwhile go to review, none twice.
func TestReplayRebuildsWhatRunAckedPastTheFloor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		effects []string
	}{
		{name: "no effects", effects: []string{"--no-effects"}},
		{name: "webhook"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, time.Minute)
			dest := webhooktest.NewDestination(t, false)
			effects := tc.effects
			if effects == nil {
				effects = []string{"--webhook", dest.URL()}
			}
			if _, err := w.pub.Publish(context.Background(), publisher.Message{Subject: subject, ID: "bad-1", Data: []byte(`{"account":"a","amount":null}`)}); err != nil {
				t.Fatal(err)
			}
			good := makeEvents(randFor(t), w.pub, 9)
			w.publish(good)
			var runEffects []string
			if tc.effects == nil {
				runEffects = effects
			}
			run := w.runConsumer(nil, append([]string{"--prune-interval", "0"}, runEffects...)...)
			old := w.ledgerDB()
			consumertest.Eventually(t, 30*time.Second, "the nine good events applied and sent, bad-1 retrying", func() bool {
				return count(t, old, `SELECT count(*) FROM processed_messages`) == 9 && w.consumerInfo().NumAckPending == 1 &&
					(tc.effects != nil || len(dest.Items()) == 9)
			})
			run.kill() // the host is lost

			nw := *w
			nw.t = t
			nw.db = w.db + ".newhost"
			got := runReplay(t, &nw, append([]string{"--apply", fixedApply}, effects...)...)
			if got.Applied != 10 {
				t.Fatalf("replay on the new host: %+v; want all 10 applied", got)
			}
			run = start(t, nil, append(append([]string{"run", "--nats", w.srv.ClientURL(), "--db", nw.db, "--stream", stream, "--schema", w.schema,
				"--log-format", "json", "--apply", fixedApply, "--prune-interval", "0"}, fastPlan...), runEffects...)...)
			nw.finish(run, 60*time.Second)
			db := nw.ledgerDB()
			if bal, want := count(t, db, `SELECT coalesce(sum(amount), 0) FROM balances`), sum(good); bal != want {
				t.Fatalf("rebuilt balance %d, want %d", bal, want)
			}
			if tc.effects != nil {
				return
			}
			// Nothing sent twice: the nine the old host sent are in review on
			// the new one, for a person to settle; so is bad-1's (run was
			// delivered it, nobody can tell).
			seen := map[string]int{}
			for _, it := range dest.Items() {
				seen[it.MessageID]++
			}
			for id, n := range seen {
				if n != 1 {
					t.Errorf("%s delivered %d times", id, n)
				}
			}
			if n := count(t, db, `SELECT count(*) FROM outbox WHERE status = 'review'`); n != 10 {
				t.Fatalf("review rows on the new host: %d, want 10", n)
			}
		})
	}
}

// A replay that would apply messages run has not handled, without being told
// run's effects, is refused: applied without an outbox row, their effects
// would be lost, since run then meets them as duplicates.
func TestReplayPastTheFloorNeedsRunsEffects(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Minute)
	dest := webhooktest.NewDestination(t, false)
	evs := makeEvents(randFor(t), w.pub, 10)
	w.publish(evs[:5])
	run := w.runConsumer(nil, "--webhook", dest.URL())
	consumertest.Eventually(t, 30*time.Second, "the first five delivered", func() bool { return len(dest.Items()) == 5 })
	w.finish(run, 30*time.Second)
	w.publish(evs[5:])
	args := append([]string{"replay", "--nats", w.srv.ClientURL(), "--db", w.db, "--stream", stream,
		"--schema", w.schema, "--apply", balanceApply, "--to-seq", "10"}, fastPlan...)
	out, code := cli(t, args...)
	if code != 2 || !strings.Contains(out, "--no-effects") {
		t.Fatalf("replay past the floor without --webhook: exit %d\n%s", code, out)
	}
	if n := count(t, w.ledgerDB(), `SELECT count(*) FROM processed_messages`); n != 5 {
		t.Fatalf("ledger rows %d after a refused replay, want 5", n)
	}
}

// A re-send that reached the stream inside the retention but that the
// consumer has not handled yet (run stopped, or behind a backlog) keeps its
// id's row: prune counts the retention back from the oldest message the
// durable has not handled, so run meets the re-send as a duplicate.
func TestPruneKeepsRowsForUnconsumedResends(t *testing.T) {
	t.Parallel()
	const retention = 3 * time.Second
	w := newWorld(t, 100*time.Millisecond)
	ev := event{ID: "evt-late", Account: "a", Amount: 7}
	w.publish([]event{ev})
	run := w.runConsumer(nil, "--prune-interval", "0")
	w.finish(run, 30*time.Second)
	db := w.ledgerDB()
	var lastSeen int64
	if err := db.QueryRow(`SELECT last_seen_at FROM processed_messages WHERE message_id = ?`, ev.ID).Scan(&lastSeen); err != nil {
		t.Fatal(err)
	}

	// The provider re-sends the event once the duplicate window has passed,
	// well inside the retention; run is not running (or is behind).
	consumertest.Eventually(t, 10*time.Second, "a re-send stored past the duplicate window", func() bool {
		return !w.publish([]event{ev})[0].Duplicate
	})
	resentAfter := time.Since(time.UnixMilli(lastSeen))
	if resentAfter >= retention {
		t.Fatalf("re-send came %s after the row was last seen; the test needs it inside the %s retention", resentAfter, retention)
	}
	s, err := w.js.Stream(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// The stream drops the first copy (limits); the re-send stays, unconsumed.
	if err := s.Purge(t.Context(), jetstream.WithPurgeSequence(info.State.LastSeq)); err != nil {
		t.Fatal(err)
	}
	consumertest.Eventually(t, 10*time.Second, "the retention to pass", func() bool {
		return time.Since(time.UnixMilli(lastSeen)) > retention+200*time.Millisecond
	})
	p := start(t, nil, "ledger", "prune", "--db", w.db, "--nats", w.srv.ClientURL(), "--stream", stream,
		"--retention", retention.String(), "--json")
	if code := p.wait(30 * time.Second); code != 0 {
		t.Fatalf("prune exit %d\n%s", code, p.output())
	}
	var res struct {
		Processed int64 `json:"processed"`
	}
	_ = json.Unmarshal([]byte(strings.TrimSpace(p.output())), &res)
	t.Logf("prune removed %d ledger rows while copy seq %d of %s was in the stream, unconsumed", res.Processed, info.State.LastSeq, ev.ID)

	run = w.runConsumer(nil, "--prune-interval", "0")
	w.finish(run, 30*time.Second)
	if bal := count(t, db, `SELECT sum(amount) FROM balances`); bal != ev.Amount {
		t.Fatalf("balance %d, want %d: the re-send (stored %s after the row was last seen, inside the %s retention) was applied again",
			bal, ev.Amount, resentAfter.Round(time.Millisecond), retention)
	}
}

// A NATS-sink run's ledger can be replayed past its ack floor: replay
// takes run's --effects-subject as it takes --webhook, records the effects
// of the messages run was never delivered for run's NATS sink, and run
// sends each once into the effects stream. Before, replay had --webhook
// and --no-effects only and refused (found by the nemesis's natssink
// topology, counted as a refusal).
func TestReplayPastTheFloorRecordsNATSSinkEffects(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Minute)
	sinkArgs := []string{"--effects-subject", "effects.out", "--effects-stream", "OUT"}
	evs := makeEvents(randFor(t), w.pub, 10)
	w.publish(evs[:5])
	run := w.runConsumer(nil, sinkArgs...)
	consumertest.Eventually(t, 30*time.Second, "the first five sent", func() bool { return streamMsgs(t, w.js, "OUT") == 5 })
	w.finish(run, 30*time.Second)
	w.publish(evs[5:])
	args := append([]string{"replay", "--nats", w.srv.ClientURL(), "--db", w.db, "--stream", stream,
		"--schema", w.schema, "--apply", balanceApply, "--to-seq", "10", "--effects-subject", "effects.out", "--json"}, fastPlan...)
	out, code := cli(t, args...)
	if code != 0 {
		t.Fatalf("replay past the floor with run's --effects-subject: exit %d\n%s", code, out)
	}
	db := w.ledgerDB()
	if n := count(t, db, `SELECT count(*) FROM outbox WHERE sink = 'nats' AND status = 'queued'`); n != 5 {
		t.Fatalf("%d effects queued for run's NATS sink after the replay, want 5 (the messages run never had)", n)
	}
	run = w.runConsumer(nil, sinkArgs...)
	consumertest.Eventually(t, 30*time.Second, "the replayed effects sent", func() bool {
		return count(t, db, `SELECT count(*) FROM outbox WHERE status = 'sent'`) == 10
	})
	w.finish(run, 30*time.Second)
	if n := streamMsgs(t, w.js, "OUT"); n != 10 {
		t.Fatalf("the effects stream holds %d messages for 10 applied events, want 10: one each", n)
	}
	w.checkExact(db, evs)
}
