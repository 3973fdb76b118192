package integration

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
	"github.com/jetledger/jetledger/group"
)

// Helper-31's attacks on run --group with operations: every host lost at
// once (SIGKILL) or stopped at once (SIGTERM) and started again on its
// files, a partition's changelog purged under it, the snapshots bucket
// deleted, a static partition's first owner lost at its take-over, moves
// with effects in flight. Behind JETLEDGER_CLUSTER=long.

// joinH31 starts a host of the group in dir ("" for a new directory),
// with the group's effect flags (its webhook, when it has one) and extra.
func (g *groupWorld) joinH31(dir string, extra ...string) *groupHost {
	if dir == "" {
		dir = g.t.TempDir()
	}
	return g.joinWith(binPath, dir, g.n, 1, extra...)
}

// waitJoinedH31 waits until each of hosts logged "joined the group".
func (g *groupWorld) waitJoinedH31(timeout time.Duration, hosts ...int) {
	g.t.Helper()
	deadline := time.Now().Add(timeout)
	for _, h := range hosts {
		for {
			if _, ok := g.hosts[h].p.record(func(r map[string]any) bool { return r["msg"] == "joined the group" }); ok {
				break
			}
			select {
			case <-g.hosts[h].p.done:
				g.t.Fatalf("host %d exited %d before it joined the group:\n%s", h, g.hosts[h].p.wait(0), tailH30(g.hosts[h].p.output(), 30))
			case <-time.After(200 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				g.t.Fatalf("host %d never joined the group within %v:\n%s", h, timeout, tailH30(g.hosts[h].p.output(), 30))
			}
		}
	}
}

// outboxH31 waits until every outbox row of the partitions' ledgers on
// the hosts held is sent or in review, and returns the rows.
func (g *groupWorld) outboxH31(held []int) []outboxRow {
	g.t.Helper()
	var rows []outboxRow
	for i, h := range held {
		db := (&world{t: g.t, db: filepath.Join(g.hosts[h].dir, fmt.Sprintf("ledger-p%d.db", i))}).ledgerDB()
		waitSettled(g.t, db)
		rows = append(rows, outboxRows(g.t, db)...)
	}
	return rows
}

// h31Group is h30Group's group of 3 hosts on n partitions, its hosts'
// logs saved if the test fails, with events made and the first 500 of
// them applied once.
func h31Group(t *testing.T, n, events int) (*groupWorld, []int, []int, []event) {
	t.Helper()
	g, live, held := h30Group(t, n, 3)
	t.Cleanup(func() {
		if t.Failed() {
			g.saveLogsH31()
		}
	})
	evs := makeEvents(randFor(t), g.pub, events)
	g.publish(evs[:500])
	g.checkOnce(held, evs[:500])
	return g, live, held, evs
}

// restartAllH31 starts hosts 0-2 again on their files, publishes evs
// from 1000 on, and waits until every partition is held and the group
// settled since at; every event applied once, no effect sent twice. It
// returns the hosts live and the rows in review.
func (g *groupWorld) restartAllH31(at time.Time, what string, evs []event) ([]int, int) {
	g.t.Helper()
	for h := range 3 {
		g.joinH31(g.hosts[h].dir)
	}
	live := []int{3, 4, 5}
	g.waitJoinedH31(2*time.Minute, live...)
	g.publish(evs[1000:])
	g.everyPartitionHeld(3 * time.Minute)
	held := g.settled(3*time.Minute, at, live...)
	g.t.Logf("restarted on the same files: settled %v after %s, holders %v", time.Since(at).Round(time.Millisecond), what, held)
	g.checkOnce(held, evs)
	return live, checkSentAtMostOnce(g.t, g.dest, g.outboxH31(held), len(evs))
}

// pollH31 reports whether cond came true within timeout, asking every
// half second (cond may start a process: group status).
func pollH31(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(500 * time.Millisecond) // poll interval, not synchronisation
	}
	return true
}

// statusLinesH31 is group status as lines for a log.
func statusLinesH31(st group.Status, code int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "exit %d, epoch %d\n", code, st.Epoch)
	for _, s := range st.Slots {
		fmt.Fprintf(&b, "  slot %d: %s owner=%s holder=%s standbys=%v\n", s.Partition, s.State, s.Owner, s.Holder, s.Standbys)
	}
	for _, m := range st.Members {
		fmt.Fprintf(&b, "  member %s up=%v assigned=%v leaving=%v parts=%v\n", m.Member, m.Up.Round(time.Second), m.Assigned, m.Leaving, m.Parts)
	}
	return b.String()
}

