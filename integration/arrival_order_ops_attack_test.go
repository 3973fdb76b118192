package integration

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Attacks on processed_messages in arrival order (migration 0018, ledger
// ids.go): an owned pair past a run boundary (65 536 seqs a partition, so
// that runs of fingerprints are sealed and replicated), then operations:
// the owner SIGKILLed, its host replaced empty, the changelog deleted and
// both restarted; old ids republished (same payload: duplicates; other
// payload: conflicts) from the sealed runs and from the rows above them.
// And the rolling upgrade from an older build counted over both tables of
// ledger rows (processed_messages and processed_messages_v1).

// aoRunRows is ledger.runRows.
const aoRunRows = 1 << 16

// aoPartOf is the partition ({{partition(2,1)}}) of account acct.
func aoPartOf(acct string) int {
	h := fnv.New32a()
	h.Write([]byte(acct)) //nolint:errcheck // hashes never fail
	return int(h.Sum32() % 2)
}

// aoEvents makes perPart events of random ids for each of the two
// partitions, interleaved.
func aoEvents(t *testing.T, perPart int) []event {
	rng := randFor(t)
	var accts [2][]string
	for i := 0; len(accts[0]) < 10 || len(accts[1]) < 10; i++ {
		a := fmt.Sprintf("acct-%d", i)
		if p := aoPartOf(a); len(accts[p]) < 10 {
			accts[p] = append(accts[p], a)
		}
	}
	evs := make([]event, 0, 2*perPart)
	for i := 0; i < perPart; i++ {
		for p := range 2 {
			evs = append(evs, event{ID: fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64()),
				Account: accts[p][rng.IntN(len(accts[p]))], Amount: 1 + rng.IntN(1000)})
		}
	}
	return evs
}

// aoWaitRows is waitApplied with its own bound.
func aoWaitRows(t *testing.T, a *a2, what string, n int, limit time.Duration, dirs ...string) {
	t.Helper()
	a.r.waitAppliedWithin(limit, what, n, dirs...)
}

// aoCheckExact: over the files at paths (one a partition), the balances
// sum to evs' and the ledger rows of both tables are len(evs), no id in
// two rows.
func aoCheckExact(t *testing.T, who string, paths []string, evs []event) {
	t.Helper()
	total, rows, twice := 0, 0, 0
	for _, p := range paths {
		db := openLedgers(t, p)[0]
		total += count(t, db, `SELECT coalesce(sum(amount), 0) FROM balances`)
		q := ledgerIDs(db)
		rows += count(t, db, `SELECT count(*) FROM (`+q+`)`)
		twice += count(t, db, `SELECT count(*) FROM (SELECT message_id FROM (`+q+`) GROUP BY message_id HAVING count(*) > 1)`)
	}
	if total != sum(evs) || rows != len(evs) || twice != 0 {
		t.Errorf("%s: balances %d, rows %d, ids in two rows %d; want %d, %d, 0 (balance difference %d)", who, total, rows, twice, sum(evs), len(evs), total-sum(evs))
	}
}

// aoRuns is the file's sealed runs as "first-last" and its row count.
func aoRuns(t *testing.T, path string) (runs []string, top int) {
	t.Helper()
	db := openLedgers(t, path)[0]
	rs, err := db.Query(`SELECT first, last FROM processed_runs ORDER BY first`)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	for rs.Next() {
		var f, l int64
		if err := rs.Scan(&f, &l); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, fmt.Sprintf("%d-%d", f, l))
	}
	return runs, count(t, db, `SELECT coalesce(max(seq), 0) FROM processed_messages`)
}

// aoPick is a ledger row picked for a republish.
type aoPick struct {
	id    string
	seq   int64
	above bool // above the newest sealed run
}

// aoSample picks ids of the file at path: the run boundaries' rows, and
// up to n at random from the sealed runs and from the rows above them.
func aoSample(t *testing.T, path string, n int) []aoPick {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_pragma=query_only(ON)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var sealedTo int64
	if err := db.QueryRow(`SELECT coalesce(max(last), 0) FROM processed_runs`).Scan(&sealedTo); err != nil {
		t.Fatal(err)
	}
	var picks []aoPick
	have := map[string]bool{}
	for _, q := range []string{
		// the first and last seq of the first run, and random ones below
		`SELECT message_id, seq FROM processed_messages WHERE seq IN (1, ?1, ?1 - 1, 65536, 65537) AND ?2 > 0`,
		`SELECT message_id, seq FROM processed_messages WHERE seq <= ?1 ORDER BY random() LIMIT ?2`,
		`SELECT message_id, seq FROM processed_messages WHERE seq > ?1 ORDER BY random() LIMIT ?2`,
	} {
		rs, err := db.Query(q, sealedTo, n)
		if err != nil {
			t.Fatal(err)
		}
		for rs.Next() {
			var p aoPick
			if err := rs.Scan(&p.id, &p.seq); err != nil {
				t.Fatal(err)
			}
			p.above = p.seq > sealedTo
			if !have[p.id] {
				have[p.id] = true
				picks = append(picks, p)
			}
		}
		rs.Close()
	}
	return picks
}

