package integration

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
)

// A run paused (a VM pause, a long GC) after the server delivered a message
// to it and before it read it finds, once resumed, a message whose AckWait
// ran out meanwhile: the server may have handed it to another run. The run
// must leave it to redelivery, not apply it as fresh. Its age once counted
// from its receipt after the pause, and a paused run whose key another run
// had taken applied a message that run applied too.
func TestAPausedRunLeavesAMessageDeliveredDuringThePauseToRedelivery(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Minute)
	evs := makeEvents(randFor(t), w.pub, 101)
	w.publish(evs[:100])
	arm := filepath.Join(t.TempDir(), "arm")
	p := attackOpsRunEnv(w, []string{"JETLEDGER_FAULT=stop-fetched", "JETLEDGER_FAULT_ARM=" + arm}, "4s")
	w.waitDrained(2 * time.Minute)
	if err := os.WriteFile(arm, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	w.publish(evs[100:])
	consumertest.Eventually(t, time.Minute, "the run stopped with the message delivered", func() bool { return isStopped(p) })
	ackWait := 4800 * time.Millisecond // the plan's: buffer wait + deadline + commit margin + per message + ack margin
	consumertest.Eventually(t, time.Minute, "the paused run's AckWait for the message over", func() bool {
		cons, err := w.js.Consumer(t.Context(), stream, "jetledger")
		if err != nil {
			return false
		}
		ci, err := cons.Info(t.Context())
		return err == nil && ci.NumAckPending == 1 && ci.Delivered.Last != nil && time.Since(*ci.Delivered.Last) > ackWait+time.Second
	})
	p.signal(syscall.SIGCONT)
	w.finish(p, 2*time.Minute)
	w.checkExact(w.ledgerDB(), evs)
	if got := p.stopped()["stale"]; got != 1 {
		t.Fatalf("the resumed run left %v messages to redelivery, want 1: the one delivered before its pause\n%s", got, p.output())
	}
}

// A plain run paused (SIGSTOP) with a batch in hand, before its commit,
// past its lease's TTL and the batch's AckWait, while a run of new flags
// takes the key and applies the redelivered batch: continued, the paused
// run must commit none of it (the lease is its commit path's fence,
// ledger.Config.Fence) and stop. Without the fence it committed the batch
// in hand, which the other run had applied too (CI on 8c6dc33: a message
// on both ledgers, in TestAttackAPausedRunWhoseKeyARunOfNewFlagsTookStops).
func TestAPausedRunWithABatchInHandCommitsNothingOnceItsKeyIsTaken(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Minute)
	evs := makeEvents(randFor(t), w.pub, 200)
	w.publish(evs[:100])
	arm := filepath.Join(t.TempDir(), "arm")
	p1 := attackOpsRunEnv(w, []string{"JETLEDGER_FAULT=stop-before-apply", "JETLEDGER_FAULT_ARM=" + arm}, "4s")
	db := w.ledgerDB()
	consumertest.Eventually(t, 2*time.Minute, "the first run commits 100", func() bool {
		return count(t, db, `SELECT count(*) FROM processed_messages`) == 100
	})
	w.waitDrained(2 * time.Minute) // and acks them: the pause is the next batch's
	if err := os.WriteFile(arm, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	w.publish(evs[100:])
	consumertest.Eventually(t, time.Minute, "the run stopped with a batch in hand", func() bool { return isStopped(p1) })
	other := worldIn(t, t.TempDir())
	other.srv, other.js, other.pub = w.srv, w.js, w.pub
	p2 := attackOpsRun(other, "1s")
	odb := other.ledgerDB()
	consumertest.Eventually(t, 2*time.Minute, "the run of new flags applies what the paused run holds", func() bool {
		return count(t, odb, `SELECT count(*) FROM processed_messages`) == 100
	})
	p1.signal(syscall.SIGCONT)
	if code := p1.wait(time.Minute); code != 1 {
		t.Errorf("the continued run exited %d, want 1 (another run took its durable)\n%s", code, p1.output())
	}
	n1 := count(t, db, `SELECT count(*) FROM processed_messages`)
	both := count(t, db, `SELECT coalesce(sum(amount), 0) FROM balances`) + count(t, odb, `SELECT coalesce(sum(amount), 0) FROM balances`)
	if n1 != 100 || both != sum(evs) {
		t.Errorf("the paused run's ledger holds %d rows (want 100), the two ledgers' balances %d (want %d): the batch in hand was committed on both\n%s",
			n1, both, sum(evs), p1.output())
	}
	if !attackOpsLogged(p1, "lease was not held at the commit") {
		t.Errorf("the continued run did not say it handed its batch back\n%s", p1.output())
	}
	w.finish(p2, time.Minute)
}
