package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/publisher"
	"github.com/nats-io/nats.go/jetstream"
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
	if err := checkID(c.ID); err != nil {
		return usagef("--id: %v", err)
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
	warnWindow(inv.ctx, js, p, c.Subject, c.Stream, log)
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
		msgs, err := readLines(os.Stdin, c.Subject, c.IDField, c.Raw)
		if err == nil && len(msgs) == 0 {
			err = usagef("nothing to publish: give --data or JSON lines on standard input")
		}
		return msgs, err
	}
	if !c.Raw && !json.Valid([]byte(c.Data)) {
		return nil, usagef("--data is not valid JSON (use --raw to publish it anyway)")
	}
	m := publisher.Message{Subject: c.Subject, Data: []byte(c.Data), ID: c.ID}
	if c.ID == "" && c.IDField != "" {
		var err error
		if m.ID, err = fieldID([]byte(c.Data), c.IDField); err != nil {
			return nil, usagef("--data: %v", err)
		}
	}
	return []publisher.Message{m}, nil
}

// warnWindow warns when retries may outlive the duplicate window of the
// stream that will store the messages: stream when given, else the one
// capturing subject.
func warnWindow(ctx context.Context, js jetstream.JetStream, p *publisher.Publisher, subject, stream string, log *slog.Logger) {
	name := stream
	if name == "" {
		var err error
		if name, err = js.StreamNameBySubject(ctx, subject); err != nil {
			return
		}
	}
	if s, err := js.Stream(ctx, name); err == nil {
		if err := p.CheckDuplicateWindow(s.CachedInfo().Config.Duplicates); err != nil {
			log.WarnContext(ctx, "retries may outlive the stream's duplicate window", "stream", name, "err", err)
		}
	}
}

// maxLine bounds one input line; the server's own limit (1 MiB by default)
// is reported by the publish itself.
const maxLine = 64 << 20

func readLines(r io.Reader, subject, idField string, raw bool) ([]publisher.Message, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	var msgs []publisher.Message
	for line := 1; sc.Scan(); line++ {
		b := []byte(strings.TrimSpace(sc.Text()))
		if len(b) == 0 {
			continue
		}
		if !raw && !json.Valid(b) {
			return nil, usagef("standard input line %d is not valid JSON; nothing was published", line)
		}
		m := publisher.Message{Subject: subject, Data: b}
		if idField != "" {
			var err error
			if m.ID, err = fieldID(b, idField); err != nil {
				return nil, usagef("standard input line %d: %v; nothing was published", line, err)
			}
		}
		msgs = append(msgs, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read standard input: %w", err)
	}
	return msgs, nil
}

// checkID refuses an id the consumer would dead-letter rather than apply.
func checkID(id string) error {
	if len(id) > consumer.MaxMessageIDLen {
		return fmt.Errorf("the id is %d bytes; a consumer dead-letters a Nats-Msg-Id over %d bytes, so nothing was published", len(id), consumer.MaxMessageIDLen)
	}
	return nil
}

// fieldID reads a top-level string or number field as the message id, which
// checkID must pass.
func fieldID(b []byte, field string) (string, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return "", fmt.Errorf("--id-field needs a JSON object: %v", err)
	}
	v, ok := obj[field]
	if !ok {
		return "", fmt.Errorf("no field %q for the id", field)
	}
	var s string
	var num json.Number
	switch {
	case json.Unmarshal(v, &s) == nil && s != "":
	case json.Unmarshal(v, &num) == nil:
		s = num.String()
	default:
		return "", fmt.Errorf("field %q must be a non-empty string or a number", field)
	}
	if err := checkID(s); err != nil {
		return "", err
	}
	return s, nil
}