// saveLogsH31 writes every host's output under /tmp/jls/h31-logs/<test>/.
func (g *groupWorld) saveLogsH31() {
	dir := filepath.Join("/tmp/jls/h31-logs", strings.ReplaceAll(g.t.Name(), "/", "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		g.t.Logf("saving logs: %v", err)
		return
	}
	for h, host := range g.hosts {
		_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("host%d.log", h)), []byte(host.p.output()), 0o644)
	}
	g.t.Logf("hosts' logs saved in %s", dir)
}

// grepHostsH31 are the lines of every host's output containing any of words.
func (g *groupWorld) grepHostsH31(max int, words ...string) string {
	var b strings.Builder
	n := 0
	for h, host := range g.hosts {
		for _, line := range strings.Split(host.p.output(), "\n") {
			for _, w := range words {
				if strings.Contains(line, w) {
					if n < max {
						fmt.Fprintf(&b, "host %d: %s\n", h, line)
					}
					n++
					break
				}
			}
		}
	}
	if n > max {
		fmt.Fprintf(&b, "... %d more\n", n-max)
	}
	return b.String()
}

// 1. Every host of the group SIGKILLed at once (their disks kept) while
// consuming, with events and effects in flight, then all started again
// on the same directories: the group settles on them, every event is
// applied once, no effect is sent twice (those being sent at the kill
// are in review), status says owned.
func TestH31GroupAllHostsKilledAtOnceAndRestarted(t *testing.T) {
	h30Long(t)
	h31AllKilled(t, true)
}

// 1b. The same, the kill coming as the group first settles: every
// partition's lease just taken by its owner, which is making its ledger
// file (a SIGKILL there is what a power cut at a first deployment does).
func TestH31GroupAllHostsKilledAtFirstStartAndRestarted(t *testing.T) {
	h30Long(t)
	h31AllKilled(t, false)
}

func h31AllKilled(t *testing.T, consuming bool) {
	g := newGroupWorld(t, 8)
	g.dest = webhooktest.NewDestination(t, false)
	g.dest.SetDelay(2 * time.Millisecond) // sends in flight at the kill
	g.joinAll(3)
	g.settled(3*time.Minute, time.Time{}, 0, 1, 2)
	defer func() {
		if t.Failed() {
			g.saveLogsH31()
		}
	}()
	evs := makeEvents(randFor(t), g.pub, 2000)
	if consuming {
		g.publish(evs[:1000])
		consumertest.Eventually(t, 2*time.Minute, "200 effects at the destination (every host consuming)", func() bool { return len(g.dest.Items()) >= 200 })
	}

	killed := time.Now()
	for h := range 3 {
		g.hosts[h].p.signal(syscall.SIGKILL)
	}
	for h := range 3 {
		<-g.hosts[h].p.done
	}
	t.Logf("all three hosts SIGKILLed at once; %d effects at the destination", len(g.dest.Items()))
	g.listFilesH31("at the kill", 0, 1, 2)
	if !consuming {
		g.publish(evs[:1000])
	}
	live, review := g.restartAllH31(killed, "the kill", evs)
	t.Logf("%d effects at the destination, %d rows in review", len(g.dest.Items()), review)
	g.statusOwned(2 * time.Minute)
	g.stopAll(live...)
}

// listFilesH31 logs the files in the directories of hosts, and copies any
// rollback journal (and its database) under /tmp/jls/h31-logs/<test>/.
func (g *groupWorld) listFilesH31(when string, hosts ...int) {
	for _, h := range hosts {
		ents, err := os.ReadDir(g.hosts[h].dir)
		if err != nil {
			g.t.Logf("host %d's directory %s: %v", h, when, err)
			continue
		}
		var b strings.Builder
		for _, e := range ents {
			info, err := e.Info()
			if err != nil {
				continue
			}
			fmt.Fprintf(&b, " %s(%d)", e.Name(), info.Size())
			if strings.HasSuffix(e.Name(), "-journal") {
				dst := filepath.Join("/tmp/jls/h31-logs", strings.ReplaceAll(g.t.Name(), "/", "_"), fmt.Sprintf("host%d", h))
				if os.MkdirAll(dst, 0o755) == nil {
					db := strings.TrimSuffix(e.Name(), "-journal")
					for _, f := range []string{e.Name(), db} {
						if data, err := os.ReadFile(filepath.Join(g.hosts[h].dir, f)); err == nil {
							_ = os.WriteFile(filepath.Join(dst, f), data, 0o644)
						}
					}
					g.t.Logf("host %d: a rollback journal %s %s: copied with its database to %s", h, e.Name(), when, dst)
				}
			}
		}
		g.t.Logf("host %d's files %s:%s", h, when, b.String())
	}
}

