package integration

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats.go/jetstream"
)

// Issue 42's operations on owned partitions, from outside: an admin's
// deletions and purges, a host replaced, a supervisor's restarts, a
// rolling schema upgrade. Each asserts what the ledgers hold.

// partDB is the ledger file of partition part of the host on dir.
func partDB(dir string, part int) string {
	return filepath.Join(dir, fmt.Sprintf("ledger-p%d.db", part))
}

// fileInt runs a one-number query on the ledger file at path, opened for
// this query only: a restore renames another file into its place, which a
// handle opened before would not see.
func fileInt(path, q string) (int, error) {
	return fileQuery(path, func(*sql.DB) string { return q })
}

// fileQuery reads the one integer of the query q gives for the file at
// path, opened read-only.
func fileQuery(path string, q func(*sql.DB) string) (int, error) {
	if _, err := os.Stat(path); err != nil {
		return 0, err
	}
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_pragma=query_only(ON)")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n sql.NullInt64
	err = db.QueryRow(q(db)).Scan(&n)
	return int(n.Int64), err
}

// ledgerIDs is the SQL that lists a ledger's message ids, of db's schema:
// from 18 on, those of processed_messages_v1 (the rows of the layout
// before) too.
func ledgerIDs(db *sql.DB) string {
	var v1 int
	if db.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'processed_messages_v1'`).Scan(&v1); v1 == 1 {
		return `SELECT message_id FROM processed_messages UNION ALL SELECT message_id FROM processed_messages_v1`
	}
	return `SELECT message_id FROM processed_messages`
}

// ledgerIDList lists db's ledger ids (ledgerIDs).
func ledgerIDList(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query(ledgerIDs(db))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// fileRows counts the ledger rows of the file at path (ledgerIDs).
func fileRows(path string) (int, error) {
	return fileQuery(path, func(db *sql.DB) string { return `SELECT count(*) FROM (` + ledgerIDs(db) + `)` })
}

// filePosition is the changelog position (instance and entry) of the
// ledger file at path; "" when it cannot be read now.
func filePosition(path string) string {
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_pragma=query_only(ON)")
	if err != nil {
		return ""
	}
	defer db.Close()
	var log string
	var seq int64
	if err := db.QueryRow(`SELECT log, seq FROM jetledger_changelog WHERE id = 1`).Scan(&log, &seq); err != nil {
		return ""
	}
	return fmt.Sprintf("%s#%d", log, seq)
}

// waitSamePosition waits until each file of copies stands at the
// changelog position of the file of now beside it.
func waitSamePosition(t *testing.T, what string, now, copies []string) {
	t.Helper()
	consumertest.Eventually(t, 2*time.Minute, what, func() bool {
		for i := range now {
			p := filePosition(now[i])
			if p == "" || filePosition(copies[i]) != p {
				return false
			}
		}
		return true
	})
}

// openLedgers opens the ledger files at paths (after their runs stopped).
func openLedgers(t *testing.T, paths ...string) []*sql.DB {
	t.Helper()
	dbs := make([]*sql.DB, len(paths))
	for i, p := range paths {
		dbs[i] = (&world{t: t, db: p}).ledgerDB()
	}
	return dbs
}

// records counts p's log records that match.
func records(p *proc, match func(map[string]any) bool) int {
	n := 0
	p.record(func(r map[string]any) bool {
		if match(r) {
			n++
		}
		return false
	})
	return n
}

// roleRecords counts p's records of role (owner, lost) for partition part.
func roleRecords(p *proc, role string, part int) int {
	return records(p, func(r map[string]any) bool { return r["role"] == role && r["partition"] == float64(part) })
}

// roleRecordsSince counts p's records of role for partition part logged
// at or after since.
func roleRecordsSince(p *proc, role string, part int, since time.Time) int {
	return records(p, roleSince(role, part, since))
}

// roleSince matches a record of role for partition part logged at or
// after since.
func roleSince(role string, part int, since time.Time) func(map[string]any) bool {
	return func(r map[string]any) bool {
		return r["role"] == role && r["partition"] == float64(part) && !recordTime(r).Before(since)
	}
}

// recordTime is when a record was logged (zero if it says not).
func recordTime(r map[string]any) time.Time {
	at, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(r["time"]))
	return at
}

// restores counts p's records of restoring a partition's snapshot.
func restores(p *proc) int {
	return records(p, func(r map[string]any) bool {
		msg, _ := r["msg"].(string)
		return strings.HasPrefix(msg, "changelog: restoring the partition's snapshot")
	})
}

// running says whether p has not exited.
func running(p *proc) bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// stopAll SIGTERMs every run at once and wants each to exit 0.
func (r *ownedRig) stopAll(ps map[string]*proc) {
	r.t.Helper()
	for _, p := range ps {
		p.signal(syscall.SIGTERM)
	}
	for who, p := range ps {
		if code := p.wait(time.Minute); code != 0 {
			r.t.Fatalf("%s exited %d after SIGTERM:\n%s", who, code, tail(p.output()))
		}
	}
}

// changelogStream is partition part's changelog stream.
func (r *ownedRig) changelogStream(part int) string {
	name, _ := changelog.Names(r.stream, ownedDurables[part])
	return name
}

// checkAsideHeld: every file a restore set aside on dir (ledger-pN.db.replaced-*)
// holds no message that the final ledger of its partition lacks: a copy
// set aside was never the only one of anything.
func checkAsideHeld(t *testing.T, dir string, finals []*sql.DB) int {
	t.Helper()
	aside, err := filepath.Glob(filepath.Join(dir, "ledger-p*.db.replaced-*"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range aside {
		if strings.HasSuffix(f, "-wal") || strings.HasSuffix(f, "-shm") || strings.HasSuffix(f, "-journal") {
			continue
		}
		n++
		part, err := strconv.Atoi(strings.TrimPrefix(strings.SplitN(filepath.Base(f), ".", 2)[0], "ledger-p"))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		db, err := sql.Open("sqlite", f+"?_pragma=busy_timeout(10000)&_pragma=query_only(ON)")
		if err != nil {
			t.Fatal(err)
		}
		rows, err := db.Query(ledgerIDs(db))
		if err != nil {
			db.Close()
			t.Fatalf("%s: %v", f, err)
		}
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		rows.Close()
		db.Close()
		// One read of the final ledger's ids: it has no index on them.
		final := map[string]int{}
		for _, id := range ledgerIDList(t, finals[part]) {
			final[id]++
		}
		for _, id := range ids {
			if final[id] != 1 {
				t.Errorf("%s holds message %s, which the final ledger of partition %d lacks", f, id, part)
			}
		}
	}
	return n
}

// waitApplied waits until both partitions' durables are drained and the
// ledgers on dirs hold n messages (for each partition, its fullest file):
// a durable's info read from a server a replica behind can say drained
// just after a publish, before anything was delivered.
func (r *ownedRig) waitApplied(what string, n int, dirs ...string) {
	r.t.Helper()
	r.waitAppliedWithin(3*time.Minute, what, n, dirs...)
}

// waitAppliedWithin is waitApplied with its own bound.
func (r *ownedRig) waitAppliedWithin(limit time.Duration, what string, n int, dirs ...string) {
	r.t.Helper()
	consumertest.Eventually(r.t, limit, fmt.Sprintf("%s (%d messages in the ledgers)", what, n), func() bool {
		return fullestRows(dirs) >= n && r.c.drained(r.stream, ownedDurables...)
	})
}

// fullestRows sums, over the partitions, the ledger rows of each one's
// fullest file on dirs.
func fullestRows(dirs []string) int {
	have := 0
	for i := range ownedDurables {
		most := 0
		for _, d := range dirs {
			if m, err := fileRows(partDB(d, i)); err == nil {
				most = max(most, m)
			}
		}
		have += most
	}
	return have
}

// checkFilesKept: each host of dirs still has a ledger file of each partition.
func checkFilesKept(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		for i := range ownedDurables {
			if _, err := os.Stat(partDB(d, i)); err != nil {
				t.Errorf("host %s: the ledger of partition %d is gone: %v", d, i, err)
			}
		}
	}
}

// Issue 42, item 4: an admin deletes both partitions' changelog streams
// under an owner (--changelog --standby) and its standby; events come
// after; then a supervisor restarts both, the standby first. Every event
// is applied once, in the ledgers of whoever owns each partition at the
// end, the other host's copies equal; no host's file of a partition is
// gone, and every file set aside holds nothing the final ledgers lack.
func TestOwnedChangelogsDeletedThenRestarted(t *testing.T) {
	r := newOwnedRig(t, startCluster(t), "PAY")
	dirs := [2]string{t.TempDir(), t.TempDir()} // A, B
	paths := func(d string) []string { return []string{partDB(d, 0), partDB(d, 1)} }
	a := r.run(dirs[0], r.c.urls(), "--changelog", "--standby")
	r.waitRole(a, "A", "owner", 0, 1)
	b := r.run(dirs[1], r.c.urls(), "--standby")
	r.waitStandsBy(b, "B")
	evs := makeEvents(randFor(t), r.pub, 120)
	r.publish(evs[:50])
	r.waitApplied("the first 50 applied", 50, dirs[:]...)
	waitSamePosition(t, "B's copies caught up", paths(dirs[0]), paths(dirs[1]))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, d := range ownedDurables {
		// What the lifecycle compares before a file begins a log: the
		// highest stream sequence the file holds, and the durable's ack
		// floor (a stream sequence too).
		seen, _ := fileInt(partDB(dirs[0], i), `SELECT max(max(stream_seq), max(last_seq)) FROM processed_messages`)
		cons, err := r.c.js.Consumer(ctx, r.stream, d)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("partition %d before the deletion: A's file holds stream sequences through %d, the durable's ack floor is %d (its own sequence %d)",
			i, seen, cons.CachedInfo().AckFloor.Stream, cons.CachedInfo().AckFloor.Consumer)
	}
	for i := range ownedDurables {
		if err := r.c.js.DeleteStream(ctx, r.changelogStream(i)); err != nil {
			t.Fatal(err)
		}
	}
	r.publish(evs[50:100])
	r.waitApplied("the 50 after the deletion applied", 100, dirs[:]...)
	for who, p := range map[string]*proc{"A": a, "B": b} {
		if !running(p) {
			t.Fatalf("%s exited after the changelogs were deleted:\n%s", who, tail(p.output()))
		}
	}
	r.stopAll(map[string]*proc{"A": a, "B": b})

	b = r.run(dirs[1], r.c.urls(), "--standby")
	consumertest.Eventually(t, time.Minute, "B started", func() bool { return b.output() != "" })
	a = r.run(dirs[0], r.c.urls(), "--changelog", "--standby")
	owners := make([]int, len(ownedDurables)) // 0: A, 1: B
	runs := [2]*proc{a, b}
	for i := range owners {
		consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("partition %d owned after the restarts", i), func() bool {
			for h, p := range runs {
				if !running(p) {
					t.Fatalf("host %d exited after the restart:\n%s", h, tail(p.output()))
				}
				if logged(p, "owner", i) {
					owners[i] = h
					return true
				}
			}
			return false
		})
	}
	r.publish(evs[100:])
	r.waitApplied("every event applied", len(evs), dirs[:]...)
	now := []string{partDB(dirs[owners[0]], 0), partDB(dirs[owners[1]], 1)}
	copies := []string{partDB(dirs[1-owners[0]], 0), partDB(dirs[1-owners[1]], 1)}
	waitSamePosition(t, "the standing-by host's copies caught up", now, copies)
	r.stopAll(map[string]*proc{"A": a, "B": b})
	for i := range ownedDurables {
		if n := roleRecords(runs[1-owners[i]], "owner", i); n != 0 {
			t.Errorf("partition %d owned by both restarted runs", i)
		}
	}
	checkFilesKept(t, dirs[:]...)
	finals := openLedgers(t, now...)
	checkPartitionedExact(t, finals, evs)
	checkPartitionedExact(t, openLedgers(t, copies...), evs)
	aside := checkAsideHeld(t, dirs[0], finals) + checkAsideHeld(t, dirs[1], finals)
	t.Logf("final owners (0: A, 1: B): %v; %d files set aside", owners, aside)
}

// Issue 42, item 5: the owner's host is lost (SIGKILL, its directory
// deleted) with no standby running; a replacement host starts with an
// empty --db and --standby. It restores the snapshot, follows the log
// and owns both partitions, with every event once. With trimmed, the
// owner is restarted twice first: each take-over stores a snapshot and
// trims the log behind the one before, so the replacement cannot start
// from the log's first entry. (The CLI has no --snapshot-interval: the
// snapshots of take-overs stand in for those of a long run.)
func TestOwnedHostReplaced(t *testing.T) {
	for _, trimmed := range []bool{false, true} {
		t.Run(fmt.Sprintf("trimmed=%v", trimmed), func(t *testing.T) {
			r := newOwnedRig(t, startCluster(t), "PAY")
			dirA, dirC := t.TempDir(), t.TempDir()
			evs := makeEvents(randFor(t), r.pub, 400)
			// --standby too: without it, a first start on a fresh cluster
			// can exit (TestOwnedFirstStartOnAFreshCluster).
			a := r.run(dirA, r.c.urls(), "--changelog", "--standby")
			r.waitRole(a, "A", "owner", 0, 1)
			r.publish(evs[:100])
			r.waitApplied("the first 100 applied", 100, dirA)
			if trimmed {
				for round := 1; round <= 2; round++ {
					r.stop(a, "A")
					a = r.run(dirA, r.c.urls(), "--changelog", "--standby")
					r.waitRole(a, "A, started again", "owner", 0, 1)
					r.publish(evs[100*round : 100*(round+1)])
					r.waitApplied(fmt.Sprintf("round %d applied", round), 100*(round+1), dirA)
				}
				consumertest.Eventually(t, time.Minute, "both logs trimmed behind a snapshot", func() bool {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					for i := range ownedDurables {
						s, err := r.c.js.Stream(ctx, r.changelogStream(i))
						if err != nil || s.CachedInfo().State.FirstSeq <= 1 {
							return false
						}
					}
					return true
				})
			} else {
				r.publish(evs[100:300])
				r.waitApplied("300 applied", 300, dirA)
			}
			r.publish(evs[300:330]) // in hand, or not yet, when the host goes
			a.kill()
			if err := os.RemoveAll(dirA); err != nil {
				t.Fatal(err)
			}
			c := r.run(dirC, r.c.urls(), "--standby")
			r.publish(evs[330:])
			r.waitRole(c, "the replacement", "owner", 0, 1)
			r.waitApplied("every event applied by the replacement", len(evs), dirC)
			r.stop(c, "the replacement")
			checkPartitionedExact(t, openLedgers(t, partDB(dirC, 0), partDB(dirC, 1)), evs)
			if n := restores(c); n < len(ownedDurables) {
				t.Errorf("the replacement restored %d snapshots, want one per partition", n)
			}
		})
	}
}

// The first --changelog run of a stream's partitions on a fresh cluster
// takes each partition's lease, then prepares its ledger (the snapshot
// bucket made, R3, by both partitions at once) before its lease is kept:
// the run must own both partitions and keep running.
func TestOwnedFirstStartOnAFreshCluster(t *testing.T) {
	r := newOwnedRig(t, startCluster(t), "PAY")
	dir := t.TempDir()
	owner := r.run(dir, r.c.urls(), "--changelog")
	consumertest.Eventually(t, 2*time.Minute, "the first run owning both partitions", func() bool {
		if !running(owner) {
			t.Fatalf("the only --changelog run exited %d:\n%s", owner.wait(0), tail(owner.output()))
		}
		return logged(owner, "owner", 0) && logged(owner, "owner", 1)
	})
	evs := makeEvents(randFor(t), r.pub, 100)
	r.publish(evs)
	r.waitApplied("every event applied", len(evs), dir)
	r.stop(owner, "the owner")
	checkPartitionedExact(t, openLedgers(t, partDB(dir, 0), partDB(dir, 1)), evs)
}

// Issue 42, item 3: two --standby runs of both partitions started at
// the same moment, no owner yet: each partition is owned by one of them
// once and for all (one "owner" record per partition over both runs, no
// "lost"), and 200 events are applied once.
func TestOwnedTwoStandbysStartedTogether(t *testing.T) {
	r := newOwnedRig(t, startCluster(t), "PAY")
	dirs := [2]string{t.TempDir(), t.TempDir()}
	runs := [2]*proc{r.run(dirs[0], r.c.urls(), "--standby"), r.run(dirs[1], r.c.urls(), "--standby")}
	owners := make([]int, len(ownedDurables))
	for i := range owners {
		consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("partition %d owned and stood by", i), func() bool {
			for h, p := range runs {
				if logged(p, "owner", i) {
					owners[i] = h
					return standsBy(runs[1-h], i)
				}
			}
			return false
		})
	}
	evs := makeEvents(randFor(t), r.pub, 200)
	r.publish(evs)
	r.waitApplied("every event applied", len(evs), dirs[:]...)
	now := []string{partDB(dirs[owners[0]], 0), partDB(dirs[owners[1]], 1)}
	copies := []string{partDB(dirs[1-owners[0]], 0), partDB(dirs[1-owners[1]], 1)}
	waitSamePosition(t, "the copies caught up", now, copies)
	r.stopAll(map[string]*proc{"run 0": runs[0], "run 1": runs[1]})
	for i := range owners {
		own := roleRecords(runs[0], "owner", i) + roleRecords(runs[1], "owner", i)
		lost := roleRecords(runs[0], "lost", i) + roleRecords(runs[1], "lost", i)
		if own != 1 || lost != 0 {
			t.Errorf("partition %d: %d owner and %d lost records over both runs, want 1 and 0 (ownership flapped)", i, own, lost)
		}
	}
	checkPartitionedExact(t, openLedgers(t, now...), evs)
	checkPartitionedExact(t, openLedgers(t, copies...), evs)
}

// gauge reads a gauge from the /metrics of addr; -1 if unread.
func gauge(addr, name string) float64 {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return -1
			}
			return f
		}
	}
	return -1
}

// leaseHolder is who holds partition part's lease ("" when nobody does).
func (r *ownedRig) leaseHolder(part int) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := r.c.js.KeyValue(ctx, changelog.LeaseBucket)
	if err != nil {
		return "", err
	}
	e, err := kv.Get(ctx, r.stream+"."+ownedDurables[part])
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return string(e.Value()), nil
}

// consistently checks cond every 200ms for d, failing at its first false.
func consistently(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); {
		if !cond() {
			t.Fatalf("no longer true: %s", what)
		}
		time.Sleep(200 * time.Millisecond) // a poll's pace over the window, not a synchronisation
	}
}

// snapshotSeq is the entry partition part's stored snapshot holds last (0: none).
func (r *ownedRig) snapshotSeq(part int) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	obs, err := r.c.js.ObjectStore(ctx, changelog.SnapshotBucket)
	if err != nil {
		return 0
	}
	info, err := obs.GetInfo(ctx, r.changelogStream(part))
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(info.Metadata["jetledger-seq"])
	return n
}

// lastEntry is partition part's changelog's last entry.
func (r *ownedRig) lastEntry(part int) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := r.c.js.Stream(ctx, r.changelogStream(part))
	if err != nil {
		r.t.Fatal(err)
	}
	return int(s.CachedInfo().State.LastSeq)
}

// purgeLog purges partition part's changelog stream, as an admin would.
func (r *ownedRig) purgeLog(part int) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := r.c.js.Stream(ctx, r.changelogStream(part))
	if err != nil {
		r.t.Fatal(err)
	}
	if err := s.Purge(ctx); err != nil {
		r.t.Fatal(err)
	}
}

// Issue 42, item 10: partition 0's changelog purged by an admin while its
// standby (with --metrics) is behind (SIGSTOPped, then woken).
//
// First with the owner running: the standby ends up current again (the
// owner's next snapshot) without looping on restores. Then purged again
// and the owner SIGKILLed at once: the standby, whose copy lacks entries
// nobody holds, says it waits (the gauge jetledger_changelog_waiting at
// 1, /healthz unhealthy), restores nothing in a loop and takes nothing
// over; every acknowledged event is in the owner's files. (Should the
// owner have stored a snapshot between the purge and its SIGKILL, its
// copy holds everything and the standby may take over: then that is
// checked instead.) The owner started again on its host snapshots at its
// take-over; the standby restores that and follows. Every event once.
func TestOwnedChangelogPurgedUnderAStandby(t *testing.T) {
	r := newOwnedRig(t, startCluster(t), "PAY")
	dirO, dirS := t.TempDir(), t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	// --standby too: a first --changelog start on a fresh cluster can exit
	// (TestOwnedFirstStartOnAFreshCluster).
	owner := r.run(dirO, r.c.urls(), "--changelog", "--standby")
	r.waitRole(owner, "the owner", "owner", 0, 1)
	standby := r.run(dirS, r.c.urls(), "--partition=0", "--standby", "--metrics", addr)
	consumertest.Eventually(t, 2*time.Minute, "the standby standing by for partition 0", func() bool { return standsBy(standby, 0) })
	evs := makeEvents(randFor(t), r.pub, 500)
	ownerP0, copyP0 := []string{partDB(dirO, 0)}, []string{partDB(dirS, 0)}
	r.publish(evs[:100])
	r.waitApplied("the first 100 applied", 100, dirO)
	waitSamePosition(t, "the standby's copy caught up", ownerP0, copyP0)
	if code := healthzWithin(addr, 5*time.Second); code != http.StatusOK {
		t.Fatalf("the following standby's /healthz answered %d, want 200", code)
	}

	// The owner running: purged behind the stopped standby.
	standby.signal(syscall.SIGSTOP)
	consumertest.Eventually(t, time.Minute, "the standby stopped", func() bool { return isStopped(standby) })
	r.publish(evs[100:200])
	r.waitApplied("100 applied while the standby is stopped", 200, dirO)
	r.purgeLog(0)
	r.publish(evs[200:250])
	r.waitApplied("50 applied after the purge", 250, dirO)
	standby.signal(syscall.SIGCONT)
	waitSamePosition(t, "the standby's copy current again, the owner running", ownerP0, copyP0)
	consumertest.Eventually(t, time.Minute, "the standby not waiting", func() bool {
		return gauge(addr, "jetledger_changelog_waiting") == 0 && healthzWithin(addr, 2*time.Second) == http.StatusOK
	})
	first := restores(standby)
	t.Logf("purged with the owner running: the standby restored %d snapshots (1 at its start)", first)
	if first > 3 {
		t.Errorf("the standby restored the snapshot %d times, want a handful at most", first)
	}

	// Purged again, the owner SIGKILLed at once.
	standby.signal(syscall.SIGSTOP)
	consumertest.Eventually(t, time.Minute, "the standby stopped", func() bool { return isStopped(standby) })
	r.publish(evs[250:300])
	r.waitApplied("50 applied while the standby is stopped", 300, dirO)
	r.purgeLog(0)
	owner.kill()
	last, snap := r.lastEntry(0), r.snapshotSeq(0)
	standby.signal(syscall.SIGCONT)
	if snap >= last {
		t.Logf("the owner stored a snapshot of entry %d (the log's last, %d) before its SIGKILL: the standby's copy can be whole", snap, last)
		r.waitRole(standby, "the standby, with the owner's last snapshot", "owner", 0)
	} else {
		t.Logf("the owner SIGKILLed with its last snapshot at entry %d, the log's last %d: the standby's copy lacks entries nobody holds", snap, last)
		consumertest.Eventually(t, 2*time.Minute, "the standby saying it waits (gauge and /healthz)", func() bool {
			return gauge(addr, "jetledger_changelog_waiting") == 1 && healthzWithin(addr, 2*time.Second) == http.StatusServiceUnavailable
		})
		consumertest.Eventually(t, time.Minute, "the lost owner's lease of partition 0 expired", func() bool {
			h, err := r.leaseHolder(0)
			return err == nil && h == ""
		})
		consistently(t, 10*time.Second, "nobody takes partition 0 over from a copy missing entries", func() bool {
			// Not the lease's holder: a KV read may be served by a replica
			// behind (direct get); what counts is that nobody consumes.
			h, err := r.leaseHolder(0)
			ok := running(standby) && !logged(standby, "owner", 0) && gauge(addr, "jetledger_changelog_waiting") == 1
			if !ok {
				t.Logf("running %v, holder %q (%v), owner logged %v, waiting gauge %v", running(standby), h, err, logged(standby, "owner", 0), gauge(addr, "jetledger_changelog_waiting"))
			}
			return ok
		})
		if n := restores(standby) - first; n > 2 {
			t.Errorf("the waiting standby restored the snapshot %d times, want a handful at most", n)
		}
		// Every acknowledged event is in the owner's files.
		acked := openLedgers(t, partDB(dirO, 0), partDB(dirO, 1))
		checkPartitionedExact(t, acked, evs[:300])
		for _, db := range acked {
			db.Close()
		}
		owner = r.run(dirO, r.c.urls(), "--changelog", "--standby")
		r.waitRole(owner, "the owner, started again", "owner", 0, 1)
	}
	r.publish(evs[300:])
	// Partition 1 has no standby: a SIGKILLed owner's stays unowned until
	// it is started again.
	if !running(owner) {
		owner = r.run(dirO, r.c.urls(), "--changelog", "--standby")
	}
	now0 := partDB(dirO, 0)
	copy0 := partDB(dirS, 0)
	if logged(standby, "owner", 0) {
		now0, copy0 = copy0, now0
	}
	consumertest.Eventually(t, 3*time.Minute, "every event applied", func() bool {
		a, _ := fileInt(now0, `SELECT count(*) FROM processed_messages`)
		b, _ := fileInt(partDB(dirO, 1), `SELECT count(*) FROM processed_messages`)
		return a+b >= len(evs) && r.c.drained(r.stream, ownedDurables...)
	})
	waitSamePosition(t, "the copy of partition 0 current", []string{now0}, []string{copy0})
	consumertest.Eventually(t, time.Minute, "nobody waiting", func() bool {
		return gauge(addr, "jetledger_changelog_waiting") == 0 && healthzWithin(addr, 2*time.Second) == http.StatusOK
	})
	r.stopAll(map[string]*proc{"the owner": owner, "the standby": standby})
	t.Logf("the standby restored the snapshot %d times in all", restores(standby))
	final := openLedgers(t, now0, partDB(dirO, 1))
	checkPartitionedExact(t, final, evs)
	copyDB := openLedgers(t, copy0)[0]
	for _, q := range []string{`SELECT count(*) FROM processed_messages`, `SELECT coalesce(sum(amount), 0) FROM balances`} {
		if got, want := count(t, copyDB, q), count(t, final[0], q); got != want {
			t.Errorf("the other copy of partition 0: %s = %d, the owner's %d", q, got, want)
		}
	}
	checkAsideHeld(t, dirS, final)
	checkAsideHeld(t, dirO, final)
}

// Issue 42, item 12: an admin deletes the lease bucket under an owner
// (--changelog --standby) and its standby: the owner takes its keys back
// in the bucket made again (or hands over cleanly), nobody exits, and
// events published after are applied once, the copies equal.
func TestOwnedLeaseBucketDeleted(t *testing.T) {
	r := newOwnedRig(t, startCluster(t), "PAY")
	dirs := [2]string{t.TempDir(), t.TempDir()}
	owner := r.run(dirs[0], r.c.urls(), "--changelog", "--standby")
	r.waitRole(owner, "the owner", "owner", 0, 1)
	standby := r.run(dirs[1], r.c.urls(), "--standby")
	r.waitStandsBy(standby, "the standby")
	evs := makeEvents(randFor(t), r.pub, 300)
	r.publish(evs[:100])
	r.waitApplied("the first 100 applied", 100, dirs[:]...)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	deleted := time.Now()
	if err := r.c.js.DeleteKeyValue(ctx, changelog.LeaseBucket); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	// A run's name in the lease: host, pid and a tag of its own.
	ownerName := fmt.Sprintf("%s:%d:", host, owner.cmd.Process.Pid)
	consumertest.Eventually(t, time.Minute, "both leases held again in the bucket made again", func() bool {
		for i := range ownedDurables {
			if h, err := r.leaseHolder(i); err != nil || h == "" {
				return false
			}
		}
		return true
	})
	r.publish(evs[100:])
	r.waitApplied("every event applied", len(evs), dirs[:]...)
	runs := [2]*proc{owner, standby}
	for h, p := range runs {
		if !running(p) {
			t.Fatalf("run %d exited after the lease bucket was deleted:\n%s", h, tail(p.output()))
		}
	}
	owners := make([]int, len(ownedDurables))
	for i := range owners {
		h, err := r.leaseHolder(i)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(h, ownerName) {
			owners[i] = 1
			t.Logf("partition %d handed over to the standby (%s)", i, h)
		}
	}
	now := []string{partDB(dirs[owners[0]], 0), partDB(dirs[owners[1]], 1)}
	copies := []string{partDB(dirs[1-owners[0]], 0), partDB(dirs[1-owners[1]], 1)}
	waitSamePosition(t, "the copies caught up", now, copies)
	r.stopAll(map[string]*proc{"the owner": owner, "the standby": standby})
	for i := range ownedDurables {
		// Counted from the deletion: a flap at the first start is
		// TestOwnedTwoStandbysStartedTogether's.
		lost := roleRecordsSince(owner, "lost", i, deleted) + roleRecordsSince(standby, "lost", i, deleted)
		own := roleRecordsSince(owner, "owner", i, deleted) + roleRecordsSince(standby, "owner", i, deleted)
		t.Logf("partition %d after the deletion: %d owner records, %d lost; before it: %d lost", i, own, lost, roleRecords(owner, "lost", i)+roleRecords(standby, "lost", i)-lost)
		if owners[i] == 0 && (own != 0 || lost != 0) {
			t.Errorf("partition %d: the owner kept it, yet %d owner and %d lost records after the deletion", i, own, lost)
		}
		if owners[i] == 1 && own != 1 {
			t.Errorf("partition %d: handed over with %d owner records after the deletion, want 1", i, own)
		}
	}
	checkPartitionedExact(t, openLedgers(t, now...), evs)
	checkPartitionedExact(t, openLedgers(t, copies...), evs)
}

// runWith is r.run with another --schema and --apply.
func (r *ownedRig) runWith(dir, schema, apply string, role ...string) *proc {
	r.t.Helper()
	args := append([]string{"run", "--nats", r.c.urls(), "--db", filepath.Join(dir, "ledger.db"), "--stream", r.stream,
		"--subjects", "pay.*", "--partitions", "2", "--replicas", "3", "--partition", "0,1",
		"--schema", schema, "--apply", apply, "--log-format", "json"}, role...)
	return start(r.t, nil, append(args, fastPlan...)...)
}

// Issue 42, item 11: a new table in --schema, upgraded standby first.
// Owner A (--changelog --standby) and standby B run schema v1; B is
// restarted with v2 (a table audit, and an --apply that also inserts a
// row into it per message); then A is restarted with v2: B owns (a clean
// hand-over) and writes audit rows, and A, standing by with v2, follows:
// its copies hold the audit rows.
func TestOwnedSchemaUpgradedStandbyFirst(t *testing.T) {
	r := newOwnedRig(t, startCluster(t), "PAY")
	dirs := [2]string{t.TempDir(), t.TempDir()} // A, B
	v2 := filepath.Join(t.TempDir(), "schema-v2.sql")
	if err := os.WriteFile(v2, []byte(balanceTable+"\nCREATE TABLE IF NOT EXISTS audit (msg_id TEXT PRIMARY KEY, account TEXT NOT NULL, amount INTEGER NOT NULL);\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	applyV2 := balanceApply + `;
		INSERT INTO audit (msg_id, account, amount) VALUES (:msg_id, json_extract(:data, '$.account'), json_extract(:data, '$.amount'))`
	a := r.runWith(dirs[0], r.schema, balanceApply, "--changelog", "--standby")
	r.waitRole(a, "A", "owner", 0, 1)
	b := r.runWith(dirs[1], r.schema, balanceApply, "--standby")
	r.waitStandsBy(b, "B")
	evs := makeEvents(randFor(t), r.pub, 300)
	r.publish(evs[:100])
	r.waitApplied("the first 100 applied (v1)", 100, dirs[:]...)

	r.stop(b, "B (v1)")
	b = r.runWith(dirs[1], v2, applyV2, "--standby")
	r.waitStandsBy(b, "B (v2)")
	r.publish(evs[100:150])
	r.waitApplied("50 applied by A (v1), B at v2", 150, dirs[:]...)
	waitSamePosition(t, "B's copies caught up", []string{partDB(dirs[0], 0), partDB(dirs[0], 1)}, []string{partDB(dirs[1], 0), partDB(dirs[1], 1)})

	r.stop(a, "A (v1)")
	r.waitRole(b, "B (v2), after A stopped", "owner", 0, 1)
	a = r.runWith(dirs[0], v2, applyV2, "--changelog", "--standby")
	consumertest.Eventually(t, 2*time.Minute, "A (v2) standing by for both partitions", func() bool {
		if !running(a) {
			t.Fatalf("A (v2) exited:\n%s", tail(a.output()))
		}
		return standsBy(a, 0) && standsBy(a, 1)
	})
	for h, d := range dirs {
		for i := range ownedDurables {
			n, err := fileInt(partDB(d, i), `SELECT count(*) FROM sqlite_schema WHERE name = 'audit'`)
			t.Logf("host %d, partition %d: table audit in the file: %d (%v)", h, i, n, err)
		}
	}
	r.publish(evs[150:])
	r.waitApplied("every event applied, by B (v2)", len(evs), dirs[:]...)
	consumertest.Eventually(t, 2*time.Minute, "A's copies caught up with B's", func() bool {
		if !running(a) {
			t.Fatalf("A (v2), standing by, exited:\n%s", tail(a.output()))
		}
		return filePosition(partDB(dirs[0], 0)) == filePosition(partDB(dirs[1], 0)) &&
			filePosition(partDB(dirs[0], 1)) == filePosition(partDB(dirs[1], 1)) && filePosition(partDB(dirs[0], 0)) != ""
	})
	r.stopAll(map[string]*proc{"A": a, "B": b})
	now := openLedgers(t, partDB(dirs[1], 0), partDB(dirs[1], 1))
	copies := openLedgers(t, partDB(dirs[0], 0), partDB(dirs[0], 1))
	checkPartitionedExact(t, now, evs)
	checkPartitionedExact(t, copies, evs)
	audit := 0
	for i := range now {
		n := count(t, now[i], `SELECT count(*) FROM audit`)
		audit += n
		var have int
		if err := copies[i].QueryRow(`SELECT count(*) FROM audit`).Scan(&have); err != nil {
			t.Errorf("A's copy of partition %d: %v", i, err)
			continue
		}
		if have != n {
			t.Errorf("A's copy of partition %d holds %d audit rows, B's ledger %d", i, have, n)
		}
	}
	if audit != 150 {
		t.Errorf("B's ledgers hold %d audit rows, want 150 (the events B applied with v2)", audit)
	}
}
