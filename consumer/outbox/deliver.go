package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/ledger"
)

// deliver sends one claimed item and writes the result back. It runs to the
// end even when ctx ends: a claimed row must not be left in sending. claimed
// is a moment before the claim, so its lease lasts at least until claimed +
// Lease.
func (d *Dispatcher) deliver(ctx context.Context, it ledger.OutboxItem, token string, claimed time.Time) {
	ctx = context.WithoutCancel(ctx)
	repeat := d.repeatable(it, it.ClaimedAt)
	// One sink timeout for the re-reading and the send together: the lease
	// is sized for one.
	sctx, cancelSend := context.WithTimeout(ctx, d.sink.Timeout())
	var moved string
	if it.MaybeSent && repeat {
		moved = d.moved(sctx, it)
	}
	if moved != "" {
		repeat = false
	}
	var ext string
	var err error
	if it.MaybeSent && !repeat {
		// An earlier send may have landed and the destination no longer
		// remembers its key: sending again could make a second copy.
		detail := "not re-sent: the destination's window for the idempotency key has passed since an earlier send whose outcome is unknown"
		switch {
		case moved != "":
			detail = moved
		case !d.idempotent:
			detail = "not re-sent: an earlier send may have landed and the destination does not honour idempotency keys (" + it.Error + ")"
		case d.idempotent && d.elsewhere(it) && d.remembers(it, it.ClaimedAt):
			detail = notResentElsewhere
		}
		err = &SendError{Kind: ErrAmbiguous, Detail: detail}
	} else {
		ext, err = d.sink.Send(sctx, it)
	}
	cancelSend()
	wctx, cancel := context.WithTimeout(ctx, d.cfg.Lease)
	defer cancel()
	o := classify(it, ext, err, repeat, d.cfg.MaxAttempts, d.cfg.Backoff)
	o.params.Worker = token
	werr := d.writeBack(wctx, it.ID, o)
	d.count(o.change)
	if err != nil {
		d.logFailure(ctx, it, err, o)
	}
	switch {
	case werr == nil:
	case errors.Is(werr, ledger.ErrCancelled):
		// All of it inside the lease: past it the row is someone else's to
		// settle (expired to review, its cancel kept).
		dest, end := ackwait.CancelDeadlines(claimed, d.cfg.Lease, d.sink.Timeout())
		cctx, cancel := context.WithDeadline(ctx, end)
		defer cancel()
		d.settleCancelled(cctx, dest, it, token, o)
	case o.change == ledger.Sent:
		// The lease ran out and the row moved on (to review, normally).
		d.log.ErrorContext(ctx, "sent, but the result could not be written back; resolve the row with this external id",
			"outbox_id", it.ID, "external_id", ext, "err", werr)
	default:
		d.log.WarnContext(ctx, "send failed and its result could not be written back", "outbox_id", it.ID, "err", werr)
	}
}

// logFailure says, at warn, that a send failed and what its row does next
// (the change classify chose; a write-back that fails is said after it).
func (d *Dispatcher) logFailure(ctx context.Context, it ledger.OutboxItem, err error, o outcome) {
	attrs := []any{"outbox_id", it.ID, "sink", d.sink.Name(), "attempt", it.Attempts, "err", err, "next", string(o.change)}
	switch o.change {
	case ledger.Retry:
		d.log.WarnContext(ctx, "outbox send failed; it will be retried", append(attrs, "retry_in", o.params.Delay)...)
	case ledger.RetryMaybeSent:
		d.log.WarnContext(ctx, "outbox send outcome unknown; it will be sent again with the same idempotency key", append(attrs, "retry_in", o.params.Delay)...)
	case ledger.Review:
		d.log.WarnContext(ctx, "outbox send outcome unknown; the row goes to review, not sent again", attrs...)
	default:
		d.log.WarnContext(ctx, "outbox send failed; the row is failed, not sent again", append(attrs, "reason", o.params.Reason)...)
	}
}

