package requeue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/stream"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// purgeMargin is how late the server may drop an id from a stream's
// duplicate window: it does so on a timer, at or just after the time the
// stream stored the id plus the window.
const purgeMargin = time.Second

// windowUntil is when the duplicate window of the dead letter's stream no
// longer holds its id: the window took it when the stream stored the
// message at the dead letter's sequence (held), or, that copy gone, no
// later than when the dead letter was recorded.
func windowUntil(cfg jetstream.StreamConfig, held *jetstream.RawStreamMsg, d ledger.DeadLetter) time.Time {
	if cfg.Duplicates <= 0 {
		return time.Time{} // the stream deduplicates nothing
	}
	at := d.CreatedAt
	if held != nil {
		at = held.Time
	}
	return at.Add(cfg.Duplicates + purgeMargin)
}

// sourceHeartbeat is how often an idle source's server sends a heartbeat
// (nats-server's sourceHealthHB): a source silent for several is cut off.
const sourceHeartbeat = time.Second

// whyNotSourced says why the dead letter's stream (s) may not have taken
// in a copy from the stream into, from what s knows of that source, and
// how many messages s is behind it (0: not behind, or not known); wait is
// what the caller calls Config.Wait.
func whyNotSourced(ctx context.Context, s jetstream.Stream, into, wait string) (string, uint64) {
	info, err := s.Info(ctx)
	if err != nil {
		return fmt.Sprintf("the link to the hub may be down (stream info: %v)", err), 0
	}
	name := info.Config.Name
	for _, src := range info.Sources {
		switch {
		case src.Name != into:
			continue
		case src.Error != nil:
			return fmt.Sprintf("%s's source %s fails (%v): the link to the hub may be down; try again once it is up", name, into, src.Error), 0
		case src.Active < 0 || src.Active > 3*sourceHeartbeat:
			return fmt.Sprintf("%s has not heard from %s for %s: the link to the hub is down; try again once it is up", name, into, src.Active.Round(time.Second)), 0
		case src.Lag > 0:
			return fmt.Sprintf("%s is %d messages behind %s: try again with a longer %s", name, src.Lag, into, wait), src.Lag
		}
		// Caught up yet without the copy: the stream dropped it (the server
		// keeps an id past its window when it restarted inside it, by up
		// to one window) or refused it (full, discard new).
		again := time.Now().Add(info.Config.Duplicates + purgeMargin)
		return fmt.Sprintf("%s hears from %s and is caught up, so it dropped or refused the copy: its duplicate window still holds the id (try again after %s), or it is full (see its limits)",
			name, into, again.Format(time.RFC3339)), 0
	}
	return fmt.Sprintf("%s no longer sources %s", name, into), 0
}

// arrivals looks through the dead letter's stream for a copy of it: a
// message with its id on its subject at a sequence after its own, which
// the consumer (past the dead letter's) is still to get.
type arrivals struct {
	s    jetstream.Stream
	d    ledger.DeadLetter
	next uint64 // the first sequence not looked at yet
}

// find is the sequence of a copy stored up to now, 0 when there is none.
func (a *arrivals) find(ctx context.Context) (uint64, error) {
	for {
		raw, err := a.s.GetMsg(ctx, a.next, jetstream.WithGetMsgSubject(a.d.Subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return 0, nil
		}
		if err != nil {
			return 0, fmt.Errorf("stream %s after seq %d: %w", a.d.Stream, a.next-1, err)
		}
		a.next = raw.Sequence + 1
		if raw.Header.Get(jetstream.MsgIDHeader) == a.d.MessageID {
			return raw.Sequence, nil
		}
	}
}

// await polls find until a copy arrives or ctx ends.
func (a *arrivals) await(ctx context.Context) (uint64, error) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if seq, err := a.find(ctx); err != nil || seq > 0 {
			return seq, err
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-tick.C:
		}
	}
}

// originStream is the stream a copy on subject must be stored in to reach
// the stream of cfg: that stream when it captures subjects itself (src
// nil), else the one stream it sources subject from (an edge's stream, the
// hub's), whose copies it takes in.
func originStream(cfg jetstream.StreamConfig, subject string) (into string, src *jetstream.StreamSource, err error) {
	if len(cfg.Subjects) > 0 || len(cfg.Sources) == 0 {
		return cfg.Name, nil, nil
	}
	var from []*jetstream.StreamSource
	for _, src := range cfg.Sources {
		filter := src.FilterSubject
		if src.Consumer != nil && filter == "" {
			filter = cfg.Metadata[stream.MetaSourceFilter] // a durable source's filter is on its consumer
		}
		if filter == "" && len(src.SubjectTransforms) == 0 || filter != "" && server.SubjectMatchesFilter(subject, filter) {
			from = append(from, src)
		}
		for _, tr := range src.SubjectTransforms {
			if server.SubjectMatchesFilter(subject, tr.Source) {
				from = append(from, src)
			}
		}
	}
	if len(from) != 1 {
		var names []string
		for _, src := range from {
			names = append(names, src.Name)
		}
		return "", nil, fmt.Errorf("%w: stream %s captures no subject and sources %s from %d streams %v", ErrNoOrigin, cfg.Name, subject, len(from), names)
	}
	return from[0].Name, from[0], nil
}

// sourceConfig is the configuration of the stream src names, read in its
// domain (or through its API prefix) over js's connection.
func sourceConfig(ctx context.Context, js jetstream.JetStream, src *jetstream.StreamSource) (jetstream.StreamConfig, error) {
	js, err := stream.SourceJetStream(js, src)
	if err != nil {
		return jetstream.StreamConfig{}, err
	}
	s, err := js.Stream(ctx, src.Name)
	if err != nil {
		return jetstream.StreamConfig{}, err
	}
	return s.CachedInfo().Config, nil
}
