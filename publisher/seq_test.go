package publisher_test

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/publisher"
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
