package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
	"github.com/jetledger/jetledger/consumer/partition"
	jlstream "github.com/jetledger/jetledger/stream"
	"github.com/nats-io/nats.go/jetstream"
)

// Attack 4 (helper-20): operations on owned partitions after the
// session's fixes: the lease bucket deleted under a busy, an idle and a
// catching-up pair; more outbox workers than the default with a webhook
// that has no idempotency, through an owner's SIGKILL, its host replaced
// empty and the log deleted; an idle owner paused around its lease's
// expiry; the snapshot bucket deleted then the standby replaced empty;
// the admin API asked the moment a run owns; two empty hosts started
// together and killed together; a standby catching up on a large backlog
// with its WAL watched.

// deleteLeaseBucket deletes the lease bucket (gone already is fine).
func (a *a2) deleteLeaseBucket() {
	t := a.r.t
	t.Helper()
	consumertest.Eventually(t, time.Minute, "the lease bucket deleted", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := a.r.c.js.DeleteKeyValue(ctx, changelog.LeaseBucket)
		return err == nil || errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound)
	})
}

// 1. The lease bucket deleted under a busy pair, an idle pair, and while
// the standby catches up (stopped, events published, started again, the
// bucket deleted as it applies the backlog). Nobody exits, every event
// once, copies equal.
func TestAttack4LeaseBucketDeleted(t *testing.T) {
	for _, when := range []string{"busy", "idle", "standby-catching-up"} {
		t.Run(when, func(t *testing.T) {
			a := newA2(t, "PAY")
			dirs, flags, hosts := a.startPair()
			evs := makeEvents(randFor(t), a.r.pub, 600)
			a.r.publish(evs[:100])
			a.r.waitApplied("the first 100 applied", 100, dirs...)
			switch when {
			case "busy":
				tr := a.traffic(evs[100:500], 5, 10*time.Millisecond)
				a.atLeast("busy", 150, dirs...)
				a.deleteLeaseBucket()
				tr.wait(t)
			case "idle":
				waitSamePosition(t, "B caught up", []string{partDB(dirs[0], 0), partDB(dirs[0], 1)}, []string{partDB(dirs[1], 0), partDB(dirs[1], 1)})
				a.deleteLeaseBucket()
				a.r.publish(evs[100:500])
			case "standby-catching-up":
				stopOK(t, hosts[1], "B")
				a.r.publish(evs[100:500])
				a.r.waitApplied("500 applied without B", 500, dirs[0])
				hosts[1] = a.start("B", dirs[1], flags[1]...)
				consumertest.Eventually(t, 2*time.Minute, "B applying the backlog", func() bool {
					n, err := fileInt(partDB(dirs[1], 0), `SELECT count(*) FROM processed_messages`)
					return err == nil && n > 50
				})
				a.deleteLeaseBucket()
			}
			a.ownersOf("after the lease bucket's deletion", hosts...)
			a.r.publish(evs[500:])
			alive(t, hosts[0], "A")
			alive(t, hosts[1], "B")
			a.finishApplied(t, dirs, hosts, evs)
		})
	}
}

