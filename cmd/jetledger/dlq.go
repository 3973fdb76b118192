package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/publisher"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// dlqCmd is `jetledger dlq`: operate the dead letters.
type dlqCmd struct {
	dbFlag
	jsonFlag
	List    dlqListCmd    `cmd:"" help:"dead letters, oldest first"`
	Show    dlqShowCmd    `cmd:"" help:"one dead letter with its headers and payload"`
	Requeue dlqRequeueCmd `cmd:"" help:"republish the original payload and headers with the original Nats-Msg-Id, then delete the dead letter"`
	Discard dlqDiscardCmd `cmd:"" help:"delete the dead letter: nothing more will happen to it"`
}

func (dlqCmd) Help() string {
	return `Dead letters are messages given up on (a Term error, the last allowed
delivery failing, no usable Nats-Msg-Id, or the server's max-deliveries
advisory), each kept with its headers, payload and reason.`
}

var (
	// errStillInWindow: requeue published into a stream that dropped the copy.
	errStillInWindow = errors.New("the stream's duplicate window still holds this id, so it dropped the copy")
	// errWrongStream: requeue reached a server whose stream is not the one
	// the dead letter came from, and published nothing there.
	errWrongStream = errors.New("not the dead letter's stream")
)

// windowError is errStillInWindow naming the stream whose duplicate window
// holds the id and, when known, when it no longer will.
type windowError struct {
	Stream string
	Until  time.Time // zero: not known
}

func (e *windowError) Error() string {
	if e.Until.IsZero() {
		return fmt.Sprintf("stream %s: %v", e.Stream, errStillInWindow)
	}
	return fmt.Sprintf("stream %s: %v until about %s", e.Stream, errStillInWindow, e.Until.Format(time.RFC3339))
}

func (e *windowError) Unwrap() error { return errStillInWindow }

// dlqID is the argument of the commands on one dead letter.
type dlqID struct {
	ID int64 `arg:"" name:"id" help:"the dead letter's numeric id (see 'dlq list')"`
}

// withStore checks the id, then runs f with the ledger of q.
func (d dlqID) withStore(q *dlqCmd, f func(*ledger.Store) error) error {
	if d.ID <= 0 {
		return usagef("want the dead letter's numeric id (see 'dlq list'), got %d", d.ID)
	}
	return q.withStore(f)
}

type dlqListCmd struct {
	limitFlag
}

func (c *dlqListCmd) Run(inv *invocation, q *dlqCmd) error {
	if err := c.validate(); err != nil {
		return err
	}
	fetch := func(st *ledger.Store) ([]ledger.DeadLetter, error) { return st.DeadLetters(inv.ctx, c.Limit) }
	return listRows(inv, q.dbFlag, q.JSON, fetch, []string{"ID", "MESSAGE ID", "STREAM", "SEQ", "SUBJECT", "DELIVERIES", "WHEN", "REASON"},
		func(d ledger.DeadLetter) []string {
			return []string{fmt.Sprint(d.ID), d.MessageID, d.Stream, fmt.Sprint(d.Sequence), d.Subject,
				fmt.Sprint(d.Deliveries), d.CreatedAt.Format(time.RFC3339), d.Reason}
		})
}

type dlqShowCmd struct {
	dlqID
}

func (c *dlqShowCmd) Run(inv *invocation, q *dlqCmd) error {
	return c.dlqID.withStore(q, func(st *ledger.Store) error {
		d, err := st.DeadLetter(inv.ctx, c.ID)
		if err != nil {
			return err
		}
		if q.JSON {
			return json.NewEncoder(inv.stdout).Encode(d)
		}
		fmt.Fprintf(inv.stdout, "id          %d\nmessage id  %s\nstream      %s seq %d\nsubject     %s\ndeliveries  %d\nwhen        %s\nreason      %s\nheaders     %v\npayload     %s\n",
			d.ID, d.MessageID, d.Stream, d.Sequence, d.Subject, d.Deliveries, d.CreatedAt.Format(time.RFC3339), d.Reason, d.Headers, d.Payload)
		return nil
	})
}

type dlqDiscardCmd struct {
	dlqID
}

