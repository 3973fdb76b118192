package outbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jetledger/jetledger/ledger"
)

// lookupState is what the dispatcher knows of its sink's lookup.
type lookupState uint8

const (
	lookupUnproven lookupState = iota // trusted when it finds, not yet when it does not
	lookupProven                      // it found an item the destination holds
	lookupOff                         // unsupported, or it denied an item the destination holds
)

// settleReview looks the rows in review up at the destination, when the sink
// can: one found there is sent (with its id there), one the destination has
// never seen is queued to be sent again with the same key, and one it cannot
// answer for now is looked up again later. Only rows nobody can answer for
// wait for a person. A row cancelled while it was being sent is never sent
// again, nor settled as sent: see settleCancel.
//
// "Never seen" sends an item again, so it is believed only from a lookup
// that has shown it finds an item the destination does hold (the newest
// sent row): a lookup URL that answers 404 to everything would otherwise
// send every row in review twice.
func (d *Dispatcher) settleReview(ctx context.Context) error {
	look, ok := d.sink.(Looker)
	if !ok || d.lookup == lookupOff {
		return nil
	}
	rows, err := d.o.Reviewable(ctx, d.sink.Name(), d.cfg.Workers)
	if err != nil || len(rows) == 0 {
		return err
	}
	// Proven again every round: a lookup that found the newest sent row
	// once may stop seeing items later (a destination moved, a clock
	// changed), and "never seen" sends an item again.
	d.lookup = lookupUnproven
	d.proveLookup(ctx, look)
	for _, it := range rows {
		if d.lookup == lookupOff {
			return nil
		}
		c, p := d.ask(ctx, look, it)
		if it.PendingDelete {
			c, p = d.settleCancel(ctx, it, c, p)
		}
		if _, err := d.o.Transition(ctx, it.ID, c, p); err != nil {
			if ctx.Err() != nil {
				return nil // stopped: the row stays in review, for the next lookup
			}
			d.log.WarnContext(ctx, "cannot settle an outbox row in review", "outbox_id", it.ID, "err", err)
			continue
		}
		d.report(ctx, c, it, p)
	}
	return nil
}

// proveLookup checks the lookup against the newest sent row: it must find it.
func (d *Dispatcher) proveLookup(ctx context.Context, look Looker) {
	it, ok, err := d.o.LastSent(ctx, d.sink.Name())
	if err != nil || !ok {
		return // nothing to check against yet
	}
	lctx, cancel := context.WithTimeout(ctx, d.sink.Timeout())
	_, found, err := look.Lookup(lctx, it)
	cancel()
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		d.lookup = lookupOff
	case err != nil:
		// The destination cannot say now; try again next round.
	case found:
		d.lookup = lookupProven
	default:
		d.lookup = lookupOff
		d.n.lookupOff.Add(1)
		d.log.ErrorContext(ctx, "the destination's lookup does not find an item it holds; lookups are off and rows in review wait for a person: check the lookup URL",
			"outbox_id", it.ID, "external_id", it.ExternalID)
	}
}

// lookupSuffix starts what a lookup that could not settle a row adds to the
// row's error; the next round replaces it rather than adding another.
const lookupSuffix = "; a lookup at the destination could not settle it: "

// lookupLater keeps it in review with its own reason and why the lookup
// could not settle it.
func (d *Dispatcher) lookupLater(it ledger.OutboxItem, why error) (ledger.Change, ledger.Params) {
	reason, _, _ := strings.Cut(it.Error, lookupSuffix)
	return ledger.LookupLater, ledger.Params{Delay: d.cfg.LookupEvery, Reason: reason + lookupSuffix + why.Error()}
}

// ask looks one row up: the change it calls for.
func (d *Dispatcher) ask(ctx context.Context, look Looker, it ledger.OutboxItem) (ledger.Change, ledger.Params) {
	lctx, cancel := context.WithTimeout(ctx, d.sink.Timeout())
	ext, found, err := look.Lookup(lctx, it)
	cancel()
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		d.lookup = lookupOff
		err = errors.New("this sink cannot look items up")
	case err == nil && found:
		return ledger.Found, ledger.Params{ExternalID: ext}
	case err == nil && d.lookup == lookupProven:
		return ledger.Unseen, ledger.Params{Reason: "the destination had never seen it (lookup by key); sending it again with the same key"}
	case err == nil:
		err = errors.New("the destination says it never saw it, but its lookup has not yet found an item it holds")
	}
	return d.lookupLater(it, err)
}

// settleCancel turns what the lookup said of a row cancelled while it was
// being sent (c, p) into the change that finishes the cancel: "never seen"
// cancels it, nothing being at the destination; "found" deletes the item
// there (believed as deleteItem decides) and then cancels it. Anything else
// keeps it in review, saying why: it is never sent again.
func (d *Dispatcher) settleCancel(ctx context.Context, it ledger.OutboxItem, c ledger.Change, p ledger.Params) (ledger.Change, ledger.Params) {
	switch c {
	case ledger.Unseen:
		return ledger.SettleCancel, ledger.Params{Reason: "cancelled while sending; the destination never saw it (lookup by key): nothing to delete"}
	case ledger.Found:
		it.ExternalID = cmp.Or(p.ExternalID, it.ExternalID)
		if err := d.deleteAt(ctx, it); err != nil {
			return d.lookupLater(it, fmt.Errorf("cancelled while sending and found at the destination, but not deleted there: %w", err))
		}
		d.n.deleted.Add(1)
		return ledger.SettleCancel, ledger.Params{ExternalID: it.ExternalID,
			Reason: fmt.Sprintf("cancelled while sending; found at the destination by a lookup and deleted there (%s)", it.ExternalID)}
	}
	return c, p
}

func (d *Dispatcher) report(ctx context.Context, c ledger.Change, it ledger.OutboxItem, p ledger.Params) {
	switch c {
	case ledger.Found:
		d.n.found.Add(1)
		d.log.InfoContext(ctx, "outbox row in review found at the destination: sent", "outbox_id", it.ID, "external_id", p.ExternalID)
	case ledger.Unseen:
		d.n.unseen.Add(1)
		d.log.InfoContext(ctx, "outbox row in review never reached the destination: sending it again with the same key", "outbox_id", it.ID)
	case ledger.SettleCancel:
		d.log.WarnContext(ctx, "outbox row cancelled while sending: its cancel is done", "outbox_id", it.ID, "external_id", p.ExternalID, "reason", p.Reason)
	}
}