// 2. Eight outbox workers, a destination without idempotency that is a
// little slow, traffic flowing: the owner SIGKILLed mid-sends and started
// again at once; then its host replaced with an empty disk; then the
// changelog deleted. No key sent twice, no row lost, every row sent or in
// review at the end.
func TestAttack4OutboxWorkersThroughKillReplaceAndLogDeleted(t *testing.T) {
	aaLong(t)
	a := newA2(t, "PAY")
	dest, dirs, flags, hosts := a.slowWebhookPair(t, 20*time.Millisecond, 8)
	evs := makeEvents(randFor(t), a.r.pub, 900)
	tr := a.traffic(evs[:800], 10, 30*time.Millisecond)
	a.atLeast("the first 150 applied", 150, dirs...)
	h := a.ownerOf("before the kill", 0, hosts...)
	hosts[h].kill()
	hosts[h] = a.start([]string{"A", "B"}[h], dirs[h], flags[h]...)
	a.ownersOf("after the kill", hosts...)
	a.atLeast("more applied", 400, dirs...)
	h = a.ownerOf("before the replacement", 1, hosts...)
	hosts[h].kill()
	wipe(t, dirs[h])
	hosts[h] = a.start([]string{"A", "B"}[h]+" (empty)", dirs[h], flags[h]...)
	a.ownersOf("after the replacement", hosts...)
	a.atLeast("more applied", 600, dirs...)
	a.deleteLogs(0, 1)
	tr.wait(t)
	a.r.publish(evs[800:])
	alive(t, hosts[0], "A")
	alive(t, hosts[1], "B")
	a.r.waitApplied("every event applied", len(evs), dirs...)
	o0, o1 := a.ownerOf("end", 0, hosts...), a.ownerOf("end", 1, hosts...)
	finals := openLedgers(t, partDB(dirs[o0], 0), partDB(dirs[o1], 1))
	waitSettled(t, finals...)
	rows := append(outboxRows(t, finals[0]), outboxRows(t, finals[1])...)
	review := checkSentAtMostOnce(t, dest, rows, len(evs))
	t.Logf("%d effects at the destination, %d rows in review, %d rows", len(dest.Items()), review, len(rows))
	reviewBreakdown(t, dest, rows)
	a.finish(t, dirs, hosts, evs, nil)
}

// 4a. An idle owner paused (SIGSTOP) around its lease's expiry (TTL
// 2.8s), again and again: it must keep its partitions or stand by, never
// exit. Every event once at the end.
func TestAttack4IdleOwnerPausedAroundLeaseExpiry(t *testing.T) {
	aaLong(t)
	a := newA2(t, "PAY")
	dirs, _, hosts := a.startPair()
	evs := makeEvents(randFor(t), a.r.pub, 400)
	a.r.publish(evs[:100])
	a.r.waitApplied("the first 100 applied", 100, dirs...)
	pauses := []time.Duration{1000, 2000, 2600, 2900, 3200, 4000, 2800, 3500}
	for round, ms := range pauses {
		h := a.ownerOf(fmt.Sprintf("round %d", round), round%2, hosts...)
		hosts[h].signal(syscall.SIGSTOP)
		time.Sleep(ms * time.Millisecond) // the pause is the operation
		hosts[h].signal(syscall.SIGCONT)
		a.ownersOf(fmt.Sprintf("round %d, after a pause of %dms", round, ms), hosts...)
		alive(t, hosts[0], "A")
		alive(t, hosts[1], "B")
		a.r.publish(evs[100+30*round : 130+30*round])
	}
	a.r.publish(evs[100+30*len(pauses):])
	a.r.waitApplied("every event applied", len(evs), dirs...)
	alive(t, hosts[0], "A")
	alive(t, hosts[1], "B")
	a.finish(t, dirs, hosts, evs, nil)
}

// 4b. The snapshot bucket deleted under an idle pair, then the standby's
// host replaced with an empty disk: the owner snapshots at its next look
// (5s), and the empty standby is seeded and stands by soon (the fix's
// claim: ~15s), not after the snapshot interval.
func TestAttack4SnapshotDeletedEmptyStandbySeededSoon(t *testing.T) {
	a := newA2(t, "PAY")
	dirs, flags, hosts := a.startPair()
	evs := makeEvents(randFor(t), a.r.pub, 300)
	a.r.publish(evs[:150])
	a.r.waitApplied("150 applied", 150, dirs...)
	waitSamePosition(t, "B caught up", []string{partDB(dirs[0], 0), partDB(dirs[0], 1)}, []string{partDB(dirs[1], 0), partDB(dirs[1], 1)})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.r.c.js.DeleteObjectStore(ctx, changelog.SnapshotBucket); err != nil {
		t.Fatal(err)
	}
	hosts[1].kill()
	wipe(t, dirs[1])
	start := time.Now()
	hosts[1] = a.start("B (empty)", dirs[1], flags[1]...)
	a.r.waitStandsBy(hosts[1], "B (empty)")
	took := time.Since(start)
	t.Logf("the empty standby stood by %v after its start (snapshot bucket deleted)", took.Round(10*time.Millisecond))
	if took > 45*time.Second {
		t.Errorf("the empty standby stood by only %v after its start: the snapshot deleted is not made again at the owner's next look", took)
	}
	a.r.publish(evs[150:])
	a.finishApplied(t, dirs, hosts, evs)
}

