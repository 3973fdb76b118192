package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jetledger/jetledger/publisher"
)

const publishHelp = `
Publish JSON messages with a stable Nats-Msg-Id header, so that a retried
publish is dropped by the stream's duplicate window and a redelivery is a
no-op at the consumer. With --data one message is published; otherwise each
non-empty line of standard input is one JSON message. All input is checked
before anything is published.

Ids: --id for the --data message, --id-field to take each line's id from a
top-level JSON field (a webhook provider's event id, say), otherwise a new
ULID per message. Publishing the same id again reports duplicate=true and the
sequence of the stored copy.

Timeouts and no-responders are retried with the same id (--attempts).

Examples:

    jetledger publish --subject payments.in --data '{"account":"a1","amount":5}' --id evt_123
    jetledger publish --subject payments.in --id-field event_id < events.jsonl`

// publishCmd is `jetledger publish`.
type publishCmd struct {
	NATS     natsFlags     `embed:"" group:"nats"`
	Subject  string        `name:"subject" help:"subject to publish to (required)"`
	Stream   string        `name:"stream" placeholder:"NAME" help:"the stream that must store the messages: the server refuses them, and nothing is stored, when another stream captures --subject (default: whichever stream captures it)"`
	Data     string        `name:"data" placeholder:"JSON" help:"publish this one message instead of reading standard input"`
	ID       string        `name:"id" help:"Nats-Msg-Id of the --data message (default: a new ULID)"`
	IDField  string        `name:"id-field" placeholder:"FIELD" help:"top-level JSON field holding each line's id (string or number)"`
	Attempts int           `name:"attempts" default:"${publish_attempts}" help:"tries per message on timeout or no responders, all with the same id"`
	Timeout  time.Duration `name:"timeout" default:"${publish_timeout}" help:"wait for the stream's ack per attempt"`
	Raw      bool          `name:"raw" help:"publish lines as they are, without checking that they are JSON"`
	jsonFlag
	Log logFlags `embed:"" group:"log"`
}

func (publishCmd) Help() string { return publishHelp }

// Bounds of --attempts and --timeout: the retry horizon, which the stream's
// duplicate window must cover, stays a sum of sane durations.
const (
	maxPublishAttempts = 100
	maxPublishTimeout  = time.Hour
)

func (c *publishCmd) Run(inv *invocation) error {
	switch {
	case c.Subject == "":
		return usagef("--subject is required")
	case c.ID != "" && c.Data == "":
		return usagef("--id needs --data; for standard input use --id-field")
	case c.Attempts < 1 || c.Attempts > maxPublishAttempts:
		return usagef("--attempts %d: want 1 to %d", c.Attempts, maxPublishAttempts)
	case c.Timeout <= 0 || c.Timeout > maxPublishTimeout:
		return usagef("--timeout %s: want more than 0 and at most %s", c.Timeout, maxPublishTimeout)
	}
	if err := publisher.CheckID(c.ID); err != nil {
		return usagef("--id: %v", idProblem(err))
	}
	msgs, err := c.messages()
	if err != nil {
		return err
	}
	nc, js, log, err := dial(inv, c.NATS, c.Log)
	if err != nil {
		return err
	}
	defer nc.Close()
	// Each ack is printed as it comes: a publish killed mid-way leaves a
	// record of what the stream has.
	dups := 0
	enc := json.NewEncoder(inv.stdout)
	onAck := func(a publisher.Ack) {
		if a.Duplicate {
			dups++
		}
		if c.JSON {
			enc.Encode(a) //nolint:errcheck // stdout
		} else {
			fmt.Fprintf(inv.stdout, "seq=%d id=%s duplicate=%t\n", a.Sequence, a.ID, a.Duplicate)
		}
	}
	p, err := publisher.New(js, publisher.Config{Attempts: c.Attempts, Timeout: c.Timeout, Logger: log, OnAck: onAck})
	if err != nil {
		return usageError{err}
	}
	if name, err := p.CheckStream(inv.ctx, js, c.Subject, c.Stream); errors.Is(err, publisher.ErrDuplicateWindowTooShort) {
		log.WarnContext(inv.ctx, "retries may outlive the stream's duplicate window", "stream", name, "err", err)
	}
	for i := range msgs {
		msgs[i].ExpectStream = c.Stream
	}
	acks, err := p.PublishBatch(inv.ctx, msgs)
	if errors.Is(err, publisher.ErrWrongStream) {
		return fmt.Errorf("published %d of %d messages: %w; check --nats (or the NATS context) and --stream", len(acks), len(msgs), err)
	}
	if err != nil {
		return fmt.Errorf("published %d of %d messages: %w", len(acks), len(msgs), err)
	}
	if !c.JSON && len(acks) > 1 {
		fmt.Fprintf(inv.stdout, "published %d messages (%d duplicates)\n", len(acks), dups)
	}
	return nil
}

// messages reads and checks all input before anything is published.
func (c *publishCmd) messages() ([]publisher.Message, error) {
	if c.Data == "" {
		msgs, err := publisher.ReadLines(os.Stdin, publisher.Lines{Subject: c.Subject, IDField: c.IDField, Raw: c.Raw})
		var le *publisher.LineError
		switch {
		case errors.Is(err, publisher.ErrNotJSON) && errors.As(err, &le):
			return nil, usagef("standard input line %d is not valid JSON; nothing was published", le.Line)
		case errors.As(err, &le):
			return nil, usagef("standard input line %d: %v; nothing was published", le.Line, idProblem(le.Err))
		case err != nil: // the reader's error, said as the command's
			return nil, fmt.Errorf("read standard input: %w", errors.Unwrap(err))
		case len(msgs) == 0:
			return nil, usagef("nothing to publish: give --data or JSON lines on standard input")
		}
		return msgs, nil
	}
	if !c.Raw && !json.Valid([]byte(c.Data)) {
		return nil, usagef("--data is not valid JSON (use --raw to publish it anyway)")
	}
	m := publisher.Message{Subject: c.Subject, Data: []byte(c.Data), ID: c.ID}
	if c.ID == "" && c.IDField != "" {
		var err error
		if m.ID, err = publisher.FieldID([]byte(c.Data), c.IDField); err != nil {
			return nil, usagef("--data: %v", idProblem(err))
		}
	}
	return []publisher.Message{m}, nil
}

// idProblem says a refused id (a *publisher.IDError) in the command's words.
func idProblem(err error) error {
	var ie *publisher.IDError
	if !errors.As(err, &ie) {
		return err
	}
	switch ie.Err {
	case publisher.ErrNotObject:
		return fmt.Errorf("--id-field needs a JSON object: %v", ie.Cause)
	case publisher.ErrNoIDField:
		return fmt.Errorf("no field %q for the id", ie.Field)
	case publisher.ErrBadIDField:
		return fmt.Errorf("field %q must be a non-empty string or a number", ie.Field)
	}
	return fmt.Errorf("the id is %d bytes; a consumer dead-letters a Nats-Msg-Id over %d bytes, so nothing was published", ie.Len, publisher.MaxIDLen)
}
