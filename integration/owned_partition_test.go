package integration

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
	"github.com/jetledger/jetledger/publisher"
)

// ownedRig is a stream of two partitions on a 3-node cluster, consumed by
// `run --partition 0,1` processes with --changelog or --standby, each on
// a host (a directory) of its own.
type ownedRig struct {
	t      *testing.T
	c      *cluster
	stream string
	pub    *publisher.Publisher
	schema string
}

// ownedDurables are the partitions' durables.
var ownedDurables = []string{"jetledger-p0", "jetledger-p1"}

func newOwnedRig(t *testing.T, c *cluster, stream string) *ownedRig {
	t.Helper()
	pub, err := publisher.New(c.js, publisher.Config{Attempts: 10, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	schema := filepath.Join(t.TempDir(), "schema.sql")
	if err := os.WriteFile(schema, []byte(balanceTable), 0o600); err != nil {
		t.Fatal(err)
	}
	return &ownedRig{t: t, c: c, stream: stream, pub: pub, schema: schema}
}

// run starts a host's run of partitions (default 0,1) on dir, connected to
// the servers at nats, with role's flags.
func (r *ownedRig) run(dir, nats string, role ...string) *proc {
	r.t.Helper()
	return r.runEnv(nil, dir, nats, role...)
}

// runEnv is run with env added to the process's environment.
func (r *ownedRig) runEnv(env []string, dir, nats string, role ...string) *proc {
	r.t.Helper()
	parts := "0,1"
	if len(role) > 0 && strings.HasPrefix(role[0], "--partition=") {
		parts, role = strings.TrimPrefix(role[0], "--partition="), role[1:]
	}
	args := append([]string{"run", "--nats", nats, "--db", filepath.Join(dir, "ledger.db"), "--stream", r.stream,
		"--subjects", "pay.*", "--partitions", "2", "--replicas", "3", "--partition", parts,
		"--schema", r.schema, "--apply", balanceApply, "--log-format", "json"}, role...)
	return start(r.t, env, append(args, fastPlan...)...)
}

// isStopped says whether p's process is stopped (SIGSTOP): every one of
// its threads in state T. kill returns before the stop has taken effect,
// and a thread running meanwhile may still answer a request (CI: a paused
// owner's admin action, sent right after the SIGSTOP, was acted on).
func isStopped(p *proc) bool {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", p.cmd.Process.Pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		stat, err := os.ReadFile(task)
		if err != nil {
			return false
		}
		i := bytes.LastIndexByte(stat, ')') // the command name may hold spaces
		if i <= 0 || i+2 >= len(stat) || stat[i+2] != 'T' && stat[i+2] != 't' {
			return false
		}
	}
	return true
}

// logged says whether p logged a record with role for partition part.
func logged(p *proc, role string, part int) bool {
	_, ok := p.record(func(r map[string]any) bool { return r["role"] == role && r["partition"] == float64(part) })
	return ok
}

// standsBy says whether p follows partition part's changelog, owned by another.
func standsBy(p *proc, part int) bool {
	_, ok := p.record(func(r map[string]any) bool {
		msg, _ := r["msg"].(string)
		return strings.HasPrefix(msg, "changelog: standing by") && r["partition"] == float64(part)
	})
	return ok
}

// waitRole waits until p logged role (owner, lost) for every partition of parts.
func (r *ownedRig) waitRole(p *proc, who, role string, parts ...int) {
	r.t.Helper()
	consumertest.Eventually(r.t, 2*time.Minute, fmt.Sprintf("%s logging %s of partitions %v", who, role, parts), func() bool {
		for _, i := range parts {
			if !logged(p, role, i) {
				return false
			}
		}
		return true
	})
}

// waitStandsBy waits until p stands by for partitions 0 and 1.
func (r *ownedRig) waitStandsBy(p *proc, who string) {
	r.t.Helper()
	consumertest.Eventually(r.t, 2*time.Minute, who+" standing by for both partitions", func() bool { return standsBy(p, 0) && standsBy(p, 1) })
}

// publish sends evs, again until the cluster has them all (the same ids:
// the stream drops what it already has).
func (r *ownedRig) publish(evs []event) {
	r.t.Helper()
	consumertest.Eventually(r.t, 2*time.Minute, "published", func() bool {
		_, err := r.pub.PublishBatch(context.Background(), byAccount(evs))
		return err == nil
	})
}

// waitDrained waits until both partitions' durables have nothing pending
// or unacknowledged.
func (r *ownedRig) waitDrained(what string) {
	r.t.Helper()
	consumertest.Eventually(r.t, 3*time.Minute, what, func() bool { return r.c.drained(r.stream, ownedDurables...) })
}

// stop SIGTERMs p and wants it to exit 0.
func (r *ownedRig) stop(p *proc, who string) {
	r.t.Helper()
	p.signal(syscall.SIGTERM)
	if code := p.wait(time.Minute); code != 0 {
		r.t.Fatalf("%s exited %d:\n%s", who, code, p.output())
	}
}

// done deletes the rig's stream: the next rig on the cluster takes its
// subjects.
func (r *ownedRig) done() {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.c.js.DeleteStream(ctx, r.stream); err != nil {
		r.t.Fatal(err)
	}
}

// ledgers opens the partitions' ledgers of the host on dir.
func (r *ownedRig) ledgers(dir string) []*sql.DB {
	dbs := make([]*sql.DB, len(ownedDurables))
	for i := range dbs {
		dbs[i] = (&world{t: r.t, db: filepath.Join(dir, fmt.Sprintf("ledger-p%d.db", i))}).ledgerDB()
	}
	return dbs
}

// Issue 25: two partitions on a 3-node cluster, owned by one run with
// --changelog and stood by by another with --standby; a third run of the
// same partitions without --standby is refused. The owner is SIGKILLed
// and its ledger files deleted (its host is lost) with events in flight;
// the standby takes both partitions over. At the end the standby's
// ledgers hold every event exactly once, and its effects, to a webhook
// without idempotency, were each sent at most once (those the lost owner
// was sending are in review). The take-over time is from the
// SIGKILL to the standby's first committed row (processed_at).
func TestOwnedPartitionsSurviveTheLossOfTheirHost(t *testing.T) {
	r := newOwnedRig(t, startCluster(t), "PAY")
	dest := webhooktest.NewDestination(t, false) // no idempotency: a second send would be a second effect
	dest.SetDelay(5 * time.Millisecond)          // sends in flight when the host goes
	dirs := [3]string{t.TempDir(), t.TempDir(), t.TempDir()}
	owner := r.run(dirs[0], r.c.urls(), webhookArgs(dest, "--changelog")...)
	r.waitRole(owner, "the first run", "owner", 0, 1)
	standby := r.run(dirs[1], r.c.urls(), webhookArgs(dest, "--standby")...)
	refused := r.run(dirs[2], r.c.urls(), "--changelog")
	if code := refused.wait(time.Minute); code == 0 || !strings.Contains(refused.output(), "holds") {
		t.Fatalf("a second owner of the partitions without --standby exited %d, want non-zero naming the owner:\n%s", code, refused.output())
	}
	r.waitStandsBy(standby, "the standby")

	evs := makeEvents(randFor(t), r.pub, 600)
	r.publish(evs[:300])
	r.waitDrained("the first half applied")
	r.publish(evs[300:350]) // in hand, or not yet, when the host goes
	owner.kill()
	lost := time.Now()
	if err := os.RemoveAll(dirs[0]); err != nil {
		t.Fatal(err)
	}
	r.publish(evs[350:400]) // work for the standby from the moment it owns
	r.waitRole(standby, "the standby", "owner", 0, 1)
	owned := time.Since(lost)
	r.publish(evs[400:])
	r.waitDrained("every event applied")
	ledgers := r.ledgers(dirs[1])
	waitSettled(t, ledgers...)
	r.stop(standby, "the standby")
	checkPartitionedExact(t, ledgers, evs)
	review := checkSentAtMostOnce(t, dest, append(outboxRows(t, ledgers[0]), outboxRows(t, ledgers[1])...), len(evs))
	first := 0
	for _, db := range ledgers {
		if at := count(t, db, `SELECT min(processed_at) FROM processed_messages WHERE processed_at >= ?`, lost.UnixMilli()); at > 0 && (first == 0 || at < first) {
			first = at
		}
	}
	if first == 0 {
		t.Fatal("the standby committed nothing after the owner's SIGKILL")
	}
	took := time.UnixMilli(int64(first)).Sub(lost)
	t.Logf("after the owner's SIGKILL: both partitions owned by the standby in %v, its first batch committed in %v (AckWait 1.8s; target under AckWait + 5s); %d effects at the destination, %d in review",
		owned.Round(10*time.Millisecond), took.Round(10*time.Millisecond), len(dest.Items()), review)
	if limit := 1800*time.Millisecond + 5*time.Second; took > 3*limit {
		t.Fatalf("the standby's first commit came %v after the SIGKILL: far past the target, %v", took, limit)
	}
}

// waitCopies waits until each of copies stands at the changelog entry of
// the owner's ledger of its partition (now).
func (r *ownedRig) waitCopies(what string, now, copies []*sql.DB) {
	r.t.Helper()
	consumertest.Eventually(r.t, 2*time.Minute, what, func() bool {
		for i := range now {
			if position(r.t, copies[i]) != position(r.t, now[i]) {
				return false
			}
		}
		return true
	})
}

// position is the changelog entry a ledger holds last.
func position(t *testing.T, db *sql.DB) int {
	t.Helper()
	return count(t, db, `SELECT seq FROM jetledger_changelog WHERE id = 1`)
}

// tookOverAfter is the entry after which p's run took partition part's
// changelog over: every entry after it is p's.
func tookOverAfter(t *testing.T, p *proc, part int) int {
	t.Helper()
	rec, ok := p.record(func(r map[string]any) bool {
		msg, _ := r["msg"].(string)
		return strings.HasPrefix(msg, "changelog: took the log over") && r["partition"] == float64(part)
	})
	if !ok {
		t.Fatalf("no take-over of partition %d logged:\n%s", part, p.output())
	}
	after, _ := rec["after"].(float64)
	return int(after)
}

// checkHoldsOnlyTheLog: a ledger the partition was taken from holds no
// entry past the take-over (nothing it committed after is anywhere but in
// its file), and every row of it is in the new owner's ledger.
func checkHoldsOnlyTheLog(t *testing.T, old, now *sql.DB, part, after int) {
	t.Helper()
	if pos := position(t, old); pos > after {
		t.Errorf("partition %d: the old owner's ledger holds entry %d, past the take-over after %d", part, pos, after)
	}
	rows, err := old.Query(`SELECT message_id, stream_seq FROM processed_messages`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var seq int
		if err := rows.Scan(&id, &seq); err != nil {
			t.Fatal(err)
		}
		if count(t, now, `SELECT count(*) FROM processed_messages WHERE message_id = ? AND stream_seq = ?`, id, seq) != 1 {
			t.Errorf("partition %d: the old owner committed %s (seq %d), which the new owner's ledger lacks", part, id, seq)
		}
	}
}

// Issue 25, the zombie owner: the owner is SIGSTOPped with a batch in
// hand (it stops itself just before applying it: JETLEDGER_FAULT), past
// its lease; the standby takes over and applies everything,
// the paused owner's deliveries included once AckWait lets them go; then
// the old owner is SIGCONTed. It commits nothing the log did not hold
// before the take-over, acknowledges nothing the new owner does not hold,
// logs that it lost the partitions, and stops (it has no --standby).
func TestAPausedOwnerCommitsNothingOnceTakenOver(t *testing.T) {
	prof := clusterProfileFromEnv()
	c := startCluster(t)
	for round := range prof.OwnerRounds {
		r := newOwnedRig(t, c, fmt.Sprintf("ZOMBIE%d", round))
		dirs := [2]string{t.TempDir(), t.TempDir()}
		// Even rounds: the owner stops itself with a batch in hand, just
		// before applying it; odd ones (long profile): a SIGSTOP from
		// outside at whatever moment it lands.
		inHand := round%2 == 0
		arm := filepath.Join(t.TempDir(), "arm")
		var env []string
		if inHand {
			env = []string{"JETLEDGER_FAULT=stop-before-apply", "JETLEDGER_FAULT_ARM=" + arm}
		}
		zombie := r.runEnv(env, dirs[0], r.c.urls(), "--changelog")
		r.waitRole(zombie, "the owner", "owner", 0, 1)
		standby := r.run(dirs[1], r.c.urls(), "--standby")
		r.waitStandsBy(standby, "the standby")
		evs := makeEvents(randFor(t), r.pub, prof.OwnerEvents)
		half := len(evs) / 2
		r.publish(evs[:half])
		r.waitDrained("the first half applied")
		if inHand {
			if err := os.WriteFile(arm, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		r.publish(evs[half : half+half/2])
		if inHand {
			consumertest.Eventually(t, time.Minute, "the owner stopped with a batch in hand", func() bool { return isStopped(zombie) })
		} else {
			zombie.signal(syscall.SIGSTOP)
		}
		paused := time.Now()
		r.waitRole(standby, "the standby", "owner", 0, 1)
		t.Logf("round %d: both partitions owned by the standby %v after the owner's SIGSTOP", round, time.Since(paused).Round(10*time.Millisecond))
		r.publish(evs[half+half/2:])
		r.waitDrained("every event applied by the new owner")
		zombie.signal(syscall.SIGCONT)
		if code := zombie.wait(time.Minute); code == 0 {
			t.Fatalf("the old owner exited 0 after losing its partitions:\n%s", zombie.output())
		}
		// The first partition to stop stops the others: one says why.
		if !logged(zombie, "lost", 0) && !logged(zombie, "lost", 1) {
			t.Fatalf("the old owner did not log that it lost its partitions:\n%s", zombie.output())
		}
		r.stop(standby, "the new owner")
		now := r.ledgers(dirs[1])
		checkPartitionedExact(t, now, evs)
		for i, old := range r.ledgers(dirs[0]) {
			checkHoldsOnlyTheLog(t, old, now[i], i, tookOverAfter(t, standby, i))
		}
		// The batch in its hand when it stopped: tried on waking and refused
		// by the log, or, its deadline passed while it was stopped (before
		// its turn, or as it waited for the ledger's writer), given back
		// unapplied (each commits and acks nothing, as checked above).
		if out := zombie.output(); inHand && !strings.Contains(out, "nothing of this batch was acked") &&
			!strings.Contains(out, "the batch deadline passed before its turn") && !strings.Contains(out, "batch handed back for redelivery") {
			t.Fatalf("the old owner woke with no batch in hand, so nothing was tried:\n%s", zombie.output())
		}
		r.done()
	}
}

// Issue 25, the network partition: the owner reaches the cluster only
// through proxies, which hold its bytes to the cluster (it still receives
// deliveries, and tries to commit them) or, in the long profile's odd
// rounds, every byte both ways; the cluster and the standby are on the
// majority side. The standby takes over and applies everything; when the
// cut heals the old owner has lost its partitions, says so, and stands
// by; its copy then catches up with the new owner's through the log, with
// nothing of its own in it.
func TestAnOwnerCutOffFromTheClusterLosesItsPartitions(t *testing.T) {
	prof := clusterProfileFromEnv()
	c := startCluster(t)
	for round := range prof.OwnerRounds {
		r := newOwnedRig(t, c, fmt.Sprintf("CUT%d", round))
		proxies := make([]*faultProxy, len(c.nodes))
		urls := make([]string, len(c.nodes))
		for i, n := range c.nodes {
			proxies[i] = newFaultProxy(t, fmt.Sprintf("127.0.0.1:%d", n.port))
			urls[i] = proxies[i].URL()
		}
		dirs := [2]string{t.TempDir(), t.TempDir()}
		owner := r.run(dirs[0], strings.Join(urls, ","), "--standby")
		r.waitRole(owner, "the owner", "owner", 0, 1)
		standby := r.run(dirs[1], c.urls(), "--standby")
		r.waitStandsBy(standby, "the standby")
		evs := makeEvents(randFor(t), r.pub, prof.OwnerEvents)
		half := len(evs) / 2
		r.publish(evs[:half])
		r.waitDrained("the first half applied")
		r.publish(evs[half : half+half/2])
		// Its traffic to the cluster held (round 0), or all of it: the
		// first way it still gets deliveries it cannot commit.
		for _, p := range proxies {
			p.hold(round%2 == 1)
		}
		cut := time.Now()
		r.waitRole(standby, "the standby", "owner", 0, 1)
		t.Logf("round %d (held both ways: %v): both partitions owned by the standby %v after the cut", round, round%2 == 1, time.Since(cut).Round(10*time.Millisecond))
		r.publish(evs[half+half/2:])
		r.waitDrained("every event applied by the new owner")
		for _, p := range proxies {
			p.release()
		}
		r.waitRole(owner, "the old owner", "lost", 0, 1)
		now := r.ledgers(dirs[1])
		copies := r.ledgers(dirs[0])
		r.waitCopies("the old owner's copies caught up", now, copies)
		r.stop(owner, "the old owner, standing by")
		r.stop(standby, "the new owner")
		checkPartitionedExact(t, now, evs)
		checkPartitionedExact(t, copies, evs)
		if round%2 == 0 && !strings.Contains(owner.output(), "nothing of this batch was acked") {
			t.Fatalf("the cut-off owner had no batch in hand, so nothing was tried:\n%s", owner.output())
		}
		r.done()
	}
}

// Issue 25, two owners at once: two runs of the same partitions started
// together, both with --standby: each partition is owned by exactly one
// of them, the other stands by for it, and every event is applied once,
// by its partition's owner; two runs of one partition without --standby:
// one consumes, the other is refused and says who owns it.
func TestTwoOwnersStartedAtOnceOneConsumes(t *testing.T) {
	prof := clusterProfileFromEnv()
	c := startCluster(t)
	for round := range prof.OwnerRounds {
		r := newOwnedRig(t, c, fmt.Sprintf("TWICE%d", round))
		dirs := [2]string{t.TempDir(), t.TempDir()}
		runs := [2]*proc{r.run(dirs[0], r.c.urls(), "--standby"), r.run(dirs[1], r.c.urls(), "--standby")}
		owners := make([]int, len(ownedDurables))
		for i := range owners {
			consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("partition %d owned, and stood by", i), func() bool {
				a, b := logged(runs[0], "owner", i), logged(runs[1], "owner", i)
				switch {
				case a && b:
					t.Fatalf("partition %d owned by both runs:\n%s\n%s", i, runs[0].output(), runs[1].output())
				case a:
					owners[i] = 0
				case b:
					owners[i] = 1
				}
				return (a || b) && standsBy(runs[1-owners[i]], i)
			})
		}
		evs := makeEvents(randFor(t), r.pub, prof.OwnerEvents)
		r.publish(evs)
		r.waitDrained("every event applied")
		for i, p := range runs {
			r.stop(p, fmt.Sprintf("run %d", i))
		}
		for i := range owners {
			if logged(runs[1-owners[i]], "owner", i) {
				t.Fatalf("partition %d owned by both runs in turn", i)
			}
		}
		byOwner := [2][]*sql.DB{r.ledgers(dirs[0]), r.ledgers(dirs[1])}
		checkPartitionedExact(t, []*sql.DB{byOwner[owners[0]][0], byOwner[owners[1]][1]}, evs)
		r.done()

		one := newOwnedRig(t, r.c, fmt.Sprintf("ONCE%d", round))
		pair := [2]*proc{one.run(t.TempDir(), r.c.urls(), "--partition=0", "--changelog"), one.run(t.TempDir(), r.c.urls(), "--partition=0", "--changelog")}
		refused := -1
		consumertest.Eventually(t, 2*time.Minute, "one of two runs of partition 0 refused", func() bool {
			for i, p := range pair {
				select {
				case <-p.done:
					refused = i
					return true
				default:
				}
			}
			return false
		})
		if code := pair[refused].wait(0); code == 0 || !strings.Contains(pair[refused].output(), "holds") {
			t.Fatalf("the refused run exited %d, want non-zero naming the owner:\n%s", code, pair[refused].output())
		}
		one.waitRole(pair[1-refused], "the other run", "owner", 0)
		one.stop(pair[1-refused], "the owning run")
		one.done()
	}
}
