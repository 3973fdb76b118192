package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats.go/jetstream"
)

type replaySummary struct {
	Applied, Duplicates, Conflicts, DeadLetters uint64
	Suppressed                                  int64
}

func runReplay(t testing.TB, w *world, extra ...string) replaySummary {
	t.Helper()
	args := append([]string{"replay", "--nats", w.srv.ClientURL(), "--db", w.db, "--stream", stream,
		"--schema", w.schema, "--apply", balanceApply, "--json", "--log-level", "warn"}, fastPlan...)
	p := start(t, nil, append(args, extra...)...)
	if code := p.wait(2 * time.Minute); code != 0 {
		t.Fatalf("replay exit %d\n%s", code, tail(p.output()))
	}
	var s struct {
		Applied     uint64 `json:"applied"`
		Duplicates  uint64 `json:"duplicates"`
		Conflicts   uint64 `json:"conflicts"`
		Suppressed  int64  `json:"suppressed"`
		DeadLetters uint64 `json:"dead_letters"`
	}
	out := p.output()
	line := out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]
	if err := json.Unmarshal([]byte(line), &s); err != nil {
		t.Fatalf("replay summary %q: %v\n%s", line, err, tail(out))
	}
	return replaySummary{s.Applied, s.Duplicates, s.Conflicts, s.DeadLetters, s.Suppressed}
}

// Replay rebuilds a fresh ledger from the stream with effects suppressed,
// and a second replay over the same ledger is all duplicates.
func TestReplayRebuildsWithEffectsSuppressed(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Minute)
	dest := webhooktest.NewDestination(t, false)
	evs := makeEvents(randFor(t), w.pub, 500)
	w.publish(evs)

	// No run ever consumed this stream: the replay is told how far messages
	// count as handled elsewhere.
	got := runReplay(t, w, "--webhook", dest.URL(), "--to-seq", "500")
	if got.Applied != 500 || got.Duplicates != 0 || got.Suppressed != 500 {
		t.Fatalf("first replay: %+v", got)
	}
	db := w.ledgerDB()
	w.checkExact(db, evs)
	if n := len(dest.Items()); n != 0 {
		t.Fatalf("replay sent %d webhooks; effects must be suppressed", n)
	}
	if n := count(t, db, `SELECT count(*) FROM outbox WHERE status = 'suppressed'`); n != 500 {
		t.Fatalf("suppressed rows %d", n)
	}
	again := runReplay(t, w, "--from-seq", "101", "--to-seq", "500")
	if again.Applied != 0 || again.Duplicates != 400 {
		t.Fatalf("second replay from seq 101: %+v", again)
	}
	w.checkExact(db, evs)
}

// Pruning then replaying cannot double-apply anything still in the stream:
// rows are pruned only below the stream's first sequence.
func TestReplayAfterPruneCannotDoubleApply(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 100*time.Millisecond)
	evs := makeEvents(randFor(t), w.pub, 300)
	w.publish(evs)
	run := w.runConsumer(nil, "--prune-interval", "0")
	w.finish(run, 30*time.Second)

	// The stream drops its first 100 messages (as max-age or limits would).
	s, err := w.js.Stream(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(t.Context(), jetstream.WithPurgeSequence(101)); err != nil {
		t.Fatal(err)
	}
	// Rows must also be older than the 100ms duplicate window: prune until
	// they are, and never more than the 100 gone from the stream.
	var pruned int64
	consumertest.Eventually(t, 10*time.Second, "the 100 rows gone from the stream pruned", func() bool {
		p := start(t, nil, "ledger", "prune", "--db", w.db, "--nats", w.srv.ClientURL(), "--stream", stream, "--retention", "100ms", "--json")
		if code := p.wait(30 * time.Second); code != 0 {
			t.Fatalf("prune exit %d\n%s", code, p.output())
		}
		var res struct {
			Processed int64 `json:"processed"`
		}
		if err := json.Unmarshal([]byte(strings.TrimSpace(p.output())), &res); err != nil {
			t.Fatalf("prune output %q: %v", p.output(), err)
		}
		pruned += res.Processed
		return pruned >= 100
	})
	if pruned != 100 {
		t.Fatalf("pruned %d rows, want the 100 below the stream's first sequence", pruned)
	}
	db := w.ledgerDB()
	if n := count(t, db, `SELECT count(*) FROM processed_messages`); n != 200 {
		t.Fatalf("rows after prune %d, want the 200 still in the stream", n)
	}
	// The built-in handler's events rows (payloads) follow the ledger's retention.
	if n := count(t, db, `SELECT count(*) FROM events`); n != 200 {
		t.Fatalf("events rows after prune %d, want 200: pruned with their ledger rows", n)
	}
	got := runReplay(t, w)
	if got.Applied != 0 || got.Duplicates != 200 {
		t.Fatalf("replay after prune: %+v; want 200 duplicates and nothing applied", got)
	}
	if bal, want := count(t, db, `SELECT sum(amount) FROM balances`), sum(evs); bal != want {
		t.Fatalf("balances %d, want %d", bal, want)
	}
}