// aoRepublish publishes each pick's id again on its account's subject:
// with its payload (a duplicate) when same, else with another amount (a
// conflict). byID gives the payloads.
func aoRepublish(t *testing.T, a *a2, picks []aoPick, byID map[string]event, same bool) {
	t.Helper()
	for _, p := range picks {
		e := byID[p.id]
		if !same {
			e.Amount += 100000
		}
		consumertest.Eventually(t, time.Minute, "raw publish of "+p.id, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			_, err := a.r.c.js.PublishMsg(ctx, &nats.Msg{Subject: "pay." + e.Account, Data: e.data(), Header: nats.Header{}}, jetstream.WithMsgID(p.id))
			return err == nil
		})
	}
}

// aoConflicts counts the conflict rows of ids in the files at paths.
func aoConflicts(t *testing.T, paths []string) int {
	t.Helper()
	n := 0
	for _, p := range paths {
		m, err := fileInt(p, `SELECT count(DISTINCT message_id) FROM conflicts`)
		if err != nil {
			t.Fatal(err)
		}
		n += m
	}
	return n
}

// aoPerPart is how many events each partition gets (ARRIVAL_PER_PART).
func aoPerPart() int {
	n := aoRunRows + 4000
	if s := os.Getenv("ARRIVAL_PER_PART"); s != "" {
		if v, err := strconv.Atoi(s); err == nil {
			n = v
		}
	}
	return n
}

// aoBulk publishes evs in chunks of 2000 and waits until they are
// applied on dirs, logging how long it took.
func aoBulk(t *testing.T, a *a2, evs []event, dirs ...string) {
	t.Helper()
	began := time.Now()
	for i := 0; i < len(evs); i += 2000 {
		a.r.publish(evs[i:min(i+2000, len(evs))])
	}
	published := time.Since(began)
	aoWaitRows(t, a, "the bulk applied", len(evs), 20*time.Minute, dirs...)
	t.Logf("%d events: published in %s, applied in %s", len(evs), published.Round(time.Second), time.Since(began).Round(time.Second))
}

// aoPaths is the host's files of both partitions.
func aoPaths(dir string) []string { return []string{partDB(dir, 0), partDB(dir, 1)} }

