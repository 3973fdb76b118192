package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// runPublish runs `jetledger publish args...` as main does, with stdin as
// its standard input, and returns its exit code and output.
func runPublish(t *testing.T, stdin io.Reader, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	root := &cli{}
	root.Publish.stdin = stdin
	prog := program
	prog.Parser = func(stdout, stderr io.Writer) (*kong.Kong, error) { return newParser(root, stdout, stderr) }
	var out, errOut bytes.Buffer
	code = prog.Main(append([]string{"publish"}, args...), &out, &errOut, &invocation{ctx: t.Context(), stdout: &out, stderr: &errOut})
	return code, out.String(), errOut.String()
}

// numberedLines is {"n":from} to {"n":to}, one a line; line big, if in
// range, carries pad bytes more.
func numberedLines(from, to, big, pad int) string {
	var b strings.Builder
	for n := from; n <= to; n++ {
		if n == big {
			fmt.Fprintf(&b, `{"n":%d,"pad":%q}`+"\n", n, strings.Repeat("x", pad))
			continue
		}
		fmt.Fprintf(&b, `{"n":%d}`+"\n", n)
	}
	return b.String()
}

// storedNs is the "n" of every message in stream, in order.
func storedNs(t *testing.T, js jetstream.JetStream, stream string) []int {
	t.Helper()
	s, err := js.Stream(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var ns []int
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatalf("seq %d: %v", seq, err)
		}
		var v struct{ N int }
		if err := json.Unmarshal(m.Data, &v); err != nil {
			t.Fatalf("seq %d: %v", seq, err)
		}
		ns = append(ns, v.N)
	}
	return ns
}

var publishedCount = regexp.MustCompile(`published (\d+) messages`)

// Issue 42, item 9: a streamed publish whose line 6 is over the server's
// max_payload stops there. What it prints (the acks on stdout, the count
// and the line on stderr) is what the stream holds: lines 1-5, nothing
// after line 6; and resuming from line 6, fixed, stores each line once.
func TestPublishStreamStopsAtLineOverMaxPayload(t *testing.T) {
	t.Parallel()
	for _, asJSON := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%t", asJSON), func(t *testing.T) {
			t.Parallel()
			srv := consumertest.RunServerWithOptions(t, &server.Options{MaxPayload: 1024})
			_, js := consumertest.Connect(t, srv)
			consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.>"}, Duplicates: time.Minute})
			args := []string{"--nats", srv.ClientURL(), "--subject", "ev.x", "--log-level", "error"}
			if asJSON {
				args = append(args, "--json")
			}

			code, stdout, stderr := runPublish(t, strings.NewReader(numberedLines(1, 20, 6, 2048)), args...)
			stored := storedNs(t, js, "EV")
			if code != exitFailure {
				t.Fatalf("exit %d with line 6 over max_payload, want %d; stderr %q", code, exitFailure, stderr)
			}
			acks := 0
			for line := range strings.Lines(stdout) {
				if asJSON {
					var a struct{ Seq uint64 }
					if err := json.Unmarshal([]byte(line), &a); err != nil || a.Seq == 0 {
						t.Fatalf("stdout line %q is not an ack: %v", line, err)
					}
				}
				acks++
			}
			m := publishedCount.FindStringSubmatch(stderr)
			if m == nil {
				t.Fatalf("stderr says no count: %q", stderr)
			}
			printed, _ := strconv.Atoi(m[1])
			if printed != len(stored) || acks != len(stored) {
				t.Fatalf("printed %d messages and %d acks, the stream holds %d (n=%v); stderr %q", printed, acks, len(stored), stored, stderr)
			}
			if fmt.Sprint(stored) != "[1 2 3 4 5]" || !strings.Contains(stderr, "line 6") {
				t.Fatalf("stored n=%v, stderr %q: want lines 1-5 stored and line 6 named", stored, stderr)
			}

			// The user fixes line 6 and sends lines 6-20 again, new ULIDs.
			code, _, stderr = runPublish(t, strings.NewReader(numberedLines(6, 20, 0, 0)), args...)
			if code != exitOK {
				t.Fatalf("resume from line 6: exit %d, stderr %q", code, stderr)
			}
			if got, want := fmt.Sprint(storedNs(t, js, "EV")), fmt.Sprint(numbers(1, 20)); got != want {
				t.Fatalf("after resuming from line 6 the stream holds n=%s, want %s", got, want)
			}
		})
	}
}

// numbers is from, from+1, ..., to.
func numbers(from, to int) []int {
	var ns []int
	for n := from; n <= to; n++ {
		ns = append(ns, n)
	}
	return ns
}
