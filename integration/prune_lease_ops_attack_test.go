package integration

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/publisher"
	"github.com/nats-io/nats.go/jetstream"
)

// Helper-18's operations on the built binary: plain runs restarted with
// new flags (another --deadline, so another lease TTL) after SIGKILL and
// SIGTERM and beside a live run; `ledger prune` in another process beside
// a live run whose batches keep the writer busy.

// attackOpsRun starts `jetledger run` on the world with --deadline d (the
// rest of fastPlan) and no prune of its own.
func attackOpsRun(w *world, d string, extra ...string) *proc {
	w.t.Helper()
	return attackOpsRunEnv(w, nil, d, extra...)
}

// attackOpsRunEnv is attackOpsRun with env added to the process's.
func attackOpsRunEnv(w *world, env []string, d string, extra ...string) *proc {
	w.t.Helper()
	args := []string{"run", "--nats", w.srv.ClientURL(), "--db", w.db, "--stream", stream,
		"--schema", w.schema, "--apply", balanceApply, "--log-format", "json",
		"--deadline", d, "--buffer-wait", "200ms", "--commit-margin", "300ms", "--ack-margin", "200ms", "--prune-interval", "0"}
	return start(w.t, env, append(args, extra...)...)
}

// attackOpsFirstRun publishes first of total events on a world of its
// own, starts run with --deadline 4s and waits until it committed them.
func attackOpsFirstRun(t *testing.T, total, first int) (*world, []event, *proc, *sql.DB) {
	w := newWorld(t, time.Minute)
	evs := makeEvents(randFor(t), w.pub, total)
	w.publish(evs[:first])
	p1 := attackOpsRun(w, "4s")
	db := w.ledgerDB()
	consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("the first run commits %d", first), func() bool {
		return count(t, db, `SELECT count(*) FROM processed_messages`) == first
	})
	// And acks them: a plain run paused between its commit and its ack
	// past the lease leaves the batch to the next run, on its own ledger
	// (docs/scaling.md), which is not what these tests try.
	w.waitDrained(2 * time.Minute)
	return w, evs, p1, db
}

// attackOpsLogged says whether p logged a record whose msg holds s.
func attackOpsLogged(p *proc, s string) bool {
	_, ok := p.record(func(r map[string]any) bool {
		m, _ := r["msg"].(string)
		return strings.Contains(m, s)
	})
	return ok
}

// A plain run SIGKILLed while it holds its durable's lease, restarted at
// once with another --deadline: the new run waits out the dead run's key
// of another timing, then consumes everything exactly once and exits 0.
func TestAttackPlainRunRestartedWithANewDeadlineAfterSIGKILL(t *testing.T) {
	t.Parallel()
	w, evs, p1, db := attackOpsFirstRun(t, 200, 100)
	p1.kill()
	began := time.Now()
	p2 := attackOpsRun(w, "1s")
	w.publish(evs[100:])
	w.waitDrained(3 * time.Minute)
	t.Logf("the run of new flags drained %s after the SIGKILL; waited for the dead key: %v", time.Since(began).Round(time.Millisecond),
		attackOpsLogged(p2, "held by a run of another timing"))
	w.finish(p2, time.Minute)
	w.checkExact(db, evs)
}

// A plain run stopped cleanly (SIGTERM) frees its key: a run restarted at
// once with another --deadline does not wait for it, consumes everything
// exactly once and exits 0.
func TestAttackPlainRunRestartedWithANewDeadlineAfterSIGTERM(t *testing.T) {
	t.Parallel()
	w, evs, p1, db := attackOpsFirstRun(t, 200, 100)
	p1.stop()
	if code := p1.wait(time.Minute); code != 0 {
		t.Fatalf("the first run's SIGTERM: exit %d", code)
	}
	p2 := attackOpsRun(w, "1s")
	w.publish(evs[100:])
	w.finish(p2, 3*time.Minute)
	if attackOpsLogged(p2, "held by a run of another timing") || attackOpsLogged(p2, "lease is held") {
		t.Errorf("the run of new flags waited for a key the clean stop should have freed:\n%s", p2.output())
	}
	w.checkExact(db, evs)
}