// 2. Past a run boundary: an owned pair applies more than 65 536 events a
// partition (runs sealed on the owner, replicated to the standby); the
// owner SIGKILLed, the standby takes over; old ids republished from the
// sealed runs and from the rows above, same payload (duplicates) and
// other payload (conflicts); then the old owner's host replaced empty,
// the new owner SIGKILLed so it takes over from the restored copy; again
// the ids republished; then the changelogs deleted and both restarted;
// again. Every event once on every copy; the conflicts recorded.
func TestArrivalOrderSealedRunsThroughOps(t *testing.T) {
	aaLong(t)
	a := newA2(t, "PAY")
	dirs, flags, hosts := a.aoPair(t)
	evs := aoEvents(t, aoPerPart())
	byID := map[string]event{}
	for _, e := range evs {
		byID[e.ID] = e
	}
	aoBulk(t, a, evs, dirs...)
	waitSamePosition(t, "B caught up", aoPaths(dirs[0]), aoPaths(dirs[1]))
	for _, d := range dirs {
		for i := range ownedDurables {
			runs, top := aoRuns(t, partDB(d, i))
			t.Logf("%s partition %d: runs %v, top seq %d", filepath.Base(d), i, runs, top)
			if len(runs) == 0 {
				t.Fatalf("%s partition %d: no run sealed after %d rows", d, i, top)
			}
		}
	}
	conflicted := map[string]bool{}
	round := func(when string, owner int) {
		t.Helper()
		var picks []aoPick
		for i := range ownedDurables {
			picks = append(picks, aoSample(t, partDB(dirs[owner], i), 12)...)
		}
		var dups, confl []aoPick
		for i, p := range picks {
			if i%2 == 0 || conflicted[p.id] {
				dups = append(dups, p)
			} else {
				confl = append(confl, p)
			}
		}
		before := aoConflicts(t, aoPaths(dirs[owner]))
		time.Sleep(1500 * time.Millisecond) // past the 1s duplicate window of the stream
		aoRepublish(t, a, dups, byID, true)
		aoRepublish(t, a, confl, byID, false)
		fresh := 0
		for _, p := range confl {
			if !conflicted[p.id] {
				conflicted[p.id] = true
				fresh++
			}
		}
		a.r.waitDrained(when + ": the republished ids handled")
		consumertest.Eventually(t, time.Minute, when+": the conflicts recorded", func() bool {
			return aoConflicts(t, aoPaths(dirs[owner])) >= before+fresh
		})
		if n := aoConflicts(t, aoPaths(dirs[owner])); n != len(conflicted) {
			t.Errorf("%s: %d ids in conflicts, want %d", when, n, len(conflicted))
		}
		above := 0
		for _, p := range picks {
			if p.above {
				above++
			}
		}
		t.Logf("%s: %d duplicates and %d conflicts republished (%d from above the runs)", when, len(dups), len(confl), above)
		aoCheckExact(t, when+" (owner "+strconv.Itoa(owner)+")", aoPaths(dirs[owner]), evs)
	}
	// The owner SIGKILLed: B takes over.
	hosts[0].kill()
	a.ownersOf("B taking over", hosts...)
	round("after the owner's SIGKILL", 1)
	hosts[0] = a.start("A (again)", dirs[0], flags[0]...)
	a.r.waitStandsBy(hosts[0], "A (again)")
	waitSamePosition(t, "A caught up", aoPaths(dirs[1]), aoPaths(dirs[0]))
	// A's host replaced empty: it restores; then B SIGKILLed, A takes over.
	hosts[0].kill()
	wipe(t, dirs[0])
	hosts[0] = a.start("A (empty)", dirs[0], flags[0]...)
	a.r.waitStandsBy(hosts[0], "A (empty)")
	waitSamePosition(t, "A (empty) caught up", aoPaths(dirs[1]), aoPaths(dirs[0]))
	for i := range ownedDurables {
		runs, top := aoRuns(t, partDB(dirs[0], i))
		t.Logf("A (restored) partition %d: runs %v, top seq %d", i, runs, top)
	}
	hosts[1].kill()
	a.ownersOf("A (restored) taking over", hosts...)
	round("after A restored and B's SIGKILL", 0)
	hosts[1] = a.start("B (again)", dirs[1], flags[1]...)
	a.r.waitStandsBy(hosts[1], "B (again)")
	waitSamePosition(t, "B caught up again", aoPaths(dirs[0]), aoPaths(dirs[1]))
	// The changelogs deleted, both restarted.
	a.deleteLogs(0, 1)
	stopOK(t, hosts[1], "B")
	stopOK(t, hosts[0], "A")
	hosts[0] = a.start("A (log deleted)", dirs[0], flags[0]...)
	a.r.waitRole(hosts[0], "A (log deleted)", "owner", 0, 1)
	hosts[1] = a.start("B (log deleted)", dirs[1], flags[1]...)
	a.r.waitStandsBy(hosts[1], "B (log deleted)")
	round("after the logs deleted", 0)
	waitSamePosition(t, "the copies caught up", aoPaths(dirs[0]), aoPaths(dirs[1]))
	alive(t, hosts[0], "A")
	alive(t, hosts[1], "B")
	a.r.stopAll(map[string]*proc{"A": hosts[0], "B": hosts[1]})
	aoCheckExact(t, "A at the end", aoPaths(dirs[0]), evs)
	aoCheckExact(t, "B at the end", aoPaths(dirs[1]), evs)
	for i := range ownedDurables {
		ra, ta := aoRuns(t, partDB(dirs[0], i))
		rb, tb := aoRuns(t, partDB(dirs[1], i))
		if fmt.Sprint(ra, ta) != fmt.Sprint(rb, tb) {
			t.Errorf("partition %d: A's runs %v top %d, B's %v top %d", i, ra, ta, rb, tb)
		}
	}
	if n := aoConflicts(t, aoPaths(dirs[1])); n != len(conflicted) {
		t.Errorf("B's copies: %d ids in conflicts, want %d", n, len(conflicted))
	}
	checkAsideHeld(t, dirs[0], openLedgers(t, aoPaths(dirs[0])...))
	checkAsideHeld(t, dirs[1], openLedgers(t, aoPaths(dirs[0])...))
}

