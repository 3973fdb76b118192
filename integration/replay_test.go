package integration

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats.go/jetstream"
)

type replaySummary struct {
	Applied, Duplicates, Conflicts, DeadLetters uint64
	Suppressed                                  int64
}

func runReplay(t *testing.T, w *world, extra ...string) replaySummary {
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
	w := newWorld(t, time.Minute)
	dest := consumertest.NewDestination(t, false)
	evs := makeEvents(randFor(t), w.pub, 500)
	w.publish(evs)

	got := runReplay(t, w, "--webhook", dest.URL())
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
	again := runReplay(t, w, "--from-seq", "101")
	if again.Applied != 0 || again.Duplicates != 400 {
		t.Fatalf("second replay from seq 101: %+v", again)
	}
	w.checkExact(db, evs)
}

// Pruning then replaying cannot double-apply anything still in the stream:
// rows are pruned only below the stream's first sequence.
func TestReplayAfterPruneCannotDoubleApply(t *testing.T) {
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