// 5. The admin API asked through the CLI the moment a run logs owner
// (and the moment a standby takes over): the endpoints are there.
func TestAttack4AdminCLIRightAfterOwning(t *testing.T) {
	a := newA2(t, "PAY")
	dest := webhooktest.NewDestination(t, false)
	dest.FailWith(http.StatusInternalServerError) // every row to review
	dirs := []string{t.TempDir(), t.TempDir()}
	url := a.r.c.url(0)
	owner := a.start("A", dirs[0], webhookArgs(dest, "--changelog", "--standby")...)
	consumertest.Eventually(t, 2*time.Minute, "A logging owner of partition 0", func() bool { return logged(owner, "owner", 0) })
	if out, code := cli(t, "outbox", "list", "--nats", url, "--partition", "0", "--json"); code != 0 {
		// The record "owning the partition" is logged before the API is
		// served (afterOpen, then consume): 1 of 6 runs met no responder.
		t.Logf("outbox list the moment A logged owner of partition 0: exit %d: %s", code, strings.TrimSpace(out))
	}
	a.r.waitRole(owner, "A", "owner", 0, 1)
	standby := a.start("B", dirs[1], webhookArgs(dest, "--standby")...)
	a.r.waitStandsBy(standby, "B")
	evs := makeEvents(randFor(t), a.r.pub, 60)
	a.r.publish(evs)
	a.r.waitApplied("every event applied", len(evs), dirs...)
	ledA := openLedgers(t, partDB(dirs[0], 0), partDB(dirs[0], 1))
	consumertest.Eventually(t, 2*time.Minute, "every row in review", func() bool {
		return count(t, ledA[0], `SELECT count(*) FROM outbox WHERE status <> 'review'`) == 0 &&
			count(t, ledA[1], `SELECT count(*) FROM outbox WHERE status <> 'review'`) == 0
	})
	waitSamePosition(t, "B caught up", []string{partDB(dirs[0], 0), partDB(dirs[0], 1)}, []string{partDB(dirs[1], 0), partDB(dirs[1], 1)})
	// Resolve one row at a time, through whichever run answers: each is
	// done by the owner (once) or refused, saying so.
	rows := outboxRows(t, ledA[1])
	refused, done := 0, 0
	for _, r := range rows[:5] {
		out, code := cli(t, "outbox", "resolve", "--nats", url, "--partition", "1", "--as", "failed", "--who", "ops@a4", r.ID)
		if code == 0 {
			done++
		} else {
			refused++
			t.Logf("resolve %s before the take-over: exit %d: %s", r.ID, code, strings.TrimSpace(out))
		}
	}
	owner.kill()
	consumertest.Eventually(t, 2*time.Minute, "B owning partition 1", func() bool { return logged(standby, "owner", 1) })
	// The record "owning the partition" comes a moment before the API is
	// served (see above): a request that finds no run's API is asked again.
	var out string
	var code int
	consumertest.Eventually(t, 30*time.Second, "B's API answering a resolve", func() bool {
		out, code = cli(t, "outbox", "resolve", "--nats", url, "--partition", "1", "--as", "failed", "--who", "ops@a4", rows[5].ID)
		return code == 0 || !strings.Contains(out, "admin API matches")
	})
	if code != 0 {
		t.Errorf("resolve the moment B owned partition 1: exit %d: %s", code, out)
	}
	if out, code := cli(t, "outbox", "list", "--nats", url, "--partition", "1", "--json"); code != 0 {
		t.Errorf("outbox list right after the take-over: exit %d: %s", code, out)
	}
	a.r.waitRole(standby, "B", "owner", 0, 1)
	ledB := openLedgers(t, partDB(dirs[1], 1))
	got := count(t, ledB[0], `SELECT count(*) FROM outbox WHERE status = 'failed'`)
	audits := count(t, ledB[0], `SELECT count(*) FROM jetledger_audit WHERE who = 'ops@a4'`)
	t.Logf("before the take-over: %d resolves done, %d refused; B's ledger: %d rows failed, %d audit records", done, refused, got, audits)
	if got != done+1 || audits != done+1 {
		t.Errorf("B's ledger holds %d rows failed and %d records of the action; %d resolves answered done before the take-over and 1 after", got, audits, done)
	}
	stopOK(t, standby, "B")
}

