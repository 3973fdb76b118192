package ledger_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jetledger/jetledger/ledger"
)

// Writers on several goroutines (a run's outbox workers beside its
// batches) share one changelog: each transaction's entry follows the one
// committed before it. The store's position moves on before the writer is
// free for the next transaction, so none is refused by the log as if
// another owner had written it (issue 42, item 1: the only owner fenced
// itself once its webhook's workers wrote).
func TestConcurrentWritersShareOneSequence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	log, owner, standby := pair(t, 1<<20)
	const writers, each = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				dl := ledger.DeadLetter{Stream: "S", Sequence: uint64(w*each + i + 1), Subject: "s.x", Reason: "test"}
				if err := owner.RecordDeadLetters(ctx, []ledger.DeadLetter{dl}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a writer beside others: %v", err)
	}
	if got := len(log.entries); got != 1+writers*each {
		t.Fatalf("the log holds %d entries, want the take-over's and one per transaction, %d", got, 1+writers*each)
	}
	sameAsOwner(t, log, owner, standby)
}