func (c *dlqDiscardCmd) Run(inv *invocation, q *dlqCmd) error {
	return c.dlqID.withStore(q, func(st *ledger.Store) error {
		if err := st.DiscardDeadLetter(inv.ctx, c.ID); err != nil {
			return err
		}
		if q.JSON {
			return json.NewEncoder(inv.stdout).Encode(map[string]any{"discarded": c.ID})
		}
		fmt.Fprintf(inv.stdout, "dead letter %d discarded\n", c.ID)
		return nil
	})
}

type dlqRequeueCmd struct {
	dlqID
	Wait time.Duration `name:"wait" default:"30s" help:"at an edge: how long to wait for the copy to be sourced from the hub into the dead letter's stream; if it has not arrived by then the dead letter is kept (exit 1)"`
	NATS natsFlags     `embed:"" group:"nats" set:"nats_help=NATS server URL to republish to"`
}

func (dlqRequeueCmd) Help() string {
	return `Fix the cause first: the message is then applied exactly once. Inside the
stream's duplicate window the stream would drop the copy, so requeue refuses
(exit 1) and keeps the dead letter until the window has passed. The copy goes
only into the dead letter's own stream (at an edge, the hub's stream it
sources), under the subject that stream stores it as again (a partition's
mapping included): a server whose stream is another one is refused (exit 1)
and the dead letter is kept. At an edge the dead letter goes only once the
copy has been sourced into the edge's stream: the edge's own duplicate window
must have passed too, and if the copy does not arrive within --wait (the link
to the hub is down) the dead letter is kept (exit 1).`
}

func (c *dlqRequeueCmd) Run(inv *invocation, q *dlqCmd) error {
	if c.Wait <= 0 {
		return usagef("--wait %s: want a positive duration (how long to wait at an edge for the copy to be sourced from the hub)", c.Wait)
	}
	return c.dlqID.withStore(q, func(st *ledger.Store) error {
		d, err := st.DeadLetter(inv.ctx, c.ID)
		if err != nil {
			return err
		}
		if d.MessageID == "" {
			return fmt.Errorf("dead letter %d has no Nats-Msg-Id, so a republish could not be deduplicated; publish its payload with 'jetledger publish --id ID' and discard it", c.ID)
		}
		r, err := c.republish(inv, d)
		if err != nil {
			return err
		}
		if err := st.DiscardDeadLetter(inv.ctx, c.ID); err != nil {
			return fmt.Errorf("requeued into %s seq %d, but removing the dead letter failed: %w", d.Stream, r.Seq, err)
		}
		if q.JSON {
			return json.NewEncoder(inv.stdout).Encode(map[string]any{"requeued": c.ID, "message_id": d.MessageID, "stream": r.Via.Stream, "seq": r.Via.Sequence,
				"in_stream": d.Stream, "in_seq": r.Seq, "earlier": r.Earlier})
		}
		switch {
		case r.Earlier:
			fmt.Fprintf(inv.stdout, "dead letter %d: an earlier requeue's copy with its id %s reached %s seq %d; dead letter removed\n", c.ID, d.MessageID, d.Stream, r.Seq)
		case r.Via.Stream != d.Stream:
			fmt.Fprintf(inv.stdout, "dead letter %d requeued as %s seq %d with its original id %s, sourced into %s seq %d\n", c.ID, r.Via.Stream, r.Via.Sequence, d.MessageID, d.Stream, r.Seq)
		default:
			fmt.Fprintf(inv.stdout, "dead letter %d requeued as %s seq %d with its original id %s\n", c.ID, r.Via.Stream, r.Via.Sequence, d.MessageID)
		}
		return nil
	})
}

// errNotArrived: a stream stored the copy, but it did not reach the dead
// letter's stream (in time, or as the subject run consumes).
var errNotArrived = errors.New("the copy has not reached the dead letter's stream")

// purgeMargin is how late the server may drop an id from a stream's
// duplicate window: it does so on a timer, at or just after the time the
// stream stored the id plus the window.
const purgeMargin = time.Second

// requeued is where a requeue's copy is: in the dead letter's stream at Seq
// (after the dead letter's), stored by the publish Via (at an edge, into
// the hub's stream), or by an Earlier requeue whose copy arrived late, when
// nothing was published.
type requeued struct {
	Seq     uint64
	Via     publisher.Ack
	Earlier bool
}

