package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats.go/jetstream"
)

// A stream's two partitions run first without --changelog (the ledgers
// the operator has), then with --changelog on the same host and --standby
// on another, while the snapshot bucket refuses every snapshot (a bucket
// out of storage). The owner consumes nothing until its first snapshot is
// stored: the rows from before --changelog are in no changelog entry.
// Lost then, its standby does not take the partitions over from the log
// alone (it would lack every event from before) but says why; the owner
// started again on its host, the bucket fixed, stores its snapshot and
// consumes, and every event is applied once (found by the review: the
// standby took over an empty ledger, and the events before were gone).
func TestAMigratedPartitionWaitsForItsFirstSnapshot(t *testing.T) {
	r := newOwnedRig(t, startCluster(t), "PAY")
	dirs := [2]string{t.TempDir(), t.TempDir()}
	evs := makeEvents(randFor(t), r.pub, 300)
	plain := r.run(dirs[0], r.c.urls())
	r.publish(evs[:200])
	r.waitDrained("the events before the migration applied")
	r.stop(plain, "the run without --changelog")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	broken := "OBJ_JETLEDGER_SNAPSHOTS" // the bucket's stream, answering none of its subjects: every Put fails
	if _, err := r.c.js.CreateStream(ctx, jetstream.StreamConfig{Name: broken, Subjects: []string{"nothing.here"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	owner := r.run(dirs[0], r.c.urls(), "--changelog")
	// saidOnce: p logged a record starting with prefix, for each of parts
	// (for any partition without parts).
	saidOnce := func(p *proc, prefix string, parts ...int) func() bool {
		return func() bool {
			for i := range max(len(parts), 1) {
				_, ok := p.record(func(m map[string]any) bool {
					msg, _ := m["msg"].(string)
					return strings.HasPrefix(msg, prefix) && (len(parts) == 0 || m["partition"] == float64(parts[i]))
				})
				if !ok {
					return false
				}
			}
			return true
		}
	}
	// Both partitions taken by the owner (a standby started before would
	// take a partition itself) and stuck at their first snapshot.
	consumertest.Eventually(t, 2*time.Minute, "the owner's first snapshots refused", saidOnce(owner, "changelog: the ledger's first snapshot failed", 0, 1))
	standby := r.run(dirs[1], r.c.urls(), "--standby")
	// The standby waits, saying why: no snapshot, and a log with an entry
	// (the lifecycle's rule "no ledger yet, no snapshot").
	consumertest.Eventually(t, 2*time.Minute, "the standby waiting for a snapshot", saidOnce(standby, "changelog: the partition's copy cannot go on yet", 0, 1))
	r.publish(evs[200:250])
	if r.c.drained(r.stream, ownedDurables...) || logged(owner, "owner", 0) || logged(owner, "owner", 1) {
		t.Fatalf("the owner consumed before its first snapshot was stored:\n%s", owner.output())
	}
	owner.kill()
	// The lost owner's leases expire; the waiting standby takes neither
	// (its copy would hold nothing of the ledger from before the log).
	consumertest.Eventually(t, 2*time.Minute, "the lost owner's leases expired", func() bool {
		h0, err0 := r.leaseHolder(0)
		h1, err1 := r.leaseHolder(1)
		return err0 == nil && err1 == nil && h0 == "" && h1 == ""
	})
	if logged(standby, "owner", 0) || logged(standby, "owner", 1) {
		t.Fatalf("the standby took a partition over without a snapshot:\n%s", standby.output())
	}

	if err := r.c.js.DeleteStream(ctx, broken); err != nil {
		t.Fatal(err)
	}
	owner = r.run(dirs[0], r.c.urls(), "--changelog")
	r.waitRole(owner, "the owner, started again", "owner", 0, 1)
	r.publish(evs[250:])
	r.waitDrained("every event applied")
	now, copies := r.ledgers(dirs[0]), r.ledgers(dirs[1])
	r.waitCopies("the standby's copies current", now, copies)
	r.stop(owner, "the owner")
	r.stop(standby, "the standby")
	checkPartitionedExact(t, now, evs)
	checkPartitionedExact(t, copies, evs)
}