// A run of new flags started beside a live run of the durable (another
// ledger file, as on another host) is refused (exit 1); the live run
// consumes on, exactly once, and exits 0 on SIGTERM.
func TestAttackARunOfNewFlagsBesideALiveRunIsRefused(t *testing.T) {
	t.Parallel()
	w, evs, p1, db := attackOpsFirstRun(t, 300, 100)
	other := worldIn(t, t.TempDir())
	other.srv, other.js, other.pub = w.srv, w.js, w.pub
	p2 := attackOpsRun(other, "1s")
	w.publish(evs[100:200]) // while the second waits
	if code := p2.wait(3 * time.Minute); code != 1 {
		t.Fatalf("the run of new flags beside a live run: exit %d, want 1\n%s", code, p2.output())
	}
	w.publish(evs[200:])
	w.finish(p1, 3*time.Minute)
	w.checkExact(db, evs)
	if _, err := os.Stat(other.db); err == nil {
		odb, err := sql.Open("sqlite", other.db+"?_pragma=busy_timeout(10000)&_pragma=query_only(ON)")
		if err != nil {
			t.Fatal(err)
		}
		defer odb.Close()
		var n int
		_ = odb.QueryRow(`SELECT count(*) FROM processed_messages`).Scan(&n)
		if n != 0 {
			t.Fatalf("the refused run committed %d messages", n)
		}
	}
}

// `jetledger ledger prune` in another process while `run` is live and
// consuming a steady flow: the prune (whose steps cannot see the run's
// batches waiting, and rest for them instead) exits 0 having removed the
// rows below the stream's first sequence, the run consumes every message
// exactly once beside it and exits 0, and ledger rows and events rows
// follow each other.
func TestAttackALedgerPruneBesideALiveRun(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 100*time.Millisecond)
	evs := makeEvents(randFor(t), w.pub, 4000)
	const gone = 3000
	w.publish(evs[:gone+200])
	run := attackOpsRun(w, "1s")
	db := w.ledgerDB()
	consumertest.Eventually(t, 3*time.Minute, "the run commits the first messages", func() bool {
		return count(t, db, `SELECT count(*) FROM processed_messages`) == gone+200
	})
	s, err := w.js.Stream(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(t.Context(), jetstream.WithPurgeSequence(gone+1)); err != nil {
		t.Fatal(err)
	}
	// A flow the run consumes while the prune runs.
	flowing := make(chan struct{})
	go func() {
		defer close(flowing)
		for i := gone + 200; i < len(evs); i += 20 {
			w.publish(evs[i:min(i+20, len(evs))])
		}
	}()
	var pruned int64
	tries := 0
	consumertest.Eventually(t, 2*time.Minute, "the rows gone from the stream pruned", func() bool {
		tries++
		p := start(t, nil, "ledger", "prune", "--db", w.db, "--nats", w.srv.ClientURL(), "--stream", stream, "--retention", "100ms", "--json")
		if code := p.wait(time.Minute); code != 0 {
			t.Fatalf("ledger prune beside a live run: exit %d\n%s", code, p.output())
		}
		var res struct {
			Processed int64 `json:"processed"`
		}
		if err := json.Unmarshal([]byte(strings.TrimSpace(p.output())), &res); err != nil {
			t.Fatalf("prune output %q: %v", p.output(), err)
		}
		pruned += res.Processed
		return pruned >= gone
	})
	<-flowing
	t.Logf("pruned %d rows in %d prunes beside the live run", pruned, tries)
	w.finish(run, 3*time.Minute)
	if pruned != gone {
		t.Errorf("pruned %d rows, want the %d below the stream's first sequence", pruned, gone)
	}
	if got, want := count(t, db, `SELECT sum(amount) FROM balances`), sum(evs); got != want {
		t.Fatalf("balances %d, want %d", got, want)
	}
	if n := count(t, db, `SELECT count(*) FROM processed_messages`); n != len(evs)-gone {
		t.Errorf("%d ledger rows left, want %d", n, len(evs)-gone)
	}
	if n := count(t, db, `SELECT count(*) FROM events WHERE message_id NOT IN (SELECT message_id FROM processed_messages)`); n != 0 {
		t.Errorf("%d events rows without their ledger row", n)
	}
	if n := count(t, db, `SELECT count(*) FROM processed_messages WHERE message_id NOT IN (SELECT message_id FROM events)`); n != 0 {
		t.Errorf("%d ledger rows without their events row", n)
	}
	if _, bad := run.record(func(r map[string]any) bool { return r["level"] == "ERROR" }); bad {
		t.Errorf("the run logged an error beside the prune:\n%s", run.output())
	}
}