// aoFinish waits for every event over both tables, for the copies to
// stand where the owners do, stops both hosts and checks both copies
// (aoCheckExact) and the files set aside.
func aoFinish(t *testing.T, a *a2, dirs []string, hosts []*proc, evs []event) {
	t.Helper()
	aoWaitRows(t, a, "every event applied", len(evs), 3*time.Minute, dirs...)
	o0, o1 := a.ownerOf("end", 0, hosts...), a.ownerOf("end", 1, hosts...)
	now := []string{partDB(dirs[o0], 0), partDB(dirs[o1], 1)}
	copies := []string{partDB(dirs[1-o0], 0), partDB(dirs[1-o1], 1)}
	waitSamePosition(t, "the copies caught up", now, copies)
	a.r.stopAll(map[string]*proc{"A": hosts[0], "B": hosts[1]})
	for _, d := range dirs {
		for i := range ownedDurables {
			n, _ := fileInt(partDB(d, i), `SELECT count(*) FROM processed_messages`)
			m, _ := fileInt(partDB(d, i), `SELECT count(*) FROM processed_messages_v1`)
			t.Logf("%s partition %d: %d new rows, %d of the old layout", filepath.Base(d), i, n, m)
		}
	}
	aoCheckExact(t, "owners", now, evs)
	aoCheckExact(t, "copies", copies, evs)
	checkAsideHeld(t, dirs[0], openLedgers(t, now...))
	checkAsideHeld(t, dirs[1], openLedgers(t, now...))
}

// TestAttack3UpgradeOwnerFirstWithCopies, carried on: the old standby on
// its own copy beside the new owner waits (it cannot apply the new
// layout's entries). The new owner is then SIGKILLed: the old standby must
// not take over on its stale copy. Then the old standby is upgraded: it
// catches up and owns; the first host comes back as its standby. Every
// event once on both copies, over both tables.
func TestArrivalOrderOldStandbyWaitsThenOwnerLost(t *testing.T) {
	aaLong(t)
	for _, old := range oldBins(t) {
		t.Run(filepath.Base(filepath.Dir(filepath.Dir(old))), func(t *testing.T) {
			a := newA2(t, "PAY")
			dirs, flags, hosts, evs, tr := a.upgradedOwnerBesideOldStandby(t, old)
			waitSaid(t, hosts[1], "the old standby says it cannot go on", copyWaits, nil, 0, 1)
			t.Logf("the old standby: %s", grepLines(hosts[1].output(), copyWaits))
			tr.wait(t)
			aoWaitRows(t, a, "every event applied by A", len(evs), 3*time.Minute, dirs[0])
			more := makeEvents(randFor(t), a.r.pub, 700)[600:]
			evs = append(evs, more...)
			hosts[0].kill()
			since := time.Now()
			a.r.publish(more[:50])
			nobodyOwnsSince(t, 15*time.Second, since, 0, hosts[1])
			nobodyOwnsSince(t, 1*time.Second, since, 1, hosts[1])
			alive(t, hosts[1], "B (old), waiting")
			stopOK(t, hosts[1], "B (old)")
			hosts[1] = a.start("B(new)", dirs[1], flags[1]...)
			a.ownersOf("B (new) owning", hosts...)
			hosts[0] = a.start("A(new) again", dirs[0], flags[0]...)
			a.r.waitStandsBy(hosts[0], "A (new) again")
			a.r.publish(more[50:])
			aoFinish(t, a, dirs, hosts, evs)
		})
	}
}

// `jetledger ledger prune` run against the owner's and the standby's
// files while they run: each is a copy the changelog keeps (the owner
// writes only through its store), so the prune must refuse, saying why,
// and leave both copies equal; then every event once.
func TestArrivalOrderLedgerPruneBesideOwnedRuns(t *testing.T) {
	aaLong(t)
	a := newA2(t, "PAY")
	dirs, _, hosts := a.startPair()
	evs := makeEvents(randFor(t), a.r.pub, 400)
	a.r.publish(evs[:200])
	aoWaitRows(t, a, "the first 200 applied", 200, 3*time.Minute, dirs...)
	tr := a.traffic(evs[200:], 5, 20*time.Millisecond)
	for _, who := range []struct {
		name string
		dir  string
	}{{"the owner's", dirs[0]}, {"the standby's", dirs[1]}} {
		for i, durable := range ownedDurables {
			p := start(t, nil, "ledger", "prune", "--db", partDB(who.dir, i), "--nats", a.r.c.urls(), "--stream", "PAY",
				"--durable", durable, "--retention", "2m", "--outbox-retention", "2m")
			code := p.wait(time.Minute)
			t.Logf("ledger prune on %s file of partition %d: exit %d: %s", who.name, i, code, strings.TrimSpace(tail(p.output())))
			if code == 0 {
				t.Errorf("ledger prune on %s file of partition %d, which its changelog keeps, exited 0", who.name, i)
			}
		}
	}
	tr.wait(t)
	alive(t, hosts[0], "A")
	alive(t, hosts[1], "B")
	aoFinish(t, a, dirs, hosts, evs)
}