// republish publishes the dead letter's payload and headers with its
// original id into the stream it came from, and only there, under the
// subject that stream stores it as again, and returns once the copy is in
// the dead letter's stream: a copy a stream dropped as a duplicate, or one
// that does not reach it, is an error and the dead letter is kept.
func (c *dlqRequeueCmd) republish(inv *invocation, d ledger.DeadLetter) (requeued, error) {
	ctx := inv.ctx
	nc, js, err := connect(ctx, c.NATS, quiet)
	if err != nil {
		return requeued{}, err
	}
	defer nc.Close()
	s, err := js.Stream(ctx, d.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return requeued{}, fmt.Errorf("requeue dead letter %d: %w: the server reached has no stream %s; it is kept: point --nats (or the NATS context) at the server run consumes from",
			c.ID, errWrongStream, d.Stream)
	}
	if err != nil {
		return requeued{}, fmt.Errorf("requeue dead letter %d: stream %s: %w; it is kept", c.ID, d.Stream, err)
	}
	held, err := sameInstance(ctx, s, d)
	if err != nil {
		return requeued{}, fmt.Errorf("requeue dead letter %d: %w; it is kept: point --nats (or the NATS context) at the server run consumes from", c.ID, err)
	}
	cfg := s.CachedInfo().Config
	subject, err := publishSubject(cfg, d.Subject)
	if err != nil {
		return requeued{}, fmt.Errorf("requeue dead letter %d: %w; it is kept: publish its payload with 'jetledger publish --stream %s --id %s' to the subject it was first published to, then discard it",
			c.ID, err, d.Stream, d.MessageID)
	}
	into, src, err := originStream(cfg, subject)
	if err != nil {
		return requeued{}, fmt.Errorf("requeue dead letter %d: %w; it is kept: publish its payload with 'jetledger publish --stream STREAM --id %s' into the stream it came from, then discard it",
			c.ID, err, d.MessageID)
	}
	if src != nil {
		// The edge's stream stores what the hub's stored, so the hub's
		// mapping (a partitioned hub's) decides what to publish.
		hub, err := sourceConfig(ctx, nc, js, src)
		if err != nil {
			return requeued{}, fmt.Errorf("requeue dead letter %d: the stream %s it sources (domain %q): %w; it is kept: try again once the link to the hub is up", c.ID, src.Name, src.Domain, err)
		}
		if subject, err = publishSubject(hub, subject); err != nil {
			return requeued{}, fmt.Errorf("requeue dead letter %d: %w; it is kept: publish its payload with 'jetledger publish --stream %s --id %s' at the hub to the subject it was first published to, then discard it",
				c.ID, err, src.Name, d.MessageID)
		}
	}
	copies := &arrivals{s: s, d: d, next: d.Sequence + 1}
	if into != d.Stream {
		// The copy reaches d.Stream only through its source, which
		// deduplicates with d.Stream's own window: a copy of an earlier
		// requeue may be there already, and the window may still hold the id.
		seq, err := copies.find(ctx)
		if err != nil {
			return requeued{}, fmt.Errorf("requeue dead letter %d: looking for an earlier copy: %w; it is kept", c.ID, err)
		}
		if seq > 0 {
			return requeued{Seq: seq, Earlier: true}, nil
		}
		if until := windowUntil(cfg, held, d); time.Now().Before(until) {
			return requeued{}, fmt.Errorf("requeue dead letter %d (id %s): %w: the hub's stream %s would store the copy and %s would drop it; it is kept: try again after %s",
				c.ID, d.MessageID, &windowError{Stream: d.Stream, Until: until}, into, d.Stream, until.Format(time.RFC3339))
		}
	}
	p, err := publisher.New(js, publisher.Config{Logger: quiet})
	if err != nil {
		return requeued{}, err
	}
	ack, err := p.Publish(ctx, publisher.Message{Subject: subject, Data: d.Payload, ID: d.MessageID, Header: requeueHeaders(d.Headers), ExpectStream: into})
	if errors.Is(err, publisher.ErrWrongStream) {
		return requeued{}, fmt.Errorf("requeue dead letter %d: %w: %w; it is kept: point --nats (or the NATS context) at the server run consumes from", c.ID, errWrongStream, err)
	}
	if err != nil {
		return requeued{}, fmt.Errorf("requeue dead letter %d: %w; it is kept", c.ID, err)
	}
	if ack.Duplicate {
		return requeued{}, fmt.Errorf("requeue dead letter %d (id %s): %w; it is kept: try again once the window has passed", c.ID, d.MessageID, &windowError{Stream: ack.Stream})
	}
	if into == d.Stream {
		return requeued{Seq: ack.Sequence, Via: ack}, storedAs(ctx, s, d, ack)
	}
	wctx, cancel := context.WithTimeout(ctx, c.Wait)
	defer cancel()
	seq, err := copies.await(wctx)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return requeued{}, fmt.Errorf("requeue dead letter %d (id %s): %w: %s stored it as seq %d, but %s has not sourced it within --wait %s; it is kept: %s",
			c.ID, d.MessageID, errNotArrived, ack.Stream, ack.Sequence, d.Stream, c.Wait, whyNotSourced(ctx, s, into))
	}
	if err != nil {
		return requeued{}, fmt.Errorf("requeue dead letter %d: %s stored the copy as seq %d; waiting for %s to source it: %w; it is kept", c.ID, ack.Stream, ack.Sequence, d.Stream, err)
	}
	return requeued{Seq: seq, Via: ack}, nil
}

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
// in a copy from the stream into, from what s knows of that source.
func whyNotSourced(ctx context.Context, s jetstream.Stream, into string) string {
	info, err := s.Info(ctx)
	if err != nil {
		return fmt.Sprintf("the link to the hub may be down (stream info: %v)", err)
	}
	name := info.Config.Name
	for _, src := range info.Sources {
		switch {
		case src.Name != into:
			continue
		case src.Error != nil:
			return fmt.Sprintf("%s's source %s fails (%v): the link to the hub may be down; try again once it is up", name, into, src.Error)
		case src.Active < 0 || src.Active > 3*sourceHeartbeat:
			return fmt.Sprintf("%s has not heard from %s for %s: the link to the hub is down; try again once it is up", name, into, src.Active.Round(time.Second))
		case src.Lag > 0:
			return fmt.Sprintf("%s is %d messages behind %s: try again with a longer --wait", name, src.Lag, into)
		}
		// Caught up yet without the copy: the stream dropped it (the server
		// keeps an id past its window when it restarted inside it, by up
		// to one window) or refused it (full, discard new).
		again := time.Now().Add(info.Config.Duplicates + purgeMargin)
		return fmt.Sprintf("%s hears from %s and is caught up, so it dropped or refused the copy: its duplicate window still holds the id (try again after %s), or it is full (see its limits)",
			name, into, again.Format(time.RFC3339))
	}
	return fmt.Sprintf("%s no longer sources %s", name, into)
}

