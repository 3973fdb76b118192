package outbox

import (
	"context"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

// Windowed is an idempotent sink whose destination remembers a key only for
// a while, as a JetStream stream remembers a Nats-Msg-Id for its duplicate
// window. The dispatcher treats it as idempotent only if the window outlasts
// the horizon of one row's sends (Config.Horizon), and sends a row whose
// earlier send may have landed again only while the row is younger than the
// window; an older one goes to review.
type Windowed interface {
	KeyWindow() time.Duration
}

// elsewhere reports that an earlier send of it that may have landed may
// have gone to another instance of the destination than its claim's (a
// stream deleted and made again): the claim then keeps no record of where
// its sends went (ledger: sentTo), and this instance does not remember
// their key, so a send again could be a second copy (DESIGN.md rule 13).
func (d *Dispatcher) elsewhere(it ledger.OutboxItem) bool {
	_, ok := d.sink.(Positioner)
	return ok && it.MaybeSent && it.SentTo.Instance == ""
}

// Readiness is a sink that knows when its destination cannot be reached
// (its connection is down): while Ready returns an error the dispatcher
// claims nothing, so rows wait queued through an outage instead of using up
// their attempts, and go out when it ends.
type Readiness interface {
	Ready() error
}

// windowSlack covers the clocks of this host and the destination, which
// measure the window, running at slightly different rates.
const windowSlack = time.Second

// Horizon is the longest time from a row's first send to its last while the
// destination is reachable: every attempt holding its lease, the backoff
// between them, and a poll interval before each.
func (c Config) Horizon() time.Duration {
	h := time.Duration(c.MaxAttempts) * (c.Lease + c.PollInterval)
	for n := 1; n < c.MaxAttempts; n++ {
		h += c.Backoff.Delay(n)
	}
	return h
}

// idempotence decides, once at New, whether unknown outcomes may be sent
// again: the sink must say so, and a Windowed sink's window must outlast the
// horizon. It returns a warning when the window is too short.
func idempotence(s Sink, cfg Config) (bool, string) {
	if !s.Idempotent() {
		return false, ""
	}
	w, ok := s.(Windowed)
	if !ok {
		return true, ""
	}
	if need := cfg.Horizon() + s.Timeout() + windowSlack; w.KeyWindow() < need {
		return false, "the destination remembers an idempotency key for " + w.KeyWindow().String() +
			", less than one row's sends can take (" + need.String() + "): sends with an unknown outcome go to review instead of being re-sent; lengthen the destination's window (a stream's duplicate window) to make them re-sendable"
	}
	return true, ""
}

// repeatable reports whether it may be sent again with the same key now: the
// dispatcher's sink is idempotent and, for a Windowed one, the destination
// still remembers a key sent when the row was created.
func (d *Dispatcher) repeatable(it ledger.OutboxItem, now time.Time) bool {
	return d.idempotent && !d.elsewhere(it) && d.remembers(it, now)
}

// remembers reports whether the destination, if Windowed, still remembers a
// key sent when it was created. A row made "in the future" was made while
// the ledger's clock ran ahead: its age is unknown, so it is not.
func (d *Dispatcher) remembers(it ledger.OutboxItem, now time.Time) bool {
	w, ok := d.sink.(Windowed)
	if !ok {
		return true
	}
	age := now.Sub(it.CreatedAt)
	return age > -windowSlack && age+d.sink.Timeout()+windowSlack < w.KeyWindow()
}

// ready asks a sink with Readiness whether its destination can be reached,
// logging when that changes.
func (d *Dispatcher) ready(ctx context.Context) bool {
	r, ok := d.sink.(Readiness)
	if !ok {
		return true
	}
	err := r.Ready()
	switch was := d.unready.Swap(err != nil); {
	case err != nil && !was:
		d.log.WarnContext(ctx, "outbox: destination unreachable; rows wait queued until it is back", "sink", d.sink.Name(), "err", err)
	case err == nil && was:
		d.log.InfoContext(ctx, "outbox: destination reachable again; sending", "sink", d.sink.Name())
	}
	return err == nil
}
