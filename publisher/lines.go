package publisher

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// MaxIDLen is the longest id a consumer takes (consumer.MaxMessageIDLen):
// a longer Nats-Msg-Id is dead-lettered rather than applied, so CheckID
// refuses it before anything is published.
const MaxIDLen = 512

// MaxLineDefault bounds one line ReadLines reads, in bytes: 64 MiB. The
// server's own limit (1 MiB by default) is reported by the publish itself.
const MaxLineDefault = 64 << 20

// Lines says how ReadLines turns lines into messages. Only Subject is
// required.
type Lines struct {
	// Subject of every message. Required.
	Subject string
	// IDField is the top-level JSON field holding each line's id (see
	// FieldID). Default "": none, each message gets a new ULID.
	IDField string
	// Raw takes lines as they are, without checking that they are JSON.
	// Default false. With IDField a line must still be a JSON object.
	Raw bool
	// MaxLine bounds one line, in bytes. Default MaxLineDefault.
	MaxLine int
}

// ReadLines reads each non-empty line of r, spaces trimmed, as one
// message, and checks every one before it returns, so that a bad line is
// found before anything is published. A line that is not JSON is a
// *LineError wrapping ErrNotJSON; one whose id cannot be read, a *LineError
// wrapping an *IDError.
func ReadLines(r io.Reader, cfg Lines) ([]Message, error) {
	var msgs []Message
	for m, err := range ScanLines(r, cfg) {
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// ScanLines yields the messages of r's lines as ReadLines reads them, each
// as soon as its line is there (tail -f), for PublishSeq. A line that
// cannot be a message, or a failed read, is yielded as ReadLines' error,
// and ends the sequence.
func ScanLines(r io.Reader, cfg Lines) iter.Seq2[Message, error] {
	return func(yield func(Message, error) bool) {
		if cfg.Subject == "" {
			yield(Message{}, fmt.Errorf("publisher: read lines: %w", ErrNoSubject))
			return
		}
		if cfg.MaxLine < 0 {
			yield(Message{}, fmt.Errorf("%w: MaxLine %d is negative", ErrInvalidConfig, cfg.MaxLine))
			return
		}
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), cmp.Or(cfg.MaxLine, MaxLineDefault))
		for line := 1; sc.Scan(); line++ {
			b := []byte(strings.TrimSpace(sc.Text()))
			if len(b) == 0 {
				continue
			}
			m, err := Message{Subject: cfg.Subject, Data: b, Line: line}, error(nil)
			if !cfg.Raw && !json.Valid(b) {
				err = &LineError{Line: line, Err: ErrNotJSON}
			} else if cfg.IDField != "" {
				if m.ID, err = FieldID(b, cfg.IDField); err != nil {
					err = &LineError{Line: line, Err: err}
				}
			}
			if !yield(m, err) || err != nil {
				return
			}
		}
		if err := sc.Err(); err != nil {
			yield(Message{}, &ReadError{Err: err})
		}
	}
}

// ReadError is a failure to read the lines themselves (not a bad line).
type ReadError struct{ Err error }

func (e *ReadError) Error() string { return "publisher: read lines: " + e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// CheckID refuses (*IDError wrapping ErrIDTooLong) an id longer than
// MaxIDLen, which a consumer would dead-letter rather than apply.
func CheckID(id string) error {
	if len(id) > MaxIDLen {
		return &IDError{Len: len(id), Err: ErrIDTooLong}
	}
	return nil
}

// FieldID reads the top-level string or number field of the JSON object b
// as a message id (a webhook provider's event id, say), which CheckID must
// pass. Its errors are *IDError.
func FieldID(b []byte, field string) (string, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return "", &IDError{Field: field, Err: ErrNotObject, Cause: err}
	}
	v, ok := obj[field]
	if !ok {
		return "", &IDError{Field: field, Err: ErrNoIDField}
	}
	var s string
	var num json.Number
	switch {
	case json.Unmarshal(v, &s) == nil && s != "":
	case json.Unmarshal(v, &num) == nil:
		s = num.String()
	default:
		return "", &IDError{Field: field, Err: ErrBadIDField}
	}
	if err := CheckID(s); err != nil {
		return "", err
	}
	return s, nil
}

// StreamLookup is what CheckStream needs of the JetStream client.
type StreamLookup interface {
	StreamNameBySubject(ctx context.Context, subject string) (string, error)
	Stream(ctx context.Context, name string) (jetstream.Stream, error)
}

// CheckStream checks the duplicate window of the stream that will store
// the messages (stream when given, else the one that captures subject)
// with CheckDuplicateWindow. It returns the stream's name, and
// ErrDuplicateWindowTooShort when a retry could outlive the window; a
// stream it cannot find is the client's error, wrapped.
func (p *Publisher) CheckStream(ctx context.Context, js StreamLookup, subject, stream string) (string, error) {
	name := stream
	if name == "" {
		var err error
		if name, err = js.StreamNameBySubject(ctx, subject); err != nil {
			return "", fmt.Errorf("publisher: stream of %s: %w", subject, err)
		}
	}
	s, err := js.Stream(ctx, name)
	if err != nil {
		return name, fmt.Errorf("publisher: stream %s: %w", name, err)
	}
	return name, p.CheckDuplicateWindow(s.CachedInfo().Config.Duplicates)
}