// A run of new flags waiting for a live run's key of another timing is
// stopped (SIGTERM) while it waits: it exits 0 at once, having consumed
// nothing, and the live run consumes on and exits 0.
func TestAttackARunWaitingForAKeyOfAnotherTimingStopsCleanly(t *testing.T) {
	t.Parallel()
	w, evs, p1, db := attackOpsFirstRun(t, 100, 50)
	other := worldIn(t, t.TempDir())
	other.srv, other.js, other.pub = w.srv, w.js, w.pub
	p2 := attackOpsRun(other, "1s")
	consumertest.Eventually(t, 2*time.Minute, "the second run waits for the key", func() bool {
		return attackOpsLogged(p2, "held by a run of another timing")
	})
	began := time.Now()
	p2.signal(syscall.SIGTERM)
	if code := p2.wait(30 * time.Second); code != 0 {
		t.Fatalf("the waiting run's SIGTERM: exit %d, want 0\n%s", code, p2.output())
	}
	t.Logf("the waiting run exited %s after its SIGTERM", time.Since(began).Round(time.Millisecond))
	w.publish(evs[50:])
	w.finish(p1, 2*time.Minute)
	w.checkExact(db, evs)
}

// An owned partition pair (owner A --changelog --standby, standby B) on
// one server, both pruning every 300ms with a 1s retention; the stream
// drops its first 2000 messages while a flow goes on, and as soon as A's
// prune has removed some of them, not all, A is SIGKILLed, or SIGTERMed,
// or its changelog streams are deleted under it. Whoever owns the
// partitions after it finishes the prune; the other host (A started again
// as a standby after a signal) catches up. At the end both hosts' files
// hold every message's effect once (balances), exactly the rows still in
// the stream, and no events row without its ledger row or the reverse.
func TestAttackAnOwnerMidPrune(t *testing.T) {
	t.Parallel()
	for _, op := range []string{"SIGKILL", "SIGTERM", "changelog deleted"} {
		t.Run(op, func(t *testing.T) { attackOpsOwnerMidPrune(t, op) })
	}
}