// aoTop is the greatest seq of processed_messages in the fullest file of
// partition part over dirs.
func aoTop(part int, dirs ...string) int {
	top := 0
	for _, d := range dirs {
		if n, err := fileInt(partDB(d, part), `SELECT coalesce(max(seq), 0) FROM processed_messages`); err == nil {
			top = max(top, n)
		}
	}
	return top
}

// Kills at run boundaries: traffic flowing into an owned pair, the owner
// (or the standby) SIGKILLed as a partition's rows reach a run boundary,
// when the batch that seals the run (1 MiB of fingerprints, an entry of
// several messages) is likely in flight; started again at once. Three
// boundaries a partition. Every event once on both copies, the same runs
// on both, and old ids from every run duplicates or conflicts.
func TestArrivalOrderKillsAtRunBoundaries(t *testing.T) {
	aaLong(t)
	a := newA2(t, "PAY")
	dirs, flags, hosts := a.aoPair(t)
	evs := aoEvents(t, 3*aoRunRows+3000)
	byID := map[string]event{}
	for _, e := range evs {
		byID[e.ID] = e
	}
	tr := a.traffic(evs, 1000, 30*time.Millisecond)
	kills := []struct {
		part, boundary int
		who            string // owner or standby
		near           int
	}{{0, 1, "owner", 150}, {1, 1, "owner", 60}, {0, 2, "standby", 100}, {1, 2, "owner", 20}, {0, 3, "owner", 250}, {1, 3, "standby", 40}}
	for _, k := range kills {
		at := k.boundary*aoRunRows - k.near
		consumertest.Eventually(t, 5*time.Minute, fmt.Sprintf("partition %d's rows at %d", k.part, at), func() bool {
			return aoTop(k.part, dirs...) >= at
		})
		h := a.ownerOf("before the kill", k.part, hosts...)
		if k.who == "standby" {
			h = 1 - h
		}
		hosts[h].kill()
		top := aoTop(k.part, dirs...)
		t.Logf("%s (host %d) SIGKILLed with partition %d at seq %d (boundary %d)", k.who, h, k.part, top, k.boundary*aoRunRows)
		hosts[h] = a.start([]string{"A", "B"}[h]+" (again)", dirs[h], flags[h]...)
		a.ownersOf("after the kill", hosts...)
	}
	tr.wait(t)
	aoWaitRows(t, a, "every event applied", len(evs), 10*time.Minute, dirs...)
	o0, o1 := a.ownerOf("end", 0, hosts...), a.ownerOf("end", 1, hosts...)
	now := []string{partDB(dirs[o0], 0), partDB(dirs[o1], 1)}
	copies := []string{partDB(dirs[1-o0], 0), partDB(dirs[1-o1], 1)}
	waitSamePosition(t, "the copies caught up", now, copies)
	// Old ids again, from every run and from above: duplicates, and
	// conflicts with other payloads.
	var picks []aoPick
	for i := range ownedDurables {
		picks = append(picks, aoSample(t, now[i], 40)...)
	}
	time.Sleep(1500 * time.Millisecond) // past the duplicate window
	var confl []aoPick
	for i, p := range picks {
		if i%3 == 0 {
			confl = append(confl, p)
		}
	}
	aoRepublish(t, a, picks, byID, true)
	time.Sleep(1500 * time.Millisecond) // the same ids again: past the duplicate window
	aoRepublish(t, a, confl, byID, false)
	a.r.waitDrained("the republished ids handled")
	consumertest.Eventually(t, time.Minute, "the conflicts recorded", func() bool {
		return aoConflicts(t, now) >= len(confl)
	})
	waitSamePosition(t, "the copies caught up again", now, copies)
	alive(t, hosts[0], "A")
	alive(t, hosts[1], "B")
	a.r.stopAll(map[string]*proc{"A": hosts[0], "B": hosts[1]})
	aoCheckExact(t, "owners", now, evs)
	aoCheckExact(t, "copies", copies, evs)
	if n := aoConflicts(t, now); n != len(confl) {
		t.Errorf("owners: %d ids in conflicts, want %d", n, len(confl))
	}
	if n := aoConflicts(t, copies); n != len(confl) {
		t.Errorf("copies: %d ids in conflicts, want %d", n, len(confl))
	}
	for i := range ownedDurables {
		ra, ta := aoRuns(t, now[i])
		rb, tb := aoRuns(t, copies[i])
		t.Logf("partition %d: runs %v, top %d", i, ra, ta)
		if fmt.Sprint(ra, ta) != fmt.Sprint(rb, tb) {
			t.Errorf("partition %d: the owner's runs %v top %d, the copy's %v top %d", i, ra, ta, rb, tb)
		}
	}
	checkAsideHeld(t, dirs[0], openLedgers(t, now...))
	checkAsideHeld(t, dirs[1], openLedgers(t, now...))
}

