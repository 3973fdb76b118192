package consumer

import (
	"sync"
	"sync/atomic"
	"time"
)

// keepInProgress tells the server every InProgressInterval, for as long as
// the batch runs (its work and its commit), that it is still being worked
// on, so a batch that runs long is not redelivered meanwhile.
func (c *Consumer) keepInProgress(work []item, refreshed *atomic.Int64) (stop func()) {
	iv := max(c.plan.InProgressInterval(), time.Millisecond) // a checked plan has one; never a zero ticker
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(iv)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				at := time.Now()
				for _, it := range work {
					_ = it.msg.InProgress() // best effort; the ledger dedupes a redelivery
				}
				refreshed.Store(at.UnixNano())
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// reportAcks tells AfterAcks about the answers just sent for items.
func (c *Consumer) reportAcks(b *batch, ackStart time.Time, items []item) {
	if c.cfg.AfterAcks == nil || len(items) == 0 {
		return
	}
	oldest := items[0].since
	for _, it := range items {
		if it.since.Before(oldest) {
			oldest = it.since
		}
	}
	if r := time.Unix(0, b.refreshed.Load()); r.After(oldest) {
		oldest = r // every item of the batch was refreshed then
	}
	c.cfg.AfterAcks(AckReport{N: len(items), Elapsed: time.Since(ackStart), Held: time.Since(oldest), Batch: time.Since(b.start)})
}

func itemsOf(dls []deadLetter) []item {
	out := make([]item, len(dls))
	for i, d := range dls {
		out[i] = d.item
	}
	return out
}
