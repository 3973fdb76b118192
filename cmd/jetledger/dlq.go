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
	NATS natsFlags `embed:"" group:"nats" set:"nats_help=NATS server URL to republish to"`
}

func (dlqRequeueCmd) Help() string {
	return `Fix the cause first: the message is then applied exactly once. Inside the
stream's duplicate window the stream would drop the copy, so requeue refuses
(exit 1) and keeps the dead letter until the window has passed. The copy goes
only into the dead letter's own stream (at an edge, the hub's stream it
sources), under the subject that stream stores it as again (a partition's
mapping included): a server whose stream is another one is refused (exit 1)
and the dead letter is kept.`
}

func (c *dlqRequeueCmd) Run(inv *invocation, q *dlqCmd) error {
	return c.dlqID.withStore(q, func(st *ledger.Store) error {
		d, err := st.DeadLetter(inv.ctx, c.ID)
		if err != nil {
			return err
		}
		if d.MessageID == "" {
			return fmt.Errorf("dead letter %d has no Nats-Msg-Id, so a republish could not be deduplicated; publish its payload with 'jetledger publish --id ID' and discard it", c.ID)
		}
		ack, err := c.republish(inv, d)
		if err != nil {
			return err
		}
		if err := st.DiscardDeadLetter(inv.ctx, c.ID); err != nil {
			return fmt.Errorf("requeued as %s seq %d, but removing the dead letter failed: %w", ack.Stream, ack.Sequence, err)
		}
		if q.JSON {
			return json.NewEncoder(inv.stdout).Encode(map[string]any{"requeued": c.ID, "message_id": d.MessageID, "stream": ack.Stream, "seq": ack.Sequence})
		}
		fmt.Fprintf(inv.stdout, "dead letter %d requeued as %s seq %d with its original id %s\n", c.ID, ack.Stream, ack.Sequence, d.MessageID)
		return nil
	})
}

// republish publishes the dead letter's payload and headers with its
// original id into the stream it came from, and only there, under the
// subject that stream stores it as again; a copy the stream dropped as a
// duplicate is an error.
func (c *dlqRequeueCmd) republish(inv *invocation, d ledger.DeadLetter) (publisher.Ack, error) {
	ctx := inv.ctx
	nc, js, err := connect(ctx, c.NATS, quiet)
	if err != nil {
		return publisher.Ack{}, err
	}
	defer nc.Close()
	s, err := js.Stream(ctx, d.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return publisher.Ack{}, fmt.Errorf("requeue dead letter %d: %w: the server reached has no stream %s; it is kept: point --nats (or the NATS context) at the server run consumes from",
			c.ID, errWrongStream, d.Stream)
	}
	if err != nil {
		return publisher.Ack{}, fmt.Errorf("requeue dead letter %d: stream %s: %w; it is kept", c.ID, d.Stream, err)
	}
	if err := sameInstance(ctx, s, d); err != nil {
		return publisher.Ack{}, fmt.Errorf("requeue dead letter %d: %w; it is kept: point --nats (or the NATS context) at the server run consumes from", c.ID, err)
	}
	subject, err := publishSubject(s.CachedInfo().Config, d.Subject)
	if err != nil {
		return publisher.Ack{}, fmt.Errorf("requeue dead letter %d: %w; it is kept: publish its payload with 'jetledger publish --stream %s --id %s' to the subject it was first published to, then discard it",
			c.ID, err, d.Stream, d.MessageID)
	}
	into, err := originStream(s.CachedInfo().Config, subject)
	if err != nil {
		return publisher.Ack{}, fmt.Errorf("requeue dead letter %d: %w; it is kept: publish its payload with 'jetledger publish --stream STREAM --id %s' into the stream it came from, then discard it",
			c.ID, err, d.MessageID)
	}
	p, err := publisher.New(js, publisher.Config{Logger: quiet})
	if err != nil {
		return publisher.Ack{}, err
	}
	ack, err := p.Publish(ctx, publisher.Message{Subject: subject, Data: d.Payload, ID: d.MessageID, Header: requeueHeaders(d.Headers), ExpectStream: into})
	if errors.Is(err, publisher.ErrWrongStream) {
		return publisher.Ack{}, fmt.Errorf("requeue dead letter %d: %w: %w; it is kept: point --nats (or the NATS context) at the server run consumes from", c.ID, errWrongStream, err)
	}
	if err != nil {
		return publisher.Ack{}, fmt.Errorf("requeue dead letter %d: %w; it is kept", c.ID, err)
	}
	if ack.Duplicate {
		return publisher.Ack{}, fmt.Errorf("requeue dead letter %d (id %s): %w; it is kept: try again once the window has passed", c.ID, d.MessageID, errStillInWindow)
	}
	return ack, nil
}

// sameInstance refuses a stream that provably is not the one the dead
// letter came from: another server's of the same name, or one created
// since, never reached its sequence or holds another message there. Where
// the copy is gone (a work queue, an age limit) nothing more can be proved
// than the name.
func sameInstance(ctx context.Context, s jetstream.Stream, d ledger.DeadLetter) error {
	if last := s.CachedInfo().State.LastSeq; last < d.Sequence {
		return fmt.Errorf("%w: stream %s on the server reached has never stored seq %d (its last is %d), so it is another server's or was created since",
			errWrongStream, d.Stream, d.Sequence, last)
	}
	raw, err := s.GetMsg(ctx, d.Sequence)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("stream %s seq %d: %w", d.Stream, d.Sequence, err)
	case raw.Subject != d.Subject || raw.Header.Get(jetstream.MsgIDHeader) != d.MessageID:
		return fmt.Errorf("%w: stream %s on the server reached holds another message at seq %d (id %q on %s), so it is another server's or was created since",
			errWrongStream, d.Stream, d.Sequence, raw.Header.Get(jetstream.MsgIDHeader), raw.Subject)
	}
	return nil
}

// errNoOrigin: the dead letter's stream neither captures its subject nor
// sources it from exactly one stream.
var errNoOrigin = errors.New("cannot tell which stream a copy must be published into to reach the dead letter's stream")

// originStream is the stream a copy on subject must be stored in to reach
// the stream of cfg: that stream when it captures subjects itself, else the
// one stream it sources subject from (an edge's stream, the hub's), whose
// copies it takes in.
func originStream(cfg jetstream.StreamConfig, subject string) (string, error) {
	if len(cfg.Subjects) > 0 || len(cfg.Sources) == 0 {
		return cfg.Name, nil
	}
	var from []string
	for _, src := range cfg.Sources {
		if src.FilterSubject == "" && len(src.SubjectTransforms) == 0 || src.FilterSubject != "" && server.SubjectMatchesFilter(subject, src.FilterSubject) {
			from = append(from, src.Name)
		}
		for _, tr := range src.SubjectTransforms {
			if server.SubjectMatchesFilter(subject, tr.Source) {
				from = append(from, src.Name)
			}
		}
	}
	if len(from) != 1 {
		return "", fmt.Errorf("%w: stream %s captures no subject and sources %s from %d streams %v", errNoOrigin, cfg.Name, subject, len(from), from)
	}
	return from[0], nil
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
