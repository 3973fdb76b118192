package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Run consumes until ctx ends, then finishes and commits the batch in hand,
// sends its acks and returns nil. It returns an error when the ledger fails
// (nothing of that batch is acked) or the consumer is deleted. A dead letter
// from the server's max-deliveries advisory that the ledger refuses is tried
// again until it is recorded or Run returns, which names it as lost.
//
// Fetching is pipelined: the next batch is fetched while the current one is
// applied, so the network round trip overlaps the commit. At most one
// fetched batch waits; its wait is what Plan.BufferWait budgets.
func (c *Consumer) Run(ctx context.Context) error {
	defer func() {
		// Acks are fire-and-forget; make sure the last ones leave the process.
		// Within the plan's ack margin, or they are late anyway.
		if err := c.js.Conn().FlushTimeout(c.plan.AckMargin); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			c.log.Warn("flushing acks", "err", err)
		}
	}()
	// A large ledger's index of ids is read now, not in the first batch's
	// deadline.
	if err := c.ledger.WarmIndex(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped meanwhile: nothing fetched, nothing to ack
		}
		return err
	}
	if c.serverMax > 0 {
		// The server may give up on a message whose last delivery we never
		// saw (a crash); its advisory is the only trace, so record it.
		// Its recording ends, and is waited for, when Run returns.
		stop, err := c.watchAdvisories(ctx)
		if err != nil {
			return err
		}
		defer stop()
	}
	fetchCtx, stopFetching := context.WithCancel(ctx)
	defer stopFetching()
	batches := make(chan fetched) // unbuffered: one batch in hand, one waiting
	fetcherDone := make(chan struct{})
	go func() {
		defer close(fetcherDone)
		defer close(batches)
		c.fetchLoop(fetchCtx, batches)
	}()
	defer func() {
		stopFetching()
		for range batches { // a batch fetched after the stop is left to redelivery
		}
		<-fetcherDone
	}()
	if c.cfg.Replay == nil {
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			c.watchDurable(fetchCtx)
		}()
		defer func() {
			stopFetching()
			<-watched
		}()
	}
	acks := c.startAcker(ctx)
	for {
		select {
		case f, ok := <-batches:
			switch {
			case !ok:
				return acks.close(nil)
			case f.err != nil:
				return acks.close(f.err)
			}
			if err := c.process(ctx, f.msgs, acks); err != nil {
				return acks.close(err)
			}
		case <-acks.failure:
			return acks.close(nil)
		}
	}
}

type fetched struct {
	msgs []received
	err  error // fatal: the consumer is gone
}

// fetchBackoff spaces fetches after a transient error (the server
// restarting, a cluster electing a leader).
var fetchBackoff = ackwait.Backoff{Base: 100 * time.Millisecond, Max: 5 * time.Second}

// gone reports an error that says the durable or its stream is no more.
func gone(err error) bool {
	return errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) ||
		errors.Is(err, jetstream.ErrStreamNotFound)
}

// durableGone asks the server whether the durable still exists, for a fetch
// that met no responder: one sent after the durable was deleted gets that,
// not a "deleted" status. Only a definite "not found" counts (a cluster
// electing a leader answers otherwise); it replaces *err.
func (c *Consumer) durableGone(ctx context.Context, err *error) bool {
	lctx, cancel := context.WithTimeout(ctx, fetchBackoff.Max)
	defer cancel()
	_, lerr := c.js.Consumer(lctx, c.cfg.Stream, c.consName)
	if !gone(lerr) {
		return false
	}
	*err = lerr
	return true
}

// fetchLoop fetches until ctx ends, handing each non-empty batch over.
// Transient fetch errors are logged and retried with a growing pause.
func (c *Consumer) fetchLoop(ctx context.Context, out chan<- fetched) {
	failures := 0
	for ctx.Err() == nil {
		msgs, err := c.fetch(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return // stopped while waiting, not a failure
			}
			if gone(err) || errors.Is(err, nats.ErrNoResponders) && c.durableGone(ctx, &err) {
				select {
				case out <- fetched{err: fmt.Errorf("%w: %s/%s: %v", ErrConsumerGone, c.cfg.Stream, c.cfg.Durable, err)}:
				case <-ctx.Done():
				}
				return
			}
			failures++
			c.log.WarnContext(ctx, "fetch failed", "stream", c.cfg.Stream, "durable", c.cfg.Durable, "err", err)
			if !fetchBackoff.Wait(ctx, failures) {
				return
			}
			continue
		}
		failures = 0
		if len(msgs) == 0 {
			continue
		}
		// Hand the batch over even if ctx ended meanwhile: it was delivered
		// to us, and processing it now beats waiting for its AckWait.
		out <- fetched{msgs: msgs}
	}
}

// received is a fetched message, with what admit needs of it read on the
// fetcher's goroutine: parsing the reply subject and the headers there takes
// them off the goroutine that holds the writer.
type received struct {
	msg jetstream.Msg
	at  time.Time // its receipt
	// asked is when its pull request was sent: the earliest the server may
	// have delivered it and started its AckWait. A process paused while a
	// request was out reads, once resumed, a message whose AckWait may have
	// run out meanwhile; its receipt alone would make it look fresh.
	asked   time.Time
	meta    *jetstream.MsgMetadata
	metaErr error
	id      string
	idErr   error
}

// fetch takes what is available up to the batch size without waiting for a
// full batch; when nothing is, it waits up to FetchWait for the first message
// and returns it at once: the pipelined fetcher asks for more meanwhile, so
// light traffic is not held back for company.
//
// The wait ends with ctx: stopping must not wait out a pull request (that
// was a second at the end of every run).
func (c *Consumer) fetch(ctx context.Context) ([]received, error) {
	asked := time.Now()
	b, err := c.cons.FetchNoWait(c.plan.BatchSize)
	if err != nil {
		return nil, err
	}
	if msgs, err := c.collect(b, c.plan.BatchSize, asked); err != nil || len(msgs) > 0 {
		return msgs, err
	}
	// A message that came at the end of the wait is as old as the wait: the
	// wait stays within BufferWait, so it is not refreshed for that alone.
	waitCtx, cancel := context.WithTimeout(ctx, min(c.cfg.FetchWait, c.plan.BufferWait))
	defer cancel()
	asked = time.Now()
	if b, err = c.cons.Fetch(1, jetstream.FetchContext(waitCtx)); err != nil {
		return nil, err
	}
	return c.collect(b, 1, asked)
}

// collect takes a fetch's messages, up to n, from a request sent at asked.
func (c *Consumer) collect(b jetstream.MessageBatch, n int, asked time.Time) ([]received, error) {
	out := make([]received, 0, n)
	for m := range b.Messages() {
		faultStop("fetched") // a pause between the server's delivery and the receipt
		r := received{msg: m, at: time.Now(), asked: asked}
		if r.meta, r.metaErr = m.Metadata(); r.metaErr == nil {
			r.id, r.idErr = MessageID(m.Headers(), r.meta.Stream, c.created, r.meta.Sequence.Stream, c.cfg.AllowSequenceIDs)
		}
		out = append(out, r)
	}
	if err := b.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
		// Messages already received are still ours to process.
		if len(out) > 0 {
			c.log.Warn("fetch ended early", "err", err)
			return out, nil
		}
		return nil, err
	}
	return out, nil
}
