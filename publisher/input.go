package publisher

import (
	"encoding/json"
	"errors"
	"io"
	"iter"

	"github.com/jetledger/jetledger/internal/say"
)

// Input is what to publish: Data as one message, or else each line of
// Lines (ReadLines). Messages checks all of it before anything is
// published.
type Input struct {
	// Subject of every message. Required.
	Subject string
	// Data, if not empty, is the one message. Unless Raw it must be JSON.
	Data []byte
	// ID is the Nats-Msg-Id of the Data message; it needs Data. Default:
	// the IDField of Data, with IDField, else a new ULID.
	ID string
	// IDField is the top-level JSON field holding each message's id
	// (FieldID). Default "": none.
	IDField string
	// Raw takes the messages as they are, without checking that they are
	// JSON. Default false.
	Raw bool
	// ExpectStream, if set, is every message's (Message.ExpectStream): the
	// stream that must store them. Default "": whichever captures Subject.
	ExpectStream string
	// Lines is read when Data is empty, one message per non-empty line.
	// Default nil: nothing.
	Lines io.Reader
	// MaxLine bounds one line, in bytes. Default MaxLineDefault.
	MaxLine int
	// Names say the fields in the caller's words in a refusal
	// (*ConfigError): a field's name ("Subject", "Lines") to the caller's
	// ("--subject", "standard input"). A field not in it is said as itself.
	Names map[string]string
}

// Check refuses (*ConfigError) what Messages would refuse without reading
// anything: no Subject, an ID without Data, a negative MaxLine.
func (in Input) Check() error {
	name := func(path string) string { return say.Name(in.Names, path) }
	switch {
	case in.Subject == "":
		return refuse(ErrNoSubject, "%s is required", name("Subject"))
	case in.ID != "" && len(in.Data) == 0:
		return refuse(nil, "%s needs %s; for %s use %s", name("ID"), name("Data"), name("Lines"), name("IDField"))
	case in.MaxLine < 0:
		return refuse(nil, "%s %d: must not be negative", name("MaxLine"), in.MaxLine)
	}
	return nil
}

// Messages checks in and returns its messages. A refusal of what in says
// (Check's, an id CheckID or FieldID refuses, a line ReadLines refuses,
// Data that is not JSON, nothing to publish) is a *ConfigError that says
// it in Names' words; an error reading Lines is ReadLines' error.
func (in Input) Messages() ([]Message, error) {
	name := func(path string) string { return say.Name(in.Names, path) }
	if err := in.Check(); err != nil {
		return nil, err
	}
	if err := CheckID(in.ID); err != nil {
		return nil, refuse(err, "%s: %s", name("ID"), err.(*IDError).Say(in.Names)) //nolint:errorlint // CheckID's own
	}
	if len(in.Data) == 0 {
		var msgs []Message
		var err error
		if in.Lines != nil {
			msgs, err = ReadLines(in.Lines, Lines{Subject: in.Subject, IDField: in.IDField, Raw: in.Raw, MaxLine: in.MaxLine})
		}
		var le *LineError
		switch {
		case errors.As(err, &le):
			return nil, refuse(le, "%s", le.Say(in.Names))
		case err != nil:
			return nil, err
		case len(msgs) == 0:
			return nil, refuse(nil, "nothing to publish: give %s or JSON lines on %s", name("Data"), name("Lines"))
		}
		return in.expect(msgs), nil
	}
	if !in.Raw && !json.Valid(in.Data) {
		return nil, refuse(ErrNotJSON, "%s is not valid JSON (use %s to publish it anyway)", name("Data"), name("Raw"))
	}
	m := Message{Subject: in.Subject, Data: in.Data, ID: in.ID}
	if in.ID == "" && in.IDField != "" {
		var err error
		if m.ID, err = FieldID(in.Data, in.IDField); err != nil {
			return nil, refuse(err, "%s: %s", name("Data"), err.(*IDError).Say(in.Names)) //nolint:errorlint // FieldID's own
		}
	}
	return in.expect([]Message{m}), nil
}

// expect sets ExpectStream on msgs.
func (in Input) expect(msgs []Message) []Message {
	for i := range msgs {
		msgs[i].ExpectStream = in.ExpectStream
	}
	return msgs
}

// Stream is Messages as a sequence, each line's message yielded as soon as
// the line is read (for PublishSeq), so that nothing waits for the end of
// the input. Its errors are Messages', but a bad line is found only when
// it comes: the messages before it are published, and its refusal says so.
func (in Input) Stream() iter.Seq2[Message, error] {
	if len(in.Data) > 0 || in.Lines == nil || in.Check() != nil || CheckID(in.ID) != nil {
		msgs, err := in.Messages()
		if err != nil {
			return func(yield func(Message, error) bool) { yield(Message{}, err) }
		}
		return All(msgs)
	}
	return func(yield func(Message, error) bool) {
		n := 0
		for m, err := range ScanLines(in.Lines, Lines{Subject: in.Subject, IDField: in.IDField, Raw: in.Raw, MaxLine: in.MaxLine}) {
			var le *LineError
			if errors.As(err, &le) {
				le.Published = n
				err = refuse(le, "%s", le.Say(in.Names))
			}
			m.ExpectStream = in.ExpectStream
			if !yield(m, err) || err != nil {
				return
			}
			n++
		}
		if n == 0 {
			yield(Message{}, refuse(nil, "nothing to publish: give %s or JSON lines on %s", say.Name(in.Names, "Data"), say.Name(in.Names, "Lines")))
		}
	}
}

// Open is the input's messages for PublishSeq: read and checked whole
// first, its refusal returned before anything is published, with Data or
// whole; otherwise Stream, each line's message as it comes.
func (in Input) Open(whole bool) (iter.Seq2[Message, error], error) {
	if !whole && len(in.Data) == 0 {
		return in.Stream(), nil
	}
	msgs, err := in.Messages()
	return All(msgs), err
}