// 6. Two hosts on empty disks started at the same moment with events in
// the stream and a webhook with eight workers; then both SIGKILLed
// together and started again together, twice. One owner per partition
// (the events once), no key sent twice.
func TestAttack4TwoEmptyHostsTogetherWithWebhook(t *testing.T) {
	aaLong(t)
	a := newA2(t, "PAY")
	dest := webhooktest.NewDestination(t, false)
	dest.SetDelay(10 * time.Millisecond)
	dirs := []string{t.TempDir(), t.TempDir()}
	flags := [][]string{webhookArgs(dest, "--standby", "--outbox-workers", "8"), webhookArgs(dest, "--standby", "--outbox-workers", "8")}
	tf, err := partition.Transform("pay.*", 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := jlstream.Ensure(ctx, a.r.c.js, jlstream.Config{Name: "PAY", Subjects: []string{"pay.*"}, Transform: tf, Limits: jlstream.Limits{Replicas: 3}}); err != nil {
		t.Fatal(err)
	}
	evs := makeEvents(randFor(t), a.r.pub, 600)
	a.r.publish(evs[:200])
	hosts := []*proc{a.start("A", dirs[0], flags[0]...), a.start("B", dirs[1], flags[1]...)}
	a.ownersOf("both started on empty disks", hosts...)
	tr := a.traffic(evs[200:], 10, 30*time.Millisecond)
	for round := range 2 {
		a.atLeast(fmt.Sprintf("round %d", round), 250+150*round, dirs...)
		hosts[0].signal(syscall.SIGKILL)
		hosts[1].signal(syscall.SIGKILL)
		hosts[0].kill()
		hosts[1].kill()
		hosts[0] = a.start("A", dirs[0], flags[0]...)
		hosts[1] = a.start("B", dirs[1], flags[1]...)
		a.ownersOf(fmt.Sprintf("round %d: both restarted", round), hosts...)
	}
	tr.wait(t)
	alive(t, hosts[0], "A")
	alive(t, hosts[1], "B")
	a.r.waitApplied("every event applied", len(evs), dirs...)
	o0, o1 := a.ownerOf("end", 0, hosts...), a.ownerOf("end", 1, hosts...)
	finals := openLedgers(t, partDB(dirs[o0], 0), partDB(dirs[o1], 1))
	waitSettled(t, finals...)
	rows := append(outboxRows(t, finals[0]), outboxRows(t, finals[1])...)
	review := checkSentAtMostOnce(t, dest, rows, len(evs))
	t.Logf("%d effects at the destination, %d in review", len(dest.Items()), review)
	reviewBreakdown(t, dest, rows)
	a.finish(t, dirs, hosts, evs, nil)
}

// 3. A standby stopped while a large backlog of random-id events is
// published, started again: its WAL stays bounded while it catches up;
// SIGKILLed mid catch-up and started again, its copies end equal.
func TestAttack4StandbyCatchUpLargeBacklogWALBounded(t *testing.T) {
	aaLong(t)
	n := 60000
	if s := os.Getenv("ATTACK4_BACKLOG"); s != "" {
		fmt.Sscan(s, &n) //nolint:errcheck // the default stays
	}
	a := newA2(t, "PAY")
	dirs, flags, hosts := a.startPair()
	rng := randFor(t)
	evs := make([]event, n)
	for i := range evs {
		evs[i] = event{ID: fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64()), Account: fmt.Sprintf("acct-%d", rng.IntN(20)), Amount: 1 + rng.IntN(1000)}
	}
	a.r.publish(evs[:100])
	a.r.waitApplied("the first 100 applied", 100, dirs...)
	stopOK(t, hosts[1], "B")
	var walA int64
	for i := 100; i < n; i += 2000 {
		a.r.publish(evs[i:min(i+2000, n)])
		walA = max(walA, walSize(dirs[0]))
	}
	a.r.waitApplied("the backlog applied by A", n, dirs[0])
	t.Logf("A applied %d events back to back; its largest WAL seen %d bytes", n, walA)
	hosts[1] = a.start("B", dirs[1], flags[1]...)
	var walB int64
	consumertest.Eventually(t, 5*time.Minute, "B part-way through the backlog", func() bool {
		walB = max(walB, walSize(dirs[1]))
		m, err := fileInt(partDB(dirs[1], 0), `SELECT count(*) FROM processed_messages`)
		return err == nil && m > n/6
	})
	hosts[1].kill()
	hosts[1] = a.start("B (again)", dirs[1], flags[1]...)
	now := []string{partDB(dirs[0], 0), partDB(dirs[0], 1)}
	copies := []string{partDB(dirs[1], 0), partDB(dirs[1], 1)}
	consumertest.Eventually(t, 10*time.Minute, "B caught up after its SIGKILL", func() bool {
		walB = max(walB, walSize(dirs[1]))
		return filePosition(now[0]) == filePosition(copies[0]) && filePosition(now[1]) == filePosition(copies[1])
	})
	t.Logf("B caught up on %d events; its largest WAL seen %d bytes", n, walB)
	// The owner on a backlog: both stopped, n/2 more published, A started
	// alone, then B.
	stopOK(t, hosts[1], "B")
	stopOK(t, hosts[0], "A")
	more := make([]event, n/2)
	for i := range more {
		more[i] = event{ID: fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64()), Account: fmt.Sprintf("acct-%d", rng.IntN(20)), Amount: 1 + rng.IntN(1000)}
	}
	for i := 0; i < len(more); i += 2000 {
		a.r.publish(more[i:min(i+2000, len(more))])
	}
	evs = append(evs, more...)
	hosts[0] = a.start("A (backlog)", dirs[0], flags[0]...)
	var walBacklog int64
	consumertest.Eventually(t, 10*time.Minute, "A applied the backlog", func() bool {
		walBacklog = max(walBacklog, walSize(dirs[0]))
		have := 0
		for i := range ownedDurables {
			m, _ := fileInt(partDB(dirs[0], i), `SELECT count(*) FROM processed_messages`)
			have += m
		}
		return have >= len(evs)
	})
	t.Logf("A (owner) applied a backlog of %d events; its largest WAL seen %d bytes", len(more), walBacklog)
	hosts[1] = a.start("B (again)", dirs[1], flags[1]...)
	a.r.waitApplied("every event applied", len(evs), dirs...)
	if walA > 256<<20 || walB > 256<<20 || walBacklog > 256<<20 {
		t.Errorf("a WAL grew past 256 MiB: A %d bytes, B %d bytes, A on its backlog %d bytes", walA, walB, walBacklog)
	}
	a.finish(t, dirs, hosts, evs, nil)
}