// Two at once, past a run boundary: both hosts SIGKILLed together while
// traffic flows (a partition's rows just past 65 536, the other's near
// it), started together; then both hosts' disks wiped and both started
// empty together (they restore the snapshots, which may be older than the
// log's end). Every event once on both copies, the same runs on both.
func TestArrivalOrderBothKilledThenBothEmptyPastARun(t *testing.T) {
	aaLong(t)
	a := newA2(t, "PAY")
	dirs, flags, hosts := a.startPair()
	evs := aoEvents(t, aoRunRows+6000)
	tr := a.traffic(evs, 1000, 20*time.Millisecond)
	consumertest.Eventually(t, 5*time.Minute, "partition 0's rows at the boundary", func() bool {
		return aoTop(0, dirs...) >= aoRunRows-100
	})
	hosts[0].kill()
	hosts[1].kill()
	t.Logf("both SIGKILLed at seqs %d and %d", aoTop(0, dirs...), aoTop(1, dirs...))
	hosts[0] = a.start("A (again)", dirs[0], flags[0]...)
	hosts[1] = a.start("B (again)", dirs[1], flags[1]...)
	a.ownersOf("after both were killed", hosts...)
	tr.wait(t)
	aoWaitRows(t, a, "every event applied", len(evs), 10*time.Minute, dirs...)
	waitSamePosition(t, "the copies caught up", aoPaths(dirs[a.ownerOf("now", 0, hosts...)]), aoPaths(dirs[1-a.ownerOf("now", 0, hosts...)]))
	hosts[0].kill()
	hosts[1].kill()
	wipe(t, dirs[0])
	wipe(t, dirs[1])
	hosts[0] = a.start("A (empty)", dirs[0], flags[0]...)
	hosts[1] = a.start("B (empty)", dirs[1], flags[1]...)
	a.ownersOf("the empty hosts", hosts...)
	more := aoEvents(t, 2000)
	for i := range more {
		more[i].ID = "more-" + more[i].ID
	}
	a.r.publish(more)
	evs = append(evs, more...)
	aoFinish(t, a, dirs, hosts, evs)
	for i := range ownedDurables {
		ra, ta := aoRuns(t, partDB(dirs[0], i))
		rb, tb := aoRuns(t, partDB(dirs[1], i))
		t.Logf("partition %d: A's runs %v top %d, B's %v top %d", i, ra, ta, rb, tb)
		if fmt.Sprint(ra, ta) != fmt.Sprint(rb, tb) {
			t.Errorf("partition %d: A's runs %v top %d, B's %v top %d", i, ra, ta, rb, tb)
		}
	}
}

// aoPair starts A, the owner of both partitions, and B its standby, each
// with a duplicate window of 1 s (so that republished ids reach the ledger).
func (a *a2) aoPair(t *testing.T) (dirs []string, flags [][]string, hosts []*proc) {
	t.Helper()
	dirs = []string{t.TempDir(), t.TempDir()}
	flags = [][]string{{"--changelog", "--standby", "--duplicate-window", "1s"}, {"--standby", "--duplicate-window", "1s"}}
	hosts = []*proc{a.start("A", dirs[0], flags[0]...), nil}
	a.r.waitRole(hosts[0], "A", "owner", 0, 1)
	hosts[1] = a.start("B", dirs[1], flags[1]...)
	a.r.waitStandsBy(hosts[1], "B")
	return dirs, flags, hosts
}
