package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jetledger/jetledger/publisher"
)

const publishHelp = `
Publish JSON messages with a stable Nats-Msg-Id header, so that a retried
publish is dropped by the stream's duplicate window and a redelivery is a
no-op at the consumer. With --data one message is published; otherwise each
non-empty line of standard input is one JSON message, published as it comes
(tail -f events.jsonl | jetledger publish ... works), each once the stream
has stored the one before it: a line that is not JSON (exit 2) or that the
server refuses (exit 1; over its max_payload, say) stops it with the lines
before it stored and none after it, and names the line to publish again
from. --all-or-nothing checks all input before anything is published.

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
	Whole    bool          `name:"all-or-nothing" help:"read and check all of standard input before publishing any of it (default: each line is published as it comes, tail -f too, and a bad line stops it after those before it)"`
	jsonFlag
	Log   logFlags  `embed:"" group:"log"`
	stdin io.Reader // the lines; nil: os.Stdin (a test gives its own)
}

func (publishCmd) Help() string { return publishHelp }

// publishNames are what publisher's refusals call its settings.
var publishNames = map[string]string{"Subject": "--subject", "Data": "--data", "ID": "--id", "IDField": "--id-field",
	"Raw": "--raw", "Lines": "standard input", "Attempts": "--attempts", "Timeout": "--timeout"}

func (c *publishCmd) Run(inv *invocation) error {
	if c.stdin == nil {
		c.stdin = os.Stdin
	}
	in := publisher.Input{Subject: c.Subject, Data: []byte(c.Data), ID: c.ID, IDField: c.IDField, Raw: c.Raw, Lines: c.stdin,
		ExpectStream: c.Stream, Names: publishNames}
	cfg := publisher.Config{Attempts: c.Attempts, Timeout: c.Timeout, Explicit: true, Names: publishNames}
	if err := cmp.Or(in.Check(), cfg.Validate()); err != nil {
		return configUsage(err)
	}
	msgs, err := in.Open(c.Whole)
	if err != nil {
		return inputError(err)
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
	cfg.Logger, cfg.OnAck = log, onAck
	p, err := publisher.New(js, cfg)
	if err != nil {
		return configUsage(err)
	}
	if name, err := p.CheckStream(inv.ctx, js, c.Subject, c.Stream); errors.Is(err, publisher.ErrDuplicateWindowTooShort) {
		log.WarnContext(inv.ctx, "retries may outlive the stream's duplicate window", "stream", name, "err", err)
	}
	n, err := p.PublishSeq(inv.ctx, msgs) // one at a time: nothing after a failed line is stored
	var failed *publisher.PublishError
	const checkServer = "; check --nats (or the NATS context) and --stream" // the stream reached is not the one named
	switch {
	case errors.As(err, &failed) && failed.Line > 0:
		if errors.Is(err, publisher.ErrWrongStream) {
			return reworded{err, failed.Say(publishNames) + checkServer}
		}
		return reworded{err, failed.Say(publishNames)}
	case errors.Is(err, publisher.ErrWrongStream):
		return fmt.Errorf("published %d messages: %w"+checkServer, n, err)
	case errors.As(err, new(*publisher.ConfigError)), errors.As(err, new(*publisher.ReadError)):
		return inputError(err) // its acks are printed above
	case err != nil:
		return fmt.Errorf("published %d messages: %w", n, err)
	case !c.JSON && n > 1:
		fmt.Fprintf(inv.stdout, "published %d messages (%d duplicates)\n", n, dups)
	}
	return nil
}

// inputError is the input's refusal (exit 2), or its reader's error.
func inputError(err error) error {
	if errors.As(err, new(*publisher.ConfigError)) {
		return configUsage(err)
	}
	return fmt.Errorf("read standard input: %w", errors.Unwrap(err))
}