// walSize is the largest -wal file of dir's partitions.
func walSize(dir string) int64 {
	var most int64
	for i := range ownedDurables {
		if fi, err := os.Stat(partDB(dir, i) + "-wal"); err == nil {
			most = max(most, fi.Size())
		}
	}
	return most
}

// 4c. Both hosts stopped, then started together while a nats-server node
// (the lease bucket's leader, else the second) is SIGKILLed and started
// again: the leases' takes meet replicas behind. Nobody exits, each
// partition owned, every event once. Three rounds.
func TestAttack4HostsStartWhileANodeRestarts(t *testing.T) {
	aaLong(t)
	a := newA2(t, "PAY")
	dirs, flags, hosts := a.startPair()
	evs := makeEvents(randFor(t), a.r.pub, 400)
	a.r.publish(evs[:100])
	a.r.waitApplied("the first 100 applied", 100, dirs...)
	for round := range 3 {
		stopOK(t, hosts[1], "B")
		stopOK(t, hosts[0], "A")
		n := a.r.c.leaderOf("KV_" + changelog.LeaseBucket)
		if n < 0 {
			n = 1
		}
		a.r.c.kill(n)
		hosts[0] = a.start("A", dirs[0], flags[0]...)
		hosts[1] = a.start("B", dirs[1], flags[1]...)
		a.r.c.restart(n)
		t.Logf("round %d: node %d restarted as the hosts start", round, n)
		a.r.publish(evs[100+100*round : 200+100*round])
		a.ownersOf(fmt.Sprintf("round %d", round), hosts...)
		alive(t, hosts[0], "A")
		alive(t, hosts[1], "B")
		a.r.waitApplied(fmt.Sprintf("round %d applied", round), 200+100*round, dirs...)
	}
	alive(t, hosts[0], "A")
	alive(t, hosts[1], "B")
	a.finish(t, dirs, hosts, evs, nil)
}