// A retention shorter than the stream's duplicate window is refused.
func TestPruneRefusesRetentionInsideDuplicateWindow(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Hour)
	w.publish(makeEvents(randFor(t), w.pub, 1))
	run := w.runConsumer(nil, "--retention", "1m")
	if code := run.wait(30 * time.Second); code != 2 || !strings.Contains(run.output(), "duplicate window") {
		t.Fatalf("run exit %d\n%s", code, tail(run.output()))
	}
	p := start(t, nil, "ledger", "prune", "--db", w.db, "--nats", w.srv.ClientURL(), "--stream", stream, "--retention", "1m")
	if code := p.wait(30 * time.Second); code != 2 || !strings.Contains(p.output(), "duplicate window") {
		t.Fatalf("prune exit %d\n%s", code, p.output())
	}
}

// A replay never swallows an effect that run has yet to send. Five events
// are sent by run; five more are published while it is stopped; a replay
// with --webhook runs; then run again: every event is delivered, each once.
// By default the replay stops at the live durable's ack floor; with
// --to-seq past it, the effects of the messages beyond are queued for run
// instead of suppressed.
func TestReplayNeverSwallowsRunsEffects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		extra []string
	}{
		{name: "to the ack floor"},
		{name: "past the ack floor", extra: []string{"--to-seq", "10"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, time.Minute)
			dest := webhooktest.NewDestination(t, false)
			evs := makeEvents(randFor(t), w.pub, 10)
			w.publish(evs[:5])
			run := w.runConsumer(nil, "--webhook", dest.URL())
			consumertest.Eventually(t, 30*time.Second, "the first five delivered", func() bool { return len(dest.Items()) == 5 })
			w.finish(run, 30*time.Second)
			w.publish(evs[5:])

			runReplay(t, w, append([]string{"--webhook", dest.URL()}, tc.extra...)...)
			run = w.runConsumer(nil, "--webhook", dest.URL())
			consumertest.Eventually(t, 30*time.Second, "all ten delivered", func() bool { return len(dest.Items()) >= 10 })
			w.finish(run, 30*time.Second)
			seen := map[string]int{}
			for _, it := range dest.Items() {
				seen[it.MessageID]++
			}
			for _, e := range evs {
				if seen[e.ID] != 1 {
					t.Errorf("event %s delivered %d times, want once", e.ID, seen[e.ID])
				}
			}
			w.checkExact(w.ledgerDB(), evs)
		})
	}
}

// A late re-send of an applied id (after the duplicate window) that is still
// in the stream keeps its ledger row through a prune, so a replay meets it
// as a duplicate: never applied twice, never a dead letter.
func TestLateResendSurvivesPruneAndReplay(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 100*time.Millisecond)
	ev := makeEvents(randFor(t), w.pub, 1)[0]
	w.publish([]event{ev})
	// The provider re-sends the same event once the window has passed.
	consumertest.Eventually(t, 10*time.Second, "a re-send stored past the duplicate window", func() bool {
		return !w.publish([]event{ev})[0].Duplicate
	})
	run := w.runConsumer(nil, "--prune-interval", "0")
	w.finish(run, 30*time.Second)
	s, err := w.js.Stream(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// The stream drops the first copy; the re-send stays.
	if err := s.Purge(t.Context(), jetstream.WithPurgeSequence(info.State.LastSeq)); err != nil {
		t.Fatal(err)
	}
	db := w.ledgerDB()
	consumertest.Eventually(t, 10*time.Second, "the retention to pass", func() bool {
		return count(t, db, `SELECT count(*) FROM processed_messages WHERE last_seen_at < ?`, time.Now().Add(-200*time.Millisecond).UnixMilli()) == 1
	})
	p := start(t, nil, "ledger", "prune", "--db", w.db, "--nats", w.srv.ClientURL(), "--stream", stream, "--retention", "100ms", "--json")
	if code := p.wait(30 * time.Second); code != 0 {
		t.Fatalf("prune exit %d\n%s", code, p.output())
	}
	if n := count(t, db, `SELECT count(*) FROM processed_messages`); n != 1 {
		t.Fatalf("ledger rows after prune: %d, want 1 (a copy is still in the stream)", n)
	}
	got := runReplay(t, w, "--to-seq", fmt.Sprint(info.State.LastSeq))
	if got.Applied != 0 || got.Duplicates != 1 || got.DeadLetters != 0 {
		t.Fatalf("replay: %+v; want the re-send as a duplicate", got)
	}
	if bal := count(t, db, `SELECT sum(amount) FROM balances`); bal != ev.Amount {
		t.Fatalf("balance %d, want %d", bal, ev.Amount)
	}
}