// 2. Every host SIGTERMed at once: each tries to hand its partitions over
// to the others while they leave too. Each must exit 0 in a bounded
// time; started again on their directories they settle, every event is
// applied once, every effect sent once (clean stops leave nothing in
// review), status says owned.
func TestH31GroupAllHostsSIGTERMedAtOnce(t *testing.T) {
	h30Long(t)
	g := newGroupWorld(t, 8)
	g.dest = webhooktest.NewDestination(t, false)
	g.dest.SetDelay(2 * time.Millisecond)
	g.joinAll(3)
	g.settled(3*time.Minute, time.Time{}, 0, 1, 2)
	defer func() {
		if t.Failed() {
			g.saveLogsH31()
		}
	}()
	evs := makeEvents(randFor(t), g.pub, 2000)
	g.publish(evs[:1000])

	stopped := time.Now()
	for h := range 3 {
		g.hosts[h].p.signal(syscall.SIGTERM)
	}
	for h := range 3 {
		code := g.hosts[h].p.wait(3 * time.Minute)
		t.Logf("host %d exited %d, %v after the SIGTERM", h, code, time.Since(stopped).Round(time.Millisecond))
		if code != 0 {
			t.Errorf("host %d exited %d after a SIGTERM to every host at once:\n%s", h, code, tailH30(g.hosts[h].p.output(), 40))
		}
	}
	if took := time.Since(stopped); took > time.Minute {
		t.Errorf("the three hosts SIGTERMed at once took %v to exit", took.Round(time.Millisecond))
	}
	for _, m := range g.moves(stopped) {
		if m.to >= 0 {
			t.Logf("while leaving: partition %d from host %d to host %d in %v", m.partition, m.from, m.to, m.pause.Round(time.Millisecond))
		}
	}
	live, review := g.restartAllH31(stopped, "the SIGTERM", evs)
	if review > 0 {
		t.Errorf("%d effects in review after clean stops only (SIGTERM): none was cut mid-send", review)
	}
	g.effectsOnce(evs)
	g.statusOwned(2 * time.Minute)
	g.stopAll(live...)
}

