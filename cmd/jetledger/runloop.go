package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/node"
)

// watchStore watches the embedded server's store (none with --nats) until
// ctx ends; its failure stops the run (stop) and is sent on the channel
// returned, which gets nil otherwise.
func watchStore(ctx context.Context, stop func(), e *node.Node, log *slog.Logger) <-chan error {
	done := make(chan error, 1)
	if e == nil {
		done <- nil
		return done
	}
	go func() {
		err := watchEmbedded(ctx, e, node.DefaultWatchInterval, log)
		if err != nil {
			stop()
		}
		done <- err
	}()
	return done
}

// explainRunError says a full database in the command line's terms: the
// cap of --db-max-size reached while the disk has room is not "disk full".
func explainRunError(err error, maxSize byteSize) error {
	var capErr *ledger.MaxSizeError
	if !errors.As(err, &capErr) {
		return err
	}
	return fmt.Errorf("the database reached --db-max-size %s while its disk has room: raise --db-max-size, or prune it (jetledger ledger prune); nothing of the failed batch was acked, so it is applied after the restart (%w)",
		maxSize, err)
}

// summarize logs the counts every interval (0: never) until ctx ends: the
// consumer's and the dispatcher's totals since the start, and the outbox
// rows queued and in review now (counted on the status index).
func summarize(ctx context.Context, every time.Duration, log *slog.Logger, st *ledger.Store, cons *consumer.Consumer, d *dispatcher) {
	if every <= 0 {
		return
	}
	started := time.Now()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n := cons.Counts()
		// Not "batches": the totals line at the stop is the one with it.
		attrs := []any{"uptime", time.Since(started).Round(time.Second), "applied", n.Applied, "duplicates", n.Duplicates,
			"conflicts", n.Conflicts, "dead_letters", n.DeadLetters}
		if d != nil {
			dc := d.Counts()
			attrs = append(attrs, "sent", dc.Sent, "send_failed", dc.Failed)
			queued, err := st.CountOutbox(ctx, ledger.StatusQueued, time.Time{})
			var review int64
			if err == nil {
				review, err = st.CountOutbox(ctx, ledger.StatusReview, time.Time{})
			}
			if err == nil {
				attrs = append(attrs, "outbox_queued", queued, "outbox_review", review)
			} else if ctx.Err() == nil {
				attrs = append(attrs, "outbox_err", err)
			}
		}
		log.InfoContext(ctx, "summary", attrs...)
	}
}

// runTogether runs the consumer and, if there is one, the dispatcher until
// ctx ends or either fails, which stops the other.
func runTogether(ctx context.Context, stop func(), cons *consumer.Consumer, d *dispatcher) error {
	dispatchErr := make(chan error, 1)
	if d != nil {
		go func() {
			err := d.Run(ctx)
			stop()
			dispatchErr <- err
		}()
	} else {
		dispatchErr <- nil
	}
	err := cons.Run(ctx)
	stop()
	return errors.Join(err, <-dispatchErr)
}

// logTotals logs what the consumer and the dispatcher did, on a clean stop
// as on a failure.
func logTotals(log *slog.Logger, cons *consumer.Consumer, d *dispatcher) {
	n := cons.Counts()
	attrs := []any{"applied", n.Applied, "duplicates", n.Duplicates,
		"conflicts", n.Conflicts, "failed", n.Failed, "naks", n.Naks,
		"terms", n.Terms, "dead_letters", n.DeadLetters, "stale", n.Stale, "batches", n.Batches}
	if d != nil {
		dc := d.Counts()
		attrs = append(attrs, "sent", dc.Sent, "send_failed", dc.Failed, "send_retried", dc.Retried,
			"review", dc.Review, "deleted", dc.Deleted, "found", dc.Found, "resent", dc.Unseen, "lookup_off", dc.LookupOff)
	}
	log.Info("consumer stopped", attrs...)
}
