package service

import (
	"testing"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
)

// The changelog stream is deleted under an idle owner and its standby: the
// owner begins the new log without waiting for a message (it learnt of the
// deletion only at its next batch, its standby waited, and its pruner's
// entries were refused as "fenced" meanwhile), and the standby follows it.
func TestAnIdleOwnerBeginsTheNewLogOfADeletedOne(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	a, b := ownedPair(t, srv, js, ackwait.Plan{}, 20)
	consumertest.Eventually(t, time.Minute, "the owner idle: every delivery acknowledged", func() bool {
		c, err := js.Consumer(t.Context(), "S", "d")
		if err != nil {
			return false
		}
		ci, err := c.Info(t.Context())
		return err == nil && ci.NumAckPending == 0 && ci.NumPending == 0 && ci.AckFloor.Stream == 20
	})
	name, _ := changelog.Names("S", "d")
	if err := js.DeleteStream(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	// The standby makes the stream again at once, and waits in it for the
	// owner's first entry.
	consumertest.Eventually(t, 2*time.Minute, "the owner's first entry in the new log, no message published", func() bool {
		s, err := js.Stream(t.Context(), name)
		return err == nil && s.CachedInfo().State.Msgs > 0
	})
	publish(t, js, 20, 30)
	consumertest.Eventually(t, 2*time.Minute, "both copies hold 30", func() bool {
		return processed(t, a.cfg.DB) == 30 && processed(t, b.cfg.DB) == 30
	})
	a.halt()
	b.halt()
}