// 3. A partition's changelog purged (not deleted) while events flow, then
// its owner SIGKILLed at once: its standby must take it over with every
// event once, or wait and say why (status not "owned", the copy
// "waiting") - never lose or repeat an event. When it waits, the lost
// owner started again on its files (which hold every entry) is what
// should end the wait.
func TestH31GroupChangelogPurgedUnderIt(t *testing.T) {
	h30Long(t)
	g, live, held, evs := h31Group(t, 4, 2000)

	const part = 1
	owner := held[part]
	name, _ := changelog.Names(groupStream, g.durable+fmt.Sprintf("-p%d", part))
	g.publish(evs[500:1000]) // in flight as the log is purged
	purged := time.Now()
	var before, after uint64
	consumertest.Eventually(t, time.Minute, "partition 1's changelog purged", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := g.c.js.Stream(ctx, name)
		if err != nil {
			return false
		}
		before = s.CachedInfo().State.LastSeq
		if err := s.Purge(ctx); err != nil {
			return false
		}
		info, err := s.Info(ctx)
		if err == nil {
			after = info.State.FirstSeq
		}
		return true
	})
	g.hosts[owner].p.kill() // at once: before its next snapshot, perhaps
	killed := time.Now()
	t.Logf("changelog %s purged (last entry %d; first now %d); its owner, host %d, SIGKILLed %v later", name, before, after, owner, killed.Sub(purged).Round(time.Millisecond))
	g.publish(evs[1000:1500])
	rest := withoutH30(live, owner)

	allHeld := pollH31(2*time.Minute, func() bool {
		h := g.holders()
		for _, x := range h {
			if x < 0 || !slices.Contains(rest, x) {
				return false
			}
		}
		return true
	})
	if allHeld {
		held = g.settled(2*time.Minute, killed, rest...)
		t.Logf("TAKEN OVER: after the purge and the owner's loss the group settled %v after the kill, holders %v", time.Since(killed).Round(time.Millisecond), held)
		g.publish(evs[1500:])
		g.checkOnce(held, evs)
		g.statusOwned(time.Minute)
		g.stopAll(rest...)
		return
	}
	st, code := g.status()
	t.Logf("WAITING: 2 minutes after the kill partition %d has no holder among hosts %v (holders %v). group status:\n%s", part, rest, g.holders(), statusLinesH31(st, code))
	t.Logf("the hosts on the wait:\n%s", g.grepHostsH31(20, "cannot go on", "purged", "snapshotting now"))
	if code == 0 {
		t.Errorf("a partition left without an owner, yet group status exits 0")
	}
	for _, s := range st.Slots {
		if s.Partition == part && s.State == group.SlotOwned {
			t.Errorf("partition %d is consumed by none of the live hosts, yet group status says %q (holder %s)", part, s.State, s.Holder)
		}
	}
	// Its lost owner back on its files: they hold every entry of the log.
	restarted := time.Now()
	g.joinIn(g.hosts[owner].dir, 4, 1)
	back := len(g.hosts) - 1
	live = append(rest, back)
	g.publish(evs[1500:])
	if !pollH31(3*time.Minute, func() bool {
		h := g.holders()
		return !slices.ContainsFunc(h, func(x int) bool { return x < 0 || !slices.Contains(live, x) })
	}) {
		st, code = g.status()
		t.Fatalf("with the lost owner back on its files (host %d), partition %d still has no owner 3 minutes on: holders %v; group status:\n%s\nthe hosts:\n%s",
			back, part, g.holders(), statusLinesH31(st, code), g.grepHostsH31(30, "cannot go on", "purged", "snapshotting now", "owning the partition"))
	}
	held = g.settled(3*time.Minute, restarted, live...)
	t.Logf("with the old owner back: settled %v after its restart, holders %v", time.Since(restarted).Round(time.Millisecond), held)
	g.checkOnce(held, evs)
	g.statusOwned(time.Minute)
	g.stopAll(live...)
}

// 4. The snapshots object store deleted while the group runs, then a host
// SIGKILLed at once with its files deleted, and a fresh host joined in its
// place (its copies can start only from snapshots): every partition owned
// again within a few minutes, every event once, status owned.
func TestH31GroupSnapshotsBucketDeletedThenOwnerKilled(t *testing.T) {
	h30Long(t)
	g, live, held, evs := h31Group(t, 6, 2000)
	free := g.watchUnowned()

	g.publish(evs[500:1000])
	deleted := time.Now()
	consumertest.Eventually(t, time.Minute, "the snapshots bucket deleted", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return g.c.js.DeleteObjectStore(ctx, changelog.SnapshotBucket) == nil
	})
	victim := mostOwnerH30(held)
	g.hosts[victim].p.kill()
	if err := os.RemoveAll(g.hosts[victim].dir); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	t.Logf("%s deleted; host %d (owner of %d partitions) SIGKILLed, its files deleted, %v later", changelog.SnapshotBucket, victim, owned(held, 3)[victim], killed.Sub(deleted).Round(time.Millisecond))
	g.publish(evs[1000:1500])
	g.settled(3*time.Minute, killed, withoutH30(live, victim)...)
	t.Logf("the other two settled %v after the kill", time.Since(killed).Round(time.Millisecond))

	g.join()
	live = replaceH30(live, victim, len(g.hosts)-1)
	g.publish(evs[1500:])
	if !pollH31(3*time.Minute, func() bool { return g.ownedAndFollowed(g.status()) }) {
		st, code := g.status()
		t.Fatalf("3 minutes after the fresh host joined, not every partition is owned with its standby following:\n%s\nthe hosts:\n%s",
			statusLinesH31(st, code), g.grepHostsH31(30, "cannot go on", "snapshot", "restor"))
	}
	held = g.settled(3*time.Minute, killed, live...)
	t.Logf("with the fresh host: settled %v after the kill, holders %v", time.Since(killed).Round(time.Millisecond), held)
	g.h30End(held, evs, free, live...)
}