func attackOpsOwnerMidPrune(t *testing.T, op string) {
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	pub, err := publisher.New(js, publisher.Config{Attempts: 10, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r := &ownedRig{t: t, stream: "PRN", pub: pub, schema: worldIn(t, t.TempDir()).schema}
	run := func(dir string, role ...string) *proc {
		args := append([]string{"run", "--nats", srv.ClientURL(), "--db", filepath.Join(dir, "ledger.db"), "--stream", r.stream,
			"--subjects", "pay.*", "--partitions", "2", "--replicas", "1", "--partition", "0,1",
			"--schema", r.schema, "--apply", balanceApply, "--log-format", "json",
			"--duplicate-window", "1s", "--retention", "1s", "--prune-interval", "300ms"}, fastPlan...)
		return start(t, nil, append(args, role...)...)
	}
	total := func(dir, q string) int {
		n := 0
		for i := range ownedDurables {
			m, _ := fileInt(partDB(dir, i), q)
			n += m
		}
		return n
	}
	drained := func() bool {
		for _, d := range ownedDurables {
			c, err := js.Consumer(t.Context(), r.stream, d)
			if err != nil {
				return false
			}
			if info := c.CachedInfo(); info.NumPending != 0 || info.NumAckPending != 0 {
				return false
			}
		}
		return true
	}
	const gone = 2000
	dirA, dirB := t.TempDir(), t.TempDir()
	pathsA, pathsB := []string{partDB(dirA, 0), partDB(dirA, 1)}, []string{partDB(dirB, 0), partDB(dirB, 1)}
	A := run(dirA, "--changelog", "--standby")
	r.waitRole(A, "A", "owner", 0, 1)
	B := run(dirB, "--standby")
	r.waitStandsBy(B, "B")
	all := makeEvents(randFor(t), pub, 4010)
	evs := all[:4000] // the last 10 are published once the owner has applied these
	r.publish(evs[:2500])
	consumertest.Eventually(t, 3*time.Minute, "A applies 2500", func() bool {
		return total(dirA, `SELECT count(*) FROM processed_messages`) == 2500
	})
	waitSamePosition(t, "B caught up", pathsA, pathsB)
	s, err := js.Stream(t.Context(), r.stream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(t.Context(), jetstream.WithPurgeSequence(gone+1)); err != nil {
		t.Fatal(err)
	}
	flowing := make(chan struct{})
	go func() {
		defer close(flowing)
		for i := 2500; i < len(evs); i += 20 {
			r.publish(evs[i:min(i+20, len(evs))])
		}
	}()
	below := fmt.Sprintf(`SELECT count(*) FROM processed_messages WHERE last_seq <= %d`, gone)
	consumertest.Eventually(t, 3*time.Minute, "A's prune under way", func() bool {
		return total(dirA, below) < gone
	})
	owner, copyDir, copies, nows := B, dirA, pathsA, pathsB
	var again *proc
	switch op {
	case "SIGKILL":
		A.kill()
	case "SIGTERM":
		A.signal(syscall.SIGTERM)
		if code := A.wait(time.Minute); code != 0 {
			t.Errorf("A's SIGTERM mid-prune: exit %d, want 0", code)
		}
	case "changelog deleted":
		for i := range ownedDurables {
			name, _ := changelog.Names(r.stream, ownedDurables[i])
			if err := js.DeleteStream(t.Context(), name); err != nil {
				t.Fatalf("delete %s: %v", name, err)
			}
		}
		owner, copyDir, copies, nows = A, dirB, pathsB, pathsA
	}
	t.Logf("%s with %d of the %d rows gone from the stream still in A's files", op, total(dirA, below), gone)
	if op != "changelog deleted" {
		r.waitRole(B, "B", "owner", 0, 1)
	}
	<-flowing
	ownerDir := dirB
	if owner == A {
		ownerDir = dirA
	}
	// Every message applied once, and the owner's prune going on: rows
	// gone from the stream may stay while the partition's durable's ack
	// floor is below the stream's last message (prune's Unconsumed is the
	// next message of any partition; see the report), so their number is
	// compared with the copy's, not with zero.
	above := fmt.Sprintf(`SELECT count(*) FROM processed_messages WHERE last_seq > %d`, gone)
	consumertest.Eventually(t, 3*time.Minute, "the owner applies the rest", func() bool {
		return drained() && total(ownerDir, above) == len(evs)-gone && total(ownerDir, `SELECT coalesce(sum(amount), 0) FROM balances`) == sum(evs)
	})
	t.Logf("the owner after %s: %d rows gone from the stream left", op, total(ownerDir, below))
	// New messages after it: does the owner (and its copy) go on?
	r.publish(all[4000:])
	evs = all
	consumertest.Eventually(t, 2*time.Minute, "the owner applies 10 more", func() bool {
		return drained() && total(ownerDir, above) == len(evs)-gone
	})
	if op != "changelog deleted" {
		again = run(dirA, "--standby")
		r.waitStandsBy(again, "A again")
	}
	waitSamePosition(t, "the copy caught up", nows, copies)
	if again != nil {
		stopOK(t, again, "A again")
		stopOK(t, B, "B")
	} else {
		stopOK(t, B, "B")
		stopOK(t, A, "A")
	}
	for name, dir := range map[string]string{"owner": ownerDir, "copy": copyDir} {
		if got := total(dir, `SELECT coalesce(sum(amount), 0) FROM balances`); got != sum(evs) {
			t.Errorf("%s: balances %d, want %d", name, got, sum(evs))
		}
		if got := total(dir, above); got != len(evs)-gone {
			t.Errorf("%s: %d ledger rows of messages in the stream, want %d", name, got, len(evs)-gone)
		}
		// Rows gone from the stream are not compared between the two: the
		// owner's pruner goes on after the copy caught up and stopped
		// (the ledger's TestAttackACutPruneStepLeavesTheStandbyTheOwnersCopy
		// compares the files at one position).
		if got := total(dir, `SELECT count(*) FROM events WHERE message_id NOT IN (SELECT message_id FROM processed_messages)`); got != 0 {
			t.Errorf("%s: %d events rows without their ledger row", name, got)
		}
		if got := total(dir, `SELECT count(*) FROM processed_messages WHERE message_id NOT IN (SELECT message_id FROM events)`); got != 0 {
			t.Errorf("%s: %d ledger rows without their events row", name, got)
		}
	}
	_ = owner
}

// A plain run paused (SIGSTOP) past its lease's TTL while a run of new
// flags (another host's ledger) waits for its key: the waiting run takes
// the expired key and consumes. Continued (SIGCONT), the paused run must
// find at its next renewal that another run holds its durable and stop
// (exit 1), as it does when a run of its own timing took it: two runs
// must never go on consuming one durable on two ledgers.
func TestAttackAPausedRunWhoseKeyARunOfNewFlagsTookStops(t *testing.T) {
	t.Parallel()
	w, evs, p1, db := attackOpsFirstRun(t, 300, 100)
	other := worldIn(t, t.TempDir())
	other.srv, other.js, other.pub = w.srv, w.js, w.pub
	p2 := attackOpsRun(other, "1s")
	consumertest.Eventually(t, 2*time.Minute, "the second run waits for the key", func() bool {
		return attackOpsLogged(p2, "held by a run of another timing")
	})
	p1.signal(syscall.SIGSTOP)
	w.publish(evs[100:200])
	odb := other.ledgerDB()
	consumertest.Eventually(t, 2*time.Minute, "the run of new flags, once the paused run's key expired, consumes", func() bool {
		return count(t, odb, `SELECT count(*) FROM processed_messages`) > 0
	})
	p1.signal(syscall.SIGCONT)
	continued := time.Now()
	w.publish(evs[200:])
	select {
	case <-p1.done:
		t.Logf("the continued run exited %s after SIGCONT: %v", time.Since(continued).Round(time.Millisecond), p1.err)
		if code := p1.wait(0); code != 1 {
			t.Errorf("the continued run exited %d, want 1 (another run took its durable)", code)
		}
	case <-time.After(45 * time.Second):
		w.waitDrained(3 * time.Minute)
		n1, n2 := count(t, db, `SELECT count(*) FROM processed_messages`), count(t, odb, `SELECT count(*) FROM processed_messages`)
		t.Errorf("45s after SIGCONT the paused run, whose key the run of new flags took, still runs: ledgers hold %d and %d rows (%d messages published)", n1, n2, len(evs))
		p1.stop()
		t.Logf("the continued run's SIGTERM: exit %d", p1.wait(time.Minute))
	}
	// Every message's effect once over the two ledgers.
	w.waitDrained(3 * time.Minute)
	n1, n2 := count(t, db, `SELECT count(*) FROM processed_messages`), count(t, odb, `SELECT count(*) FROM processed_messages`)
	both := count(t, db, `SELECT coalesce(sum(amount), 0) FROM balances`) + count(t, odb, `SELECT coalesce(sum(amount), 0) FROM balances`)
	t.Logf("ledgers hold %d + %d rows, balances %d (want %d rows, %d)", n1, n2, both, len(evs), sum(evs))
	if n1+n2 != len(evs) || both != sum(evs) {
		t.Errorf("over the two ledgers: %d rows, balances %d; want %d and %d: a message applied on both", n1+n2, both, len(evs), sum(evs))
	}
	w.finish(p2, time.Minute)
}
