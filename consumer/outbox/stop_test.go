package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/ledger"
)

// stopMidClaim is the ledger's outbox, with the run stopped (cancel) as a
// claim is written: the moment a supervisor's SIGTERM may land.
type stopMidClaim struct {
	*ledger.Store
	cancel context.CancelFunc
}

func (s stopMidClaim) Transition(ctx context.Context, id string, c ledger.Change, p ledger.Params) (ledger.OutboxItem, error) {
	if c == ledger.Claim {
		s.cancel()
	}
	return s.Store.Transition(ctx, id, c, p)
}

// A stop that lands while a claim is written does not cut the claim
// short: on a changelog, a claim cut mid-write may have reached the log
// all the same, and the copy that takes over would find the row claimed
// by nobody and put it in review. The claim completes, and its send goes
// out as a send in flight does, before Run returns.
func TestAStopMidClaimLetsTheClaimAndItsSendFinish(t *testing.T) {
	t.Parallel()
	e := newOutboxEnv(t, false, time.Second)
	id := e.enqueue(t, "m1")
	ctx, cancel := context.WithCancel(context.Background())
	d, err := outbox.New(stopMidClaim{e.st, cancel}, outbox.Config{Sink: e.sink, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Run(ctx); err != nil {
		t.Fatal(err)
	}
	it, err := e.st.Get(context.Background(), id)
	if err != nil || it.Status != ledger.StatusSent || len(e.dest.Items()) != 1 {
		t.Fatalf("after the stop: row %+v (%v), %d items", it, err, len(e.dest.Items()))
	}
}
