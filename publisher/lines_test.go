package publisher_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/publisher"
	"github.com/nats-io/nats.go/jetstream"
)

func TestFieldID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, field, want string
		wantErr               bool
	}{
		{name: "string", in: `{"id":"evt_1"}`, field: "id", want: "evt_1"},
		{name: "number", in: `{"id":12345678901234567890}`, field: "id", want: "12345678901234567890"},
		{name: "missing", in: `{"x":1}`, field: "id", wantErr: true},
		{name: "empty string", in: `{"id":""}`, field: "id", wantErr: true},
		{name: "object", in: `{"id":{"a":1}}`, field: "id", wantErr: true},
		{name: "not an object", in: `[1,2]`, field: "id", wantErr: true},
		{name: "longer than a consumer takes", in: `{"id":"` + strings.Repeat("x", consumer.MaxMessageIDLen+1) + `"}`, field: "id", wantErr: true},
		{name: "as long as a consumer takes", in: `{"id":"` + strings.Repeat("x", consumer.MaxMessageIDLen) + `"}`, field: "id", want: strings.Repeat("x", consumer.MaxMessageIDLen)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := publisher.FieldID([]byte(tt.in), tt.field)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("fieldID = %q, %v; want %q, error %t", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// Each refusal is typed: the sentinel says what is wrong, the *IDError
// what the caller needs to say it.
func TestFieldIDErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		wantErr  error
	}{
		{name: "not an object", in: `[1]`, wantErr: publisher.ErrNotObject},
		{name: "missing", in: `{"x":1}`, wantErr: publisher.ErrNoIDField},
		{name: "bool", in: `{"id":true}`, wantErr: publisher.ErrBadIDField},
		{name: "too long", in: `{"id":"` + strings.Repeat("x", publisher.MaxIDLen+1) + `"}`, wantErr: publisher.ErrIDTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := publisher.FieldID([]byte(tt.in), "id")
			var ie *publisher.IDError
			if !errors.Is(err, tt.wantErr) || !errors.As(err, &ie) {
				t.Fatalf("err = %v, want an *IDError wrapping %v", err, tt.wantErr)
			}
		})
	}
}

// The publisher's bound is the consumer's, kept apart so that a publishing
// program does not link the ledger.
func TestMaxIDLenIsTheConsumers(t *testing.T) {
	t.Parallel()
	if publisher.MaxIDLen != consumer.MaxMessageIDLen {
		t.Fatalf("MaxIDLen %d, consumer.MaxMessageIDLen %d", publisher.MaxIDLen, consumer.MaxMessageIDLen)
	}
}

// FuzzFieldID reads ids out of arbitrary JSON lines: no panic, never an
// empty id without an error.
func FuzzFieldID(f *testing.F) {
	f.Add([]byte(`{"event_id":"evt_1"}`), "event_id")
	f.Add([]byte(`{"event_id":42}`), "event_id")
	f.Add([]byte(`{"event_id":""}`), "event_id")
	f.Add([]byte(`{"event_id":[1]}`), "event_id")
	f.Add([]byte(`null`), "x")
	f.Fuzz(func(t *testing.T, line []byte, field string) {
		id, err := publisher.FieldID(line, field)
		if err == nil && id == "" {
			t.Fatal("empty id without an error")
		}
	})
}

func TestReadLinesRejectsBadLineBeforePublishing(t *testing.T) {
	t.Parallel()
	_, err := publisher.ReadLines(strings.NewReader("{\"a\":1}\n\nnope\n"), publisher.Lines{Subject: "s"})
	if err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("err = %v, want line 3 named", err)
	}
	var le *publisher.LineError
	if !errors.As(err, &le) || le.Line != 3 || !errors.Is(err, publisher.ErrNotJSON) {
		t.Fatalf("err = %#v, want a *LineError for line 3 wrapping ErrNotJSON", err)
	}
	msgs, err := publisher.ReadLines(strings.NewReader("{\"id\":\"x\"}\n\n{\"id\":\"y\"}\n"), publisher.Lines{Subject: "s", IDField: "id"})
	if err != nil || len(msgs) != 2 || msgs[1].ID != "y" {
		t.Fatalf("msgs = %+v, err %v", msgs, err)
	}
	if _, err := publisher.ReadLines(strings.NewReader("{}"), publisher.Lines{}); !errors.Is(err, publisher.ErrNoSubject) {
		t.Fatalf("no subject: err = %v", err)
	}
}

func TestCheckStream(t *testing.T) {
	t.Parallel()
	js, p := setup(t)
	ctx := context.Background()
	if name, err := p.CheckStream(ctx, js, "ev.a", ""); name != "EV" || err != nil {
		t.Fatalf("CheckStream = %q, %v; want EV, nil", name, err)
	}
	slow, err := publisher.New(js, publisher.Config{Timeout: time.Minute, Attempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	if name, err := slow.CheckStream(ctx, js, "ev.a", "EV"); name != "EV" || !errors.Is(err, publisher.ErrDuplicateWindowTooShort) {
		t.Fatalf("CheckStream = %q, %v; want EV, ErrDuplicateWindowTooShort", name, err)
	}
	if _, err := p.CheckStream(ctx, js, "other", ""); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("no stream: err = %v", err)
	}
}

func ExampleReadLines() {
	in := strings.NewReader(`{"event_id":"evt_1","amount":5}

{"event_id":"evt_2","amount":7}
`)
	msgs, err := publisher.ReadLines(in, publisher.Lines{Subject: "payments.in", IDField: "event_id"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range msgs {
		fmt.Println(m.Subject, m.ID, string(m.Data))
	}
	_, err = publisher.ReadLines(strings.NewReader("{}\nnot json\n"), publisher.Lines{Subject: "payments.in"})
	fmt.Println(err)
	// Output:
	// payments.in evt_1 {"event_id":"evt_1","amount":5}
	// payments.in evt_2 {"event_id":"evt_2","amount":7}
	// publisher: line 2: publisher: not valid JSON
}
