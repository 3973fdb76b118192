package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
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

func publishCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	n := natsFlags{url: defaultNATS}
	var subject, data, id, idField string
	var attempts int
	var timeout time.Duration
	var asJSON, raw bool
	var lf logFlags
	fs := newFlags("publish", "publish --subject S [--data JSON [--id ID] | < lines.jsonl] [flags]", publishHelp, stdout)
	n.register(fs, "NATS server URL")
	fs.StringVar(&subject, "subject", "", "subject to publish to (required)")
	fs.StringVar(&data, "data", "", "publish this one message instead of reading standard input")
	fs.StringVar(&id, "id", "", "Nats-Msg-Id of the --data message (default: a new ULID)")
	fs.StringVar(&idField, "id-field", "", "top-level JSON field holding each line's id (string or number)")
	fs.IntVar(&attempts, "attempts", publisher.AttemptsDefault, "tries per message on timeout or no responders, all with the same id")
	fs.DurationVar(&timeout, "timeout", publisher.TimeoutDefault, "wait for the stream's ack per attempt")
	fs.BoolVar(&raw, "raw", false, "publish lines as they are, without checking that they are JSON")
	fs.BoolVar(&asJSON, "json", false, "print one JSON object per message")
	lf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if subject == "" {
		return usagef("--subject is required")
	}
	if id != "" && data == "" {
		return usagef("--id needs --data; for standard input use --id-field")
	}
	if attempts < 1 || timeout <= 0 {
		return usagef("--attempts must be at least 1 and --timeout positive")
	}
	log, err := lf.logger(stderr)
	if err != nil {
		return err
	}

	var msgs []publisher.Message
	if data != "" {
		if !raw && !json.Valid([]byte(data)) {
			return usagef("--data is not valid JSON (use --raw to publish it anyway)")
		}
		m := publisher.Message{Subject: subject, Data: []byte(data), ID: id}
		if id == "" && idField != "" {
			if m.ID, err = fieldID([]byte(data), idField); err != nil {
				return usagef("--data: %v", err)
			}
		}
		msgs = append(msgs, m)
	} else if msgs, err = readLines(os.Stdin, subject, idField, raw); err != nil {
		return err
	}
	if len(msgs) == 0 {
		return usagef("nothing to publish: give --data or JSON lines on standard input")
	}

	nc, js, err := connect(ctx, n, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	p, err := publisher.New(js, publisher.Config{Attempts: attempts, Timeout: timeout, Logger: log})
	if err != nil {
		return usageError{err}
	}
	if name, err := js.StreamNameBySubject(ctx, subject); err == nil {
		if s, err := js.Stream(ctx, name); err == nil {
			if err := p.CheckDuplicateWindow(s.CachedInfo().Config.Duplicates); err != nil {
				log.WarnContext(ctx, "retries may outlive the stream's duplicate window", "stream", name, "err", err)
			}
		}
	}
	acks, err := p.PublishBatch(ctx, msgs)
	enc := json.NewEncoder(stdout)
	dups := 0
	for _, a := range acks {
		if a.Duplicate {
			dups++
		}
		if asJSON {
			enc.Encode(a) //nolint:errcheck // stdout
		} else {
			fmt.Fprintf(stdout, "seq=%d id=%s duplicate=%t\n", a.Sequence, a.ID, a.Duplicate)
		}
	}
	if err != nil {
		return fmt.Errorf("published %d of %d messages: %w", len(acks), len(msgs), err)
	}
	if !asJSON && len(acks) > 1 {
		fmt.Fprintf(stdout, "published %d messages (%d duplicates)\n", len(acks), dups)
	}
	return nil
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

// fieldID reads a top-level string or number field as the message id.
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
	if err := json.Unmarshal(v, &s); err == nil && s != "" {
		return s, nil
	}
	var num json.Number
	if err := json.Unmarshal(v, &num); err == nil {
		return num.String(), nil
	}
	return "", fmt.Errorf("field %q must be a non-empty string or a number", field)
}