// 5. Static placement (run --partition with --changelog, and a --standby
// on a fresh disk): the first owner of new partitions SIGSTOPped the
// moment it logs "changelog: took the log over", then SIGKILLed with its
// directory deleted. A standby started on a fresh disk must take both
// partitions over and apply every event once (before 306a5e2 a fresh copy
// waited forever on a log holding only the take-over entry).
func TestH31GroupNewPartitionFirstOwnerKilledStatic(t *testing.T) {
	h30Long(t)
	r := newOwnedRig(t, startCluster(t), "PAY")
	ownerDir, standbyDir := t.TempDir(), t.TempDir()
	owner := r.run(ownerDir, r.c.urls(), "--changelog")
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(owner.output(), `"msg":"changelog: took the log over`) {
		if time.Now().After(deadline) {
			t.Fatalf("the owner took no log over within 2 minutes:\n%s", tailH30(owner.output(), 30))
		}
		select {
		case <-owner.done:
			t.Fatalf("the owner exited %d:\n%s", owner.wait(0), tailH30(owner.output(), 30))
		case <-time.After(time.Millisecond):
		}
	}
	owner.signal(syscall.SIGSTOP)
	consumertest.Eventually(t, 10*time.Second, "the owner stopped", func() bool { return isStopped(owner) })
	var took []int
	owner.record(func(rec map[string]any) bool {
		m, _ := rec["msg"].(string)
		if i, ok := rec["partition"].(float64); ok && strings.HasPrefix(m, "changelog: took the log over") {
			took = append(took, int(i))
		}
		return false
	})
	owning := logged(owner, "owner", 0) || logged(owner, "owner", 1)
	owner.kill()
	if err := os.RemoveAll(ownerDir); err != nil {
		t.Fatal(err)
	}
	lost := time.Now()
	t.Logf("the first owner stopped and killed right after it took the logs of partitions %v over (it had logged a role of owner: %v)", took, owning)

	evs := makeEvents(randFor(t), r.pub, 600)
	r.publish(evs[:300])
	standby := r.run(standbyDir, r.c.urls(), "--standby")
	r.publish(evs[300:])
	if !pollH31(2*time.Minute, func() bool { return logged(standby, "owner", 0) && logged(standby, "owner", 1) }) {
		t.Fatalf("the standby on a fresh disk did not own both partitions within 2 minutes of the loss:\n%s", tailH30(standby.output(), 40))
	}
	t.Logf("the standby owned both partitions %v after the loss", time.Since(lost).Round(time.Millisecond))
	r.waitDrained("every event applied")
	ledgers := r.ledgers(standbyDir)
	r.stop(standby, "the standby")
	checkPartitionedExact(t, ledgers, evs)
}

// 6. A group whose runs send effects with 4 outbox workers, to a webhook
// without idempotency, while partitions move: a 4th host joins, then one
// host is SIGTERMed. Every event applied once, every effect at the
// destination once, none lost, none in review (only clean hand-overs).
func TestH31GroupOutboxWorkersFour(t *testing.T) {
	h30Long(t)
	g := newGroupWorld(t, 8)
	g.dest = webhooktest.NewDestination(t, false)
	g.dest.SetDelay(3 * time.Millisecond) // sends in flight at each move
	for range 3 {
		g.joinH31("", "--outbox-workers", "4")
	}
	g.waitJoinedH31(2*time.Minute, 0, 1, 2)
	g.settled(3*time.Minute, time.Time{}, 0, 1, 2)
	defer func() {
		if t.Failed() {
			g.saveLogsH31()
		}
	}()
	evs := makeEvents(randFor(t), g.pub, 3000)
	g.publish(evs[:1000])

	joined := time.Now()
	g.joinH31("", "--outbox-workers", "4")
	g.publish(evs[1000:2000])
	held := g.settled(3*time.Minute, joined, 0, 1, 2, 3)
	for _, m := range g.moves(joined) {
		t.Logf("join: partition %d from host %d to host %d: paused %v", m.partition, m.from, m.to, m.pause.Round(time.Millisecond))
	}

	leaver := mostOwnerH30(held)
	left := time.Now()
	g.hosts[leaver].p.signal(syscall.SIGTERM)
	g.publish(evs[2000:])
	if code := g.hosts[leaver].p.wait(2 * time.Minute); code != 0 {
		t.Fatalf("the host SIGTERMed exited %d:\n%s", code, tailH30(g.hosts[leaver].p.output(), 40))
	}
	live := withoutH30([]int{0, 1, 2, 3}, leaver)
	held = g.settled(3*time.Minute, left, live...)
	for _, m := range g.moves(left) {
		t.Logf("leave: partition %d from host %d to host %d: paused %v", m.partition, m.from, m.to, m.pause.Round(time.Millisecond))
	}
	g.checkOnce(held, evs)
	review := checkSentAtMostOnce(t, g.dest, g.outboxH31(held), len(evs))
	if review > 0 {
		t.Errorf("%d effects in review after clean hand-overs only", review)
	}
	g.effectsOnce(evs)
	g.statusOwned(time.Minute)
	g.stopAll(live...)
}

