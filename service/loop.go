package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/health"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/node"
)

// watchStore watches the embedded node's store (none with NATS) until ctx
// ends; its failure stops the run (stop) and is sent on the channel
// returned, which gets nil otherwise.
func watchStore(ctx context.Context, stop func(), n *node.Node, log *slog.Logger, program string) <-chan error {
	done := make(chan error, 1)
	if n == nil {
		done <- nil
		return done
	}
	go func() {
		err := watch(ctx, n, node.DefaultWatchInterval, log, program)
		if err != nil {
			stop()
		}
		done <- err
	}()
	return done
}

// Watch watches the embedded node's store every so often until ctx ends
// (nil) or it fails: then the failure is logged at error with what to do,
// and returned for the run to stop. A server that cannot write cannot
// recover in place, and a process that stays up keeps its supervisor from
// restarting it.
func Watch(ctx context.Context, n *node.Node, every time.Duration, log *slog.Logger) error {
	return watch(ctx, n, every, log, Names{}.withDefaults().Program)
}

// watch is Watch saying program (Names.Program) is what to start again.
func watch(ctx context.Context, n *node.Node, every time.Duration, log *slog.Logger, program string) error {
	err := n.Watch(ctx, every)
	if err == nil {
		return nil
	}
	disk := ledger.CheckDisk(n.StoreDir())
	log.ErrorContext(ctx, "the embedded JetStream server cannot write its store, and every publish to it goes unacknowledged until it restarts: stopping. Free space on the disk (or make it writable), then start "+program+" again; what it acknowledged is on disk and is applied after the restart, and publishers must retry what was not acknowledged",
		"store", n.StoreDir(), "store_state", stateOf(err), "disk_state", stateOf(disk), "err", err)
	return fmt.Errorf("%w: free space on its disk or make it writable, then start %s again (a supervisor restarts it); publishes it did not acknowledge must be retried", err, program)
}

// stateOf is the /healthz state an error stands for: health.StateOf, and
// the embedded node's kept write failure.
func stateOf(err error) string {
	if errors.Is(err, node.ErrStoreFailed) {
		return health.StateWriteFailed
	}
	return health.StateOf(err)
}

// StoreProbe is the health probe of the embedded node's store: a write it
// failed, then the disk under it.
func StoreProbe(n *node.Node) health.Probe { return health.Store(n.Fault, n.StoreDir()) }

// summarize logs the counts every interval (0: never) until ctx ends: the
// consumer's and the dispatcher's totals since the start, and the outbox
// rows queued and in review now (counted on the status index).
func summarize(ctx context.Context, every time.Duration, log *slog.Logger, st *ledger.Store, cons *consumer.Consumer, d *outbox.Dispatcher) {
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
			attrs = append(attrs, outboxAttrs(ctx, st, d)...)
		}
		log.InfoContext(ctx, "summary", attrs...)
	}
}

// outboxAttrs are the summary's counts of the dispatcher and the outbox.
func outboxAttrs(ctx context.Context, st *ledger.Store, d *outbox.Dispatcher) []any {
	dc := d.Counts()
	attrs := []any{"sent", dc.Sent, "send_failed", dc.Failed}
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
	return attrs
}

// runTogether runs the consumer and, if there is one, the dispatcher until
// ctx ends or either fails, which stops the other.
func runTogether(ctx context.Context, stop func(), cons *consumer.Consumer, d *outbox.Dispatcher) error {
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
func logTotals(log *slog.Logger, cons *consumer.Consumer, d *outbox.Dispatcher) {
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
