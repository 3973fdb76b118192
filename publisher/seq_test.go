package publisher_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/publisher"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Lines are published as they arrive (tail -f): each is acked while the
// input is still open; a bad line stops it after the ones before it, and
// its refusal says they were published.
func TestPublishSeqStreamsLinesAsTheyCome(t *testing.T) {
	t.Parallel()
	js, _ := setup(t)
	acked := make(chan publisher.Ack, 8)
	p, err := publisher.New(js, publisher.Config{Timeout: time.Second, OnAck: func(a publisher.Ack) { acked <- a }})
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	in := publisher.Input{Subject: "ev.x", IDField: "id", Lines: pr, Names: map[string]string{"Lines": "standard input"}}
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := p.PublishSeq(t.Context(), in.Stream())
		done <- result{n, err}
	}()
	for i, id := range []string{"a1", "a2"} {
		if _, err := io.WriteString(pw, `{"id":"`+id+`"}`+"\n"); err != nil {
			t.Fatal(err)
		}
		select {
		case a := <-acked:
			if a.ID != id || a.Sequence != uint64(i+1) {
				t.Fatalf("ack %+v, want %s at seq %d", a, id, i+1)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("line %d not published while the input stays open", i+1)
		}
	}
	go io.WriteString(pw, "{not json\n") //nolint:errcheck // the reader stops at it
	r := <-done
	pw.Close()
	var ce *publisher.ConfigError
	if r.n != 2 || !errors.As(r.err, &ce) || !errors.Is(r.err, publisher.ErrNotJSON) || !strings.Contains(r.err.Error(), "line 3") ||
		!strings.Contains(r.err.Error(), "the 2 messages before it were published") {
		t.Fatalf("after a bad line: n %d, err %v", r.n, r.err)
	}
}

// A first line that is bad publishes nothing, and says so.
func TestPublishSeqBadFirstLine(t *testing.T) {
	t.Parallel()
	_, p := setup(t)
	in := publisher.Input{Subject: "ev.x", Lines: strings.NewReader("{bad\n{}\n"), Names: map[string]string{"Lines": "standard input"}}
	n, err := p.PublishSeq(t.Context(), in.Stream())
	if n != 0 || err == nil || !strings.HasSuffix(err.Error(), "standard input line 1 is not valid JSON; nothing was published") {
		t.Fatalf("n %d, err %v", n, err)
	}
}

// A streamed line whose id is too long says what was published before it,
// and nothing that contradicts it.
func TestPublishSeqLongIDLineSaysWhatWasPublished(t *testing.T) {
	t.Parallel()
	_, p := setup(t)
	lines := `{"id":"ok1"}` + "\n" + `{"id":"` + strings.Repeat("i", publisher.MaxIDLen+1) + `"}` + "\n"
	in := publisher.Input{Subject: "ev.x", IDField: "id", Lines: strings.NewReader(lines), Names: map[string]string{"Lines": "standard input"}}
	n, err := p.PublishSeq(t.Context(), in.Stream())
	if n != 1 || err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "the 1 messages before it were published") ||
		strings.Contains(err.Error(), "nothing was published") {
		t.Fatalf("n %d, err %v", n, err)
	}
}

// lines is n JSON lines {"n":1}..., line big padded with pad bytes.
func lines(n, big, pad int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		if i == big {
			fmt.Fprintf(&b, `{"n":%d,"pad":%q}`+"\n", i, strings.Repeat("x", pad))
			continue
		}
		fmt.Fprintf(&b, `{"n":%d}`+"\n", i)
	}
	return b.String()
}

// Issue 42, item 9: a message the client or the stream refuses stops a
// streamed publish there, with the messages before it stored and none
// after it: a window in flight had the stream store lines 7-20 while
// PublishSeq reported 5. The count, OnAck and the error say what the
// stream holds.
func TestPublishSeqStopsAtRefusedMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		maxPayload int32 // server's max_payload; 0: its default
		maxMsgSize int32 // the stream's
		wantErr    error // the client's or the server's refusal
	}{
		{name: "over the server's max_payload", maxPayload: 1024, wantErr: nats.ErrMaxPayload},
		{name: "over the stream's max_msg_size", maxMsgSize: 512,
			wantErr: &jetstream.APIError{ErrorCode: jetstream.JSErrCodeStreamMessageExceedsMaximum}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := consumertest.RunServerWithOptions(t, &server.Options{MaxPayload: tt.maxPayload})
			_, js := consumertest.Connect(t, s)
			st := consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.>"}, MaxMsgSize: tt.maxMsgSize, Duplicates: time.Minute})
			var acked atomic.Int64
			p, err := publisher.New(js, publisher.Config{Timeout: time.Second, OnAck: func(publisher.Ack) { acked.Add(1) }})
			if err != nil {
				t.Fatal(err)
			}
			in := publisher.Input{Subject: "ev.x", Lines: strings.NewReader(lines(20, 6, 2048))}
			n, err := p.PublishSeq(t.Context(), in.Stream())
			var pe *publisher.PublishError
			if !errors.As(err, &pe) || pe.Line != 6 || pe.Published != 5 || pe.MaybeStored || pe.ID == "" || !errors.Is(err, tt.wantErr) {
				t.Fatalf("err %v (%+v), want a *PublishError at line 6 after 5, not stored, of %v", err, pe, tt.wantErr)
			}
			info, err := st.Info(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if n != 5 || acked.Load() != 5 || info.State.Msgs != 5 || info.State.LastSeq != 5 {
				t.Fatalf("n %d, %d acks told, the stream holds %d (last seq %d): want 5 each", n, acked.Load(), info.State.Msgs, info.State.LastSeq)
			}
		})
	}
}

// A publish whose outcome is unknown (no stream answered, every attempt)
// is said to be maybe stored: nothing proves the stream lacks it.
func TestPublishSeqUnansweredMessageMayBeStored(t *testing.T) {
	t.Parallel()
	js, _ := setup(t)
	p, err := publisher.New(js, publisher.Config{Attempts: 1, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	msgs := []publisher.Message{{Subject: "ev.x", Data: []byte(`{}`)}, {Subject: "nobody.x", Data: []byte(`{}`)}, {Subject: "ev.x", Data: []byte(`{}`)}}
	n, err := p.PublishSeq(t.Context(), publisher.All(msgs))
	var pe *publisher.PublishError
	if n != 1 || !errors.As(err, &pe) || !pe.MaybeStored || pe.Published != 1 || pe.Line != 0 || !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("n %d, err %v (%+v): want the second message maybe stored", n, err, pe)
	}
}