// storedAs proves that the copy the dead letter's stream acknowledged is
// stored as the subject run consumed the original on (a partition's
// mapping may have changed since the subject was worked out). A copy gone
// already was stored and taken out by the stream's retention, except in an
// interest stream without consumers: it acknowledges a publish no consumer
// is interested in, and stores nothing.
func storedAs(ctx context.Context, s jetstream.Stream, d ledger.DeadLetter, ack publisher.Ack) error {
	raw, err := s.GetMsg(ctx, ack.Sequence)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		info, err := s.Info(ctx)
		if err != nil {
			return fmt.Errorf("requeue dead letter %d: %s acknowledged the copy as seq %d, which it no longer holds, and its info failed: %w; it is kept: check that run's consumer got it, then discard the dead letter",
				d.ID, ack.Stream, ack.Sequence, err)
		}
		if info.Config.Retention == jetstream.InterestPolicy && info.State.Consumers == 0 {
			return fmt.Errorf("requeue dead letter %d: %w: %s is an interest stream without consumers, so it acknowledged the copy as seq %d and stored nothing; it is kept: start run (its durable consumer) first, then requeue again once the duplicate window has passed",
				d.ID, errNotArrived, ack.Stream, ack.Sequence)
		}
		return nil
	case err != nil:
		return fmt.Errorf("requeue dead letter %d: %s stored the copy as seq %d, but reading it back failed: %w; it is kept: check it with 'nats stream get %s %d', then discard the dead letter",
			d.ID, ack.Stream, ack.Sequence, err, ack.Stream, ack.Sequence)
	case raw.Subject != d.Subject || raw.Header.Get(jetstream.MsgIDHeader) != d.MessageID:
		return fmt.Errorf("requeue dead letter %d: %w: %s stored the copy as seq %d on %s (id %q), not on %s, so run may not consume it; it is kept: check the stream's subject transform",
			d.ID, errNotArrived, ack.Stream, ack.Sequence, raw.Subject, raw.Header.Get(jetstream.MsgIDHeader), d.Subject)
	}
	return nil
}