// 5b. A run of one partition with --metrics, started again and again: the
// moment its /healthz answers 200 (ready), and the moment it logs owner,
// a CLI request through the admin API must find the endpoints.
func TestAttack4AdminCLIRightAfterReady(t *testing.T) {
	a := newA2(t, "PAY")
	dir := t.TempDir()
	var atOwner, atHealthy []string
	for round := range 3 {
		metrics := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		p := a.start("A0", dir, "--partition=0", "--changelog", "--standby", "--metrics", metrics)
		consumertest.Eventually(t, 2*time.Minute, "A0 logging owner", func() bool { return logged(p, "owner", 0) })
		if out, code := cli(t, "outbox", "list", "--nats", a.r.c.url(round%3), "--partition", "0", "--json"); code != 0 {
			atOwner = append(atOwner, fmt.Sprintf("round %d: exit %d: %s", round, code, strings.TrimSpace(out)))
		}
		consumertest.Eventually(t, 2*time.Minute, "A0 healthy", func() bool { return healthzWithin(metrics, 2*time.Second) == http.StatusOK })
		if out, code := cli(t, "outbox", "list", "--nats", a.r.c.url(round%3), "--partition", "0", "--json"); code != 0 {
			atHealthy = append(atHealthy, fmt.Sprintf("round %d: exit %d: %s", round, code, strings.TrimSpace(out)))
		}
		stopOK(t, p, "A0")
	}
	if len(atOwner) > 0 {
		t.Logf("outbox list the moment the run logged owner failed %d of 3 times:\n%s", len(atOwner), strings.Join(atOwner, "\n"))
	}
	if len(atHealthy) > 0 {
		t.Errorf("outbox list the moment /healthz answered 200 failed %d of 3 times:\n%s", len(atHealthy), strings.Join(atHealthy, "\n"))
	}
}