// outcome is the change a send's answer calls for.
type outcome struct {
	change ledger.Change
	params ledger.Params
	maybe  bool // the item may be at the destination
}

// classify turns what the sink answered into the row's next change: the
// dispatcher's one decision (DESIGN.md rule 9). An unknown outcome is sent
// again with the same key only to an idempotent destination; once a send may
// have landed (this one or an earlier one), the row can only end sent or in
// review.
func classify(it ledger.OutboxItem, ext string, err error, idempotent bool, maxAttempts int, b ackwait.Backoff) outcome {
	if err == nil {
		return outcome{change: ledger.Sent, params: ledger.Params{ExternalID: ext}}
	}
	reason := fmt.Sprintf("attempt %d: %v", it.Attempts, err)
	ambiguous := !errors.Is(err, ErrRejected) && !errors.Is(err, ErrRetryable)
	maybe := ambiguous || it.MaybeSent
	last := it.Attempts >= maxAttempts
	switch {
	case ambiguous && (!idempotent || last):
		return outcome{ledger.Review, ledger.Params{Reason: "send outcome unknown, not re-sent: " + reason}, true}
	case maybe && (last || errors.Is(err, ErrRejected)):
		return outcome{ledger.Review, ledger.Params{Reason: fmt.Sprintf(
			"an earlier attempt's outcome is unknown and this one failed (%s): the item may be at the destination", reason)}, true}
	case errors.Is(err, ErrRejected):
		return outcome{change: ledger.Fail, params: ledger.Params{Reason: reason}}
	case last:
		return outcome{change: ledger.Fail, params: ledger.Params{Reason: fmt.Sprintf("gave up after %d attempts; last %s", it.Attempts, reason)}}
	case maybe:
		return outcome{ledger.RetryMaybeSent, ledger.Params{Reason: reason, Delay: b.Delay(it.Attempts)}, true}
	}
	return outcome{change: ledger.Retry, params: ledger.Params{Reason: reason, Delay: b.Delay(it.Attempts)}}
}

func (d *Dispatcher) count(c ledger.Change) {
	switch c {
	case ledger.Sent:
		d.n.sent.Add(1)
	case ledger.Fail:
		d.n.failed.Add(1)
	case ledger.Review:
		d.n.review.Add(1)
	case ledger.Retry, ledger.RetryMaybeSent:
		d.n.retried.Add(1)
	}
}

// writeBack makes the change, retrying what is not a verdict on the row (the
// database busy, say) until ctx, the lease, runs out: giving up early would
// leave a row we own in sending, to be reviewed or re-sent.
func (d *Dispatcher) writeBack(ctx context.Context, id string, o outcome) error {
	retry := ackwait.Backoff{Base: 50 * time.Millisecond, Max: time.Second}
	for n := 1; ; n++ {
		_, err := d.o.Transition(ctx, id, o.change, o.params)
		// A store that lost its changelog (fenced, or its log gone)
		// writes nothing more until it takes over again: a retry could
		// only hold the run's stop for the lease.
		if err == nil || errors.Is(err, ledger.ErrCancelled) || errors.Is(err, ledger.ErrNotOwner) || errors.Is(err, ledger.ErrNotChangelogOwner) ||
			errors.Is(err, ledger.ErrNotFound) || errors.Is(err, ledger.ErrIllegalTransition) || ctx.Err() != nil {
			return err
		}
		d.log.WarnContext(ctx, "outbox write-back failed; retrying", "outbox_id", id, "err", err)
		if !retry.Wait(ctx, n) {
			return err
		}
	}
}