// arrivals looks through the dead letter's stream for a copy of it: a
// message with its id on its subject at a sequence after its own, which
// run's consumer (past the dead letter's) is still to get.
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

// sameInstance refuses a stream that provably is not the one the dead
// letter came from: another server's of the same name, or one created
// since, never reached its sequence or holds another message there. Where
// the copy is gone (a work queue, an age limit) nothing more can be proved
// than the name. It returns the stream's message at the dead letter's
// sequence, nil when gone.
func sameInstance(ctx context.Context, s jetstream.Stream, d ledger.DeadLetter) (*jetstream.RawStreamMsg, error) {
	if last := s.CachedInfo().State.LastSeq; last < d.Sequence {
		return nil, fmt.Errorf("%w: stream %s on the server reached has never stored seq %d (its last is %d), so it is another server's or was created since",
			errWrongStream, d.Stream, d.Sequence, last)
	}
	raw, err := s.GetMsg(ctx, d.Sequence)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("stream %s seq %d: %w", d.Stream, d.Sequence, err)
	case raw.Subject != d.Subject || raw.Header.Get(jetstream.MsgIDHeader) != d.MessageID:
		return nil, fmt.Errorf("%w: stream %s on the server reached holds another message at seq %d (id %q on %s), so it is another server's or was created since",
			errWrongStream, d.Stream, d.Sequence, raw.Header.Get(jetstream.MsgIDHeader), raw.Subject)
	}
	return raw, nil
}

// errNoOrigin: the dead letter's stream neither captures its subject nor
// sources it from exactly one stream.
var errNoOrigin = errors.New("cannot tell which stream a copy must be published into to reach the dead letter's stream")

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
		if src.FilterSubject == "" && len(src.SubjectTransforms) == 0 || src.FilterSubject != "" && server.SubjectMatchesFilter(subject, src.FilterSubject) {
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
		return "", nil, fmt.Errorf("%w: stream %s captures no subject and sources %s from %d streams %v", errNoOrigin, cfg.Name, subject, len(from), names)
	}
	return from[0].Name, from[0], nil
}

// sourceConfig is the configuration of the stream src names, read in its
// domain (or through its API prefix).
func sourceConfig(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, src *jetstream.StreamSource) (jetstream.StreamConfig, error) {
	var err error
	switch {
	case src.Domain != "":
		js, err = jetstream.NewWithDomain(nc, src.Domain)
	case src.External != nil && src.External.APIPrefix != "":
		js, err = jetstream.NewWithAPIPrefix(nc, src.External.APIPrefix)
	}
	if err != nil {
		return jetstream.StreamConfig{}, err
	}
	s, err := js.Stream(ctx, src.Name)
	if err != nil {
		return jetstream.StreamConfig{}, err
	}
	return s.CachedInfo().Config, nil
}

// requeueHeaders is the dead letter's headers without those that belonged
// to its first publish or to the server: the expectations (last sequence,
// last id) held for that moment, a rollup would now purge what came since,
// and the server refuses a publish carrying its own (the source header a
// sourced copy has at an edge, a marker).
func requeueHeaders(h map[string][]string) nats.Header {
	out := nats.Header{}
	for k, v := range h {
		if !serverOrFirstPublish(k) {
			out[k] = v
		}
	}
	return out
}

func serverOrFirstPublish(key string) bool {
	const expected = "Nats-Expected-"
	if len(key) >= len(expected) && strings.EqualFold(key[:len(expected)], expected) {
		return true
	}
	for _, k := range []string{"Nats-Stream-Source", "Nats-Rollup", "Nats-Marker-Reason"} {
		if strings.EqualFold(key, k) {
			return true
		}
	}
	return false
}
