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