// reviewBreakdown logs the rows in review by their error, and how many of
// them the destination never received (no request with their key).
func reviewBreakdown(t *testing.T, dest *webhooktest.Destination, rows []outboxRow) (never int) {
	t.Helper()
	byErr := map[string]int{}
	for _, r := range rows {
		if r.Status != "review" {
			continue
		}
		e := r.Error
		if len(e) > 400 {
			e = e[:400]
		}
		byErr[e]++
		if dest.Requests(r.ID) == 0 {
			never++
		}
	}
	for e, n := range byErr {
		t.Logf("in review: %d rows: %q", n, e)
	}
	t.Logf("in review: %d rows the destination never received", never)
	return never
}

// 2b. The changelog deleted under an owner that never lost its lease,
// with queued outbox rows (a slow destination, one worker): the owner's
// own file begins the new log. No host's copy can have been ahead of the
// owner's file, which no other run wrote; the docs (scaling.md) take
// queued rows as maybe sent only for a copy behind its owner, or one
// begun after a person deleted the owner's key. Rows put in review that
// the destination never received wait for a person for nothing.
func TestAttack4LogDeletedUnderOwnerWithQueuedRows(t *testing.T) {
	a := newA2(t, "PAY")
	dest, dirs, _, hosts := a.slowWebhookPair(t, 150*time.Millisecond, 1)
	evs := makeEvents(randFor(t), a.r.pub, 200)
	a.r.publish(evs)
	a.r.waitApplied("every event applied", len(evs), dirs[0])
	ledA := openLedgers(t, partDB(dirs[0], 0), partDB(dirs[0], 1))
	queued := count(t, ledA[0], `SELECT count(*) FROM outbox WHERE status = 'queued'`) + count(t, ledA[1], `SELECT count(*) FROM outbox WHERE status = 'queued'`)
	if queued == 0 {
		t.Skip("no row queued at the deletion: the destination was too quick")
	}
	a.deleteLogs(0, 1)
	deleted := time.Now()
	for i := range ownedDurables {
		consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("partition %d's new log begun", i), func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			s, err := a.r.c.js.Stream(ctx, a.r.changelogStream(i))
			return err == nil && s.CachedInfo().State.LastSeq > 0 && a.holderPid(i) != 0
		})
	}
	dest.SetDelay(0)
	alive(t, hosts[0], "A")
	o0, o1 := a.ownerOf("after the deletion", 0, hosts...), a.ownerOf("after the deletion", 1, hosts...)
	finals := openLedgers(t, partDB(dirs[o0], 0), partDB(dirs[o1], 1))
	waitSettled(t, finals...)
	rows := append(outboxRows(t, finals[0]), outboxRows(t, finals[1])...)
	review := checkSentAtMostOnce(t, dest, rows, len(evs))
	never := reviewBreakdown(t, dest, rows)
	lost, otherOwned := 0, 0
	for i := range ownedDurables {
		lost += roleRecordsSince(hosts[0], "lost", i, deleted) // the log gone: the run owns again
		otherOwned += roleRecordsSince(hosts[1], "owner", i, deleted)
	}
	t.Logf("%d rows queued at the deletion (owner A, owners after: %d %d; A's lost records since: %d, B's owner records since: %d); %d sent, %d in review, %d of them never at the destination", queued, o0, o1, lost, otherOwned, len(dest.Items()), review, never)
	if o0 == 0 && o1 == 0 && otherOwned == 0 && never > 0 {
		t.Errorf("the changelog deleted under an owner that kept its lease: %d rows it alone could have sent, never sent, wait in review for a person", never)
	}
	a.finish(t, dirs, hosts, evs, nil)
}