// settleCancelled finishes a row that was cancelled while its send was in
// flight: a sent item is deleted at the destination (by dest), and the row
// cancelled only after that worked; an item that may be there goes to
// review, keeping its cancel for a lookup or a person to finish; one that
// provably never arrived is simply cancelled.
func (d *Dispatcher) settleCancelled(ctx context.Context, dest time.Time, it ledger.OutboxItem, token string, o outcome) {
	var err error
	switch {
	case o.change == ledger.Sent:
		it.ExternalID = o.params.ExternalID
		dctx, cancel := context.WithDeadline(ctx, dest)
		err = d.deleteAt(dctx, it)
		cancel()
		if err == nil {
			d.n.deleted.Add(1)
			d.log.WarnContext(ctx, "outbox row was cancelled while sending; deleted the item at the destination",
				"outbox_id", it.ID, "external_id", o.params.ExternalID)
			_, err = d.o.Transition(ctx, it.ID, ledger.FinishCancel, ledger.Params{Worker: token, ExternalID: o.params.ExternalID})
			break
		}
		d.n.review.Add(1)
		d.log.ErrorContext(ctx, "outbox row was cancelled while sending and the delete at the destination failed; moved to review",
			"outbox_id", it.ID, "external_id", o.params.ExternalID, "err", err)
		_, err = d.o.Transition(ctx, it.ID, ledger.Review, ledger.Params{Worker: token, ExternalID: o.params.ExternalID,
			Reason: fmt.Sprintf("cancelled while sending; sent as %q but the delete failed: %v", o.params.ExternalID, err)})
	case o.maybe:
		_, err = d.o.Transition(ctx, it.ID, ledger.Review, ledger.Params{Worker: token,
			Reason: "cancelled while sending and the send's outcome is unknown: " + o.params.Reason})
	default:
		_, err = d.o.Transition(ctx, it.ID, ledger.FinishCancel, ledger.Params{Worker: token})
	}
	if err != nil {
		d.log.ErrorContext(ctx, "cannot settle a row cancelled while sending", "outbox_id", it.ID, "err", err)
	}
}

// deleteAt deletes a sent item at the destination, if the sink can; a "no
// such item" counts only when proved, as for Cancel (deleteItem).
func (d *Dispatcher) deleteAt(ctx context.Context, it ledger.OutboxItem) error {
	del, ok := d.sink.(Deleter)
	switch {
	case it.ExternalID == "":
		return errors.New("the destination returned no id for the item, so it cannot be deleted from here")
	case !ok:
		return fmt.Errorf("sink %s cannot delete items", d.sink.Name())
	}
	return deleteItem(ctx, d.o, del, &d.deleteProven, it)
}

// notResentElsewhere is the review reason of a row whose copies may be in
// two instances of the destination.
const notResentElsewhere = "not re-sent: an earlier send whose outcome is unknown may have gone to another instance of the destination (a stream deleted and made again), which does not remember its key"

// moved says why a same-key re-send may not rely on the destination's
// memory of the key, read again just before it leaves ("" when it may):
// the round's reading may be stale (an answer that arrived late, after the
// stream was made again), and a new instance does not remember the key;
// a Retainer that no longer holds everything since the row's first send
// may have forgotten it. A reading that fails counts too: the re-send
// cannot be shown to go where the earlier copy may be. ctx bounds the
// reading and the send after it.
func (d *Dispatcher) moved(ctx context.Context, it ledger.OutboxItem) string {
	var err error
	if r, ok := d.sink.(Retainer); ok {
		err = r.HoldsSince(ctx, it.SentTo) // the instance too, in one reading
	} else if p, ok := d.sink.(Positioner); ok {
		var to ledger.Destination
		if to, err = p.Position(ctx); err == nil && to.Instance != it.SentTo.Instance {
			err = ErrOtherInstance
		}
	}
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrOtherInstance):
		return notResentElsewhere
	case errors.Is(err, ErrNotHeld):
		return "not re-sent: an earlier send whose outcome is unknown may have been stored and then removed (" + err.Error() + "); the destination may no longer remember its key"
	}
	return "not re-sent: where the send would go cannot be read (" + err.Error() + "), and an earlier send whose outcome is unknown may be there"
}