// plantHotJournalH31 puts at file what a SIGKILL leaves while SQLite
// creates a ledger in rollback-journal mode (ledger.create's
// auto_vacuum and journal_mode=WAL, before WAL): the database file with
// pages written and its hot -journal beside it. It is made by copying a
// database and its journal from under an open write transaction, and
// checked: a read-only open of it fails (SQLITE_READONLY_ROLLBACK, 776).
func plantHotJournalH31(t *testing.T, file string) {
	t.Helper()
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "cut.db")
	db, err := sql.Open("sqlite", src+"?_pragma=cache_size(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{"PRAGMA auto_vacuum = INCREMENTAL",
		"BEGIN IMMEDIATE", "CREATE TABLE seed(x)", "INSERT INTO seed SELECT randomblob(600) FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 400) SELECT i FROM n)"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, suffix := range []string{"", "-journal"} {
		data, err := os.ReadFile(src + suffix)
		if err != nil {
			t.Fatalf("the open transaction's files: %v", err)
		}
		if err := os.WriteFile(file+suffix, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	ro, err := sql.Open("sqlite", "file:"+file+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	var n int
	err = ro.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&n)
	t.Logf("planted a hot journal at %s: a read-only open answers %v", file, err)
	if err == nil {
		t.Fatalf("the planted file %s opens read-only: no hot journal", file)
	}
}

// 1c. Deterministic form of 1b's failure: a host lost (SIGKILL) while it
// created its partitions' ledger files leaves each with a hot rollback
// journal (planted here: the state a SIGKILL at that instant leaves). The
// host started again on that directory must join the group and run its
// partitions (a read-write open rolls the journal back), not exit.
func TestH31GroupHostRestartedOnFilesCutAtCreation(t *testing.T) {
	h30Long(t)
	g, live, _, evs := h31Group(t, 4, 1000)

	victim := 2
	at := time.Now()
	g.hosts[victim].p.kill()
	if err := os.RemoveAll(g.hosts[victim].dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(g.hosts[victim].dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for i := range g.n {
		plantHotJournalH31(t, filepath.Join(g.hosts[victim].dir, fmt.Sprintf("ledger-p%d.db", i)))
	}
	g.settled(2*time.Minute, at, withoutH30(live, victim)...)
	g.joinIn(g.hosts[victim].dir, g.n, 1)
	back := len(g.hosts) - 1
	live = replaceH30(live, victim, back)
	g.publish(evs[500:])
	var st group.Status
	var code int
	if !pollH31(3*time.Minute, func() bool {
		st, code = g.status()
		if code != 0 || len(st.Members) != 3 || slices.ContainsFunc(st.Slots, func(s group.SlotStatus) bool { return s.State != group.SlotOwned }) {
			return false
		}
		for _, m := range st.Members {
			if !m.Assigned || len(m.Parts) == 0 {
				return false
			}
			for _, p := range m.Parts {
				if p.Role != "owner" && p.Role != "following" {
					return false
				}
			}
		}
		return true
	}) {
		t.Fatalf("3 minutes after the host came back on files cut at their creation, the group has not settled with it (every partition owned, every copy owner or following):\n%s\nthe host back (%d):\n%s",
			statusLinesH31(st, code), back, g.grepHostsH31(4, "readonly database"))
	}
	t.Logf("group status once every slot is owned and every copy owner or following:\n%s", statusLinesH31(st, code))
	if bad := g.grepHostsH31(2, "readonly database"); bad != "" {
		t.Errorf("yet the host back cannot open its files:\n%s", bad)
	}
	held := g.settled(3*time.Minute, at, live...)
	t.Logf("the host back on files cut at their creation: settled %v after the kill, holders %v", time.Since(at).Round(time.Millisecond), held)
	g.checkOnce(held, evs)
	g.statusOwned(time.Minute)
	g.stopAll(live...)
}
