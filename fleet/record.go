package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jetledger/jetledger/health"
	"github.com/jetledger/jetledger/node"
	"github.com/jetledger/jetledger/stream"
	"github.com/nats-io/nats.go/jetstream"
)

// Bucket is the hub's key-value bucket of the sites' records, one key per
// site.
const Bucket = "JETLEDGER_FLEET"

// Record is one site's state, as its run reports it.
type Record struct {
	Site    string    `json:"site"`    // its JetStream domain
	Version string    `json:"version"` // jetledger's
	Started time.Time `json:"started"` // when run started
	At      time.Time `json:"at"`      // when the record was made, by the edge's clock

	Stream      string    `json:"stream"`              // the copy consumed
	AppliedSeq  uint64    `json:"applied_seq"`         // the copy's sequence acked through
	AppliedAt   time.Time `json:"applied_at,omitzero"` // the newest ledger row's time
	Pending     uint64    `json:"pending"`             // messages of the copy not yet applied and acked
	Queued      int64     `json:"outbox_queued"`       // outbox rows waiting to be sent (pending, sending)
	Review      int64     `json:"outbox_review"`       // outbox rows waiting for a person
	DeadLetters int64     `json:"dead_letters"`        // dead letters not yet requeued or discarded
	Conflicts   int64     `json:"conflicts"`           // ids seen again with other content
	LedgerFree  int64     `json:"ledger_disk_free"`    // bytes free on the ledger's disk (-1: unknown)
	StoreFree   int64     `json:"store_disk_free"`     // bytes free on the embedded store's disk (-1: unknown)
	Link        Link      `json:"link"`                // the hub link as the edge sees it
	Problems    []string  `json:"problems,omitempty"`  // what the edge could not read for this record
	// Attention is what needs a person at the site, each kind with how
	// many and since when (status.Report.Attention). Nil from an edge of
	// an earlier version: its counts above are judged instead.
	Attention []health.Need `json:"attention"`
}

// oldestNeed is when the longest-waiting need of r began; zero for none.
func (r Record) oldestNeed() time.Time {
	var t time.Time
	for _, n := range r.Attention {
		if !n.Oldest.IsZero() && (t.IsZero() || n.Oldest.Before(t)) {
			t = n.Oldest
		}
	}
	return t
}

// Link is an edge's link to its hub, and how far its sourcing in both
// directions is behind.
type Link struct {
	node.LinkStatus
	// Lag is how many of the hub's messages for this site the copy has not
	// taken, as the copy last heard (while the link is down, the lag when
	// it went).
	Lag uint64 `json:"sourcing_lag"`
	// HeardAgo is how long ago the copy last heard from the hub (a message
	// or a heartbeat); -1 never.
	HeardAgo time.Duration `json:"heard_ago"`
	// EffectsNotAtHub is how many effects in the site's effects stream
	// the hub has not taken yet: its consumer's not yet delivered. (Its
	// unacknowledged count says nothing: a flow-controlled consumer's acks
	// come only with flow control, every so many messages.)
	EffectsNotAtHub uint64 `json:"effects_not_at_hub"`
	// SourceError is the server's error sourcing the copy from the hub
	// (the hub's stream deleted, a permission), "" while it sources.
	SourceError string `json:"source_error,omitempty"`
}

// AttentionSourceFailing is the kind of health.Need of a copy that cannot
// source from its hub: it stays until the server sources again.
const AttentionSourceFailing = "source_failing"

// Needs is what needs a person in l: a failing source.
func (l Link) Needs() []health.Need {
	if l.SourceError == "" {
		return nil
	}
	return []health.Need{{Kind: AttentionSourceFailing, Count: 1,
		Do: "the site's copy cannot source from the hub (" + l.SourceError + "): make the hub's stream again (jetledger hub), or fix the leaf's permissions"}}
}

// Marshal is the record as put in Bucket.
func (r Record) Marshal() ([]byte, error) { return json.Marshal(r) }

// ReadSourcing reads, on the edge's own server, how far the copy and the
// effects stream are behind the hub: Lag and HeardAgo from the copy's
// source, EffectsNotAtHub from the effects stream's consumer of the hub
// (stream.HubEffectsConsumer). An effects stream "" has none. It needs no
// link.
func ReadSourcing(ctx context.Context, js jetstream.JetStream, copy, effects string) (Link, error) {
	l := Link{HeardAgo: -1}
	s, err := js.Stream(ctx, copy)
	if err != nil {
		return l, fmt.Errorf("fleet: the copy %s: %w", copy, err)
	}
	for _, src := range s.CachedInfo().Sources {
		if src.Error != nil && l.SourceError == "" {
			l.SourceError = fmt.Sprintf("%s from %s: %s", src.Name, sourceDomain(src), src.Error.Description)
		}
		l.Lag += src.Lag
		if src.Active >= 0 && (l.HeardAgo < 0 || src.Active < l.HeardAgo) {
			l.HeardAgo = src.Active
		}
	}
	if effects == "" {
		return l, nil
	}
	c, err := js.PushConsumer(ctx, effects, stream.HubEffectsConsumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return l, nil // the effects are not sourced through it (set up by hand)
	}
	if err != nil {
		return l, fmt.Errorf("fleet: the hub's consumer of %s: %w", effects, err)
	}
	l.EffectsNotAtHub = c.CachedInfo().NumPending
	return l, nil
}

// sourceDomain is the JetStream domain src is read from, "" when local.
func sourceDomain(src *jetstream.StreamSourceInfo) string {
	if src.External == nil {
		return "this domain"
	}
	return strings.TrimSuffix(strings.TrimPrefix(src.External.APIPrefix, "$JS."), ".API")
}

// Line says l in one line, as status shows it at an edge. From the
// edge's own server (no LinkStatus), the link is judged by the copy's
// heartbeat: a durable source hears from the hub every second.
func (l Link) Line() string {
	state := "link up"
	switch {
	case l.Leaf && !l.Up && l.Refused:
		state = "link REFUSED (" + l.Reason + ")"
	case l.Leaf && !l.Up:
		state = "link DOWN"
	case !l.Leaf && (l.HeardAgo < 0 || l.HeardAgo > 5*time.Second):
		state = "link down or idle"
	}
	heard := "never heard from the hub"
	if l.HeardAgo >= 0 {
		heard = "heard from " + l.HeardAgo.Round(100*time.Millisecond).String() + " ago"
	}
	line := fmt.Sprintf("%s, %s, %d not yet copied, %d effects not at the hub", state, heard, l.Lag, l.EffectsNotAtHub)
	if l.SourceError != "" {
		line += "; SOURCING FAILS: " + l.SourceError
	}
	return line
}