// 1b. The lease bucket deleted and the owner's host lost (SIGKILL, not
// started again) at once, traffic flowing: the standby makes the bucket
// again and takes both partitions over; then the lost host comes back as
// its standby. Every event once, copies equal.
func TestAttack4LeaseBucketDeletedAndOwnerKilled(t *testing.T) {
	a := newA2(t, "PAY")
	dirs, flags, hosts := a.startPair()
	evs := makeEvents(randFor(t), a.r.pub, 500)
	tr := a.traffic(evs[:400], 5, 20*time.Millisecond)
	a.atLeast("the first 100 applied", 100, dirs...)
	hosts[0].kill()
	a.deleteLeaseBucket()
	a.r.waitRole(hosts[1], "B, the owner lost and the lease bucket gone", "owner", 0, 1)
	tr.wait(t)
	hosts[0] = a.start("A", dirs[0], flags[0]...)
	a.r.waitStandsBy(hosts[0], "A again")
	a.r.publish(evs[400:])
	alive(t, hosts[1], "B")
	a.finishApplied(t, dirs, hosts, evs)
}

// 2c. The owner paused (SIGSTOP) around its lease's expiry with eight
// outbox workers mid-sends to a destination without idempotency, traffic
// flowing, again and again; a host that exits is started again (a
// supervisor; a pause in a commit exits by design). No key sent twice,
// every row sent or in review, every event once.
func TestAttack4OwnerPausedMidSends(t *testing.T) {
	aaLong(t)
	a := newA2(t, "PAY")
	dest, dirs, flags, hosts := a.slowWebhookPair(t, 20*time.Millisecond, 8)
	evs := makeEvents(randFor(t), a.r.pub, 700)
	tr := a.traffic(evs, 5, 25*time.Millisecond)
	exits := 0
	supervise := func() {
		for h, p := range hosts {
			if !running(p) {
				exits++
				t.Logf("host %d exited %d: %s", h, p.wait(0), grepLines(p.output(), "jetledger run:"))
				hosts[h] = a.start([]string{"A", "B"}[h], dirs[h], flags[h]...)
			}
		}
	}
	for round, ms := range []time.Duration{2000, 2800, 3300, 4000, 2500} {
		a.atLeast(fmt.Sprintf("round %d", round), 80*(round+1), dirs...)
		supervise()
		h := a.ownerOf(fmt.Sprintf("round %d", round), round%2, hosts...)
		hosts[h].signal(syscall.SIGSTOP)
		time.Sleep(ms * time.Millisecond) // the pause is the operation
		hosts[h].signal(syscall.SIGCONT)
	}
	tr.wait(t)
	a.r.waitApplied("every event applied", len(evs), dirs...)
	supervise()
	o0, o1 := a.ownerOf("end", 0, hosts...), a.ownerOf("end", 1, hosts...)
	finals := openLedgers(t, partDB(dirs[o0], 0), partDB(dirs[o1], 1))
	waitSettled(t, finals...)
	rows := append(outboxRows(t, finals[0]), outboxRows(t, finals[1])...)
	review := checkSentAtMostOnce(t, dest, rows, len(evs))
	t.Logf("%d exits restarted; %d effects at the destination, %d in review", exits, len(dest.Items()), review)
	reviewBreakdown(t, dest, rows)
	a.finish(t, dirs, hosts, evs, nil)
}

// slowWebhookPair starts A (the owner of both partitions) and B (its
// standby), each with workers outbox workers sending to a destination that
// ignores keys and answers after delay.
func (a *a2) slowWebhookPair(t *testing.T, delay time.Duration, workers int) (dest *webhooktest.Destination, dirs []string, flags [][]string, hosts []*proc) {
	t.Helper()
	dest = webhooktest.NewDestination(t, false)
	dest.SetDelay(delay)
	dirs = []string{t.TempDir(), t.TempDir()}
	w := strconv.Itoa(workers)
	flags = [][]string{webhookArgs(dest, "--changelog", "--standby", "--outbox-workers", w), webhookArgs(dest, "--standby", "--outbox-workers", w)}
	hosts = []*proc{a.start("A", dirs[0], flags[0]...), nil}
	a.r.waitRole(hosts[0], "A", "owner", 0, 1)
	hosts[1] = a.start("B", dirs[1], flags[1]...)
	a.r.waitStandsBy(hosts[1], "B")
	return dest, dirs, flags, hosts
}
