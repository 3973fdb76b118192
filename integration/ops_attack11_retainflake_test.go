package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// a11WatchKey records, from now on, every publish to partition part's
// lease key (a core subscription: refused writes too, without a
// sequence) and every message the bucket's stream stored for it (an
// ordered consumer: with its sequence); dump lists both in time order.
func (a *a2) a11WatchKey(t *testing.T, part int) (dump func() string) {
	subject := "$KV." + changelog.LeaseBucket + "." + a.r.stream + "." + ownedDurables[part]
	var mu sync.Mutex
	var lines []string
	add := func(l string) {
		mu.Lock()
		lines = append(lines, l)
		mu.Unlock()
	}
	nc := a.r.c.js.Conn()
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		add(fmt.Sprintf("%s sent   %q %v", time.Now().UTC().Format("15:04:05.000000"), m.Data, m.Header))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := a.r.c.js.OrderedConsumer(ctx, "KV_"+changelog.LeaseBucket, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}, DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		md, _ := m.Metadata()
		var seq uint64
		var at time.Time
		if md != nil {
			seq, at = md.Sequence.Stream, md.Timestamp
		}
		add(fmt.Sprintf("%s stored seq %d (server %s) %q %v", time.Now().UTC().Format("15:04:05.000000"), seq, at.UTC().Format("15:04:05.000000"), m.Data(), m.Headers()))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Stop)
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(lines, "\n")
	}
}

// a11KeyHistory is every message of the lease bucket's stream for
// partition part's key: sequence, time, headers and data.
func (a *a2) a11KeyHistory(part int) string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := a.r.c.js.Stream(ctx, "KV_"+changelog.LeaseBucket)
	if err != nil {
		return err.Error()
	}
	info, err := st.Info(ctx)
	if err != nil {
		return err.Error()
	}
	subject := "$KV." + changelog.LeaseBucket + "." + a.r.stream + "." + ownedDurables[part]
	out := []string{fmt.Sprintf("stream state: first %d last %d msgs %d; bucket %s", info.State.FirstSeq, info.State.LastSeq, info.State.Msgs, a.leaseBucketInfo())}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			out = append(out, fmt.Sprintf("  seq %d: %v", seq, err))
			continue
		}
		if m.Subject != subject {
			continue
		}
		out = append(out, fmt.Sprintf("  seq %d at %s: %q headers %v", seq, m.Time.UTC().Format("15:04:05.000000"), m.Data, m.Header))
	}
	return strings.Join(out, "\n")
}

// 4. TestAttack5SIGTERMRightAfterTheLogsDeletion looped: each round a
// fresh cluster and pair, partition 0's log deleted, SIGTERM to A right
// at its "lost" record; A must exit 0 without partition 0's key naming
// it. Stops at the first failing round (dumping A's and B's output and
// the key's history) or after 15.
func TestOpsAttack11RetainFlakeLoop(t *testing.T) {
	aaLong(t)
	a11RetainLoop(t)
}

func a11RetainLoop(t *testing.T) {
	for round := range 15 {
		if !t.Run(fmt.Sprint("round", round), sigtermRightAfterTheLogsDeletion) {
			t.Logf("failed at round %d", round)
			return
		}
	}
}

// sigtermRightAfterTheLogsDeletion is TestAttack5SIGTERMRightAfterTheLogsDeletion's
// round: on a failure it prints the key's history (at A's exit, and as
// watched since before the deletion) and both hosts' output.
func sigtermRightAfterTheLogsDeletion(t *testing.T) {
	a := newA2(t, "PAY")
	dirs, _, hosts := a.startPair()
	evs := makeEvents(randFor(t), a.r.pub, 40)
	a.r.publish(evs)
	a.r.waitApplied("every event applied", len(evs), dirs[0])
	waitSamePosition(t, "B caught up", []string{partDB(dirs[0], 0), partDB(dirs[0], 1)}, []string{partDB(dirs[1], 0), partDB(dirs[1], 1)})
	watched := a.a11WatchKey(t, 0)
	pidA := hosts[0].cmd.Process.Pid
	deleted := time.Now()
	a.deleteLogs(0)
	deadline := time.Now().Add(2 * time.Minute)
	for !logged(hosts[0], "lost", 0) {
		if time.Now().After(deadline) {
			t.Fatalf("A never logged the loss of partition 0:\n%s", tail(hosts[0].output()))
		}
	}
	hosts[0].signal(syscall.SIGTERM)
	stoppedAt := time.Now()
	code := hosts[0].wait(time.Minute)
	exited := time.Since(stoppedAt)
	holder, err := a.r.leaseHolder(0)
	if err != nil {
		t.Fatal(err)
	}
	keyKept := strings.Contains(holder, fmt.Sprintf(":%d:", pidA))
	history := a.a11KeyHistory(0)
	a.ownerOf("B owns partition 0 after A's clean stop", 0, hosts...)
	tookB := time.Since(stoppedAt)
	t.Logf("deleted at %s, SIGTERM at %s; A (pid %d) exited %d %v after; key then %q; B owned %v after the SIGTERM",
		deleted.UTC().Format("15:04:05.000000"), stoppedAt.UTC().Format("15:04:05.000000"), pidA, code, exited.Round(time.Millisecond), holder, tookB.Round(time.Millisecond))
	if code != 0 {
		t.Errorf("A exited %d on a clean SIGTERM right after its log's deletion", code)
	}
	if keyKept {
		t.Errorf("A stopped (exit %d) with partition 0's lease key still naming it (%q); B waited %v", code, holder, tookB.Round(time.Millisecond))
	}
	if t.Failed() {
		a.r.stopAll(map[string]*proc{"B": hosts[1]})
		t.Logf("partition 0's key history (at A's exit):\n%s", history)
		t.Logf("partition 0's key history (now):\n%s", a.a11KeyHistory(0))
		t.Logf("partition 0's key as watched since before the deletion:\n%s", watched())
		t.Logf("A's full output:\n%s", hosts[0].output())
		t.Logf("B's full output:\n%s", hosts[1].output())
	} else {
		t.Logf("partition 0's key history:\n%s", history)
		t.Logf("partition 0's key as watched:\n%s", watched())
		t.Logf("A's partition-0 lines:\n%s", a11Lines(hosts[0], "\"partition\":0"))
	}
}
