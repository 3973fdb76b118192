package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// lockedBuffer is standard error shared by a running command and the test
// reading its log.
type lockedBuffer = consumertest.LogBuffer

// runProc is a command run in process until stop, or until it returns.
type runProc struct {
	cancel context.CancelFunc
	done   chan int
	stderr *lockedBuffer
}

func startCommand(t *testing.T, args ...string) *runProc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &runProc{cancel: cancel, done: make(chan int, 1), stderr: &lockedBuffer{}}
	go func() { p.done <- mainExit(ctx, args, &bytes.Buffer{}, p.stderr) }()
	t.Cleanup(func() { p.stop(t) })
	return p
}

// wait returns the exit code once the command returns by itself, failing
// the test if it has not within a minute.
func (p *runProc) wait(t *testing.T) int {
	t.Helper()
	select {
	case code := <-p.done:
		p.done <- code
		return code
	case <-time.After(time.Minute):
		p.cancel()
		t.Fatalf("the command did not return; stderr:\n%s", p.stderr)
		return -1
	}
}

// failIfExited fails the test if the command has returned: a command that
// should still be running has failed.
func (p *runProc) failIfExited(t *testing.T) {
	t.Helper()
	select {
	case code := <-p.done:
		p.done <- code
		t.Fatalf("the command returned, exit %d; stderr:\n%s", code, p.stderr)
	default:
	}
}

// stop cancels the command (SIGINT) and returns its exit code.
func (p *runProc) stop(t *testing.T) int {
	t.Helper()
	p.cancel()
	return p.wait(t)
}

// record returns the first JSON log record that match accepts: tests read
// a record's fields, not its wording.
func (p *runProc) record(match func(map[string]any) bool) (map[string]any, bool) {
	for _, r := range p.records() {
		if match(r) {
			return r, true
		}
	}
	return nil, false
}

// logRecord is one JSON log line.
type logRecord map[string]any

// records parses the JSON log lines of standard error.
func (p *runProc) records() []logRecord {
	var out []logRecord
	sc := bufio.NewScanner(strings.NewReader(p.stderr.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r logRecord
		if json.Unmarshal(sc.Bytes(), &r) == nil {
			out = append(out, r)
		}
	}
	return out
}

// withMsg returns the records logged with message msg.
func withMsg(recs []logRecord, msg string) []logRecord {
	var out []logRecord
	for _, r := range recs {
		if r["msg"] == msg {
			out = append(out, r)
		}
	}
	return out
}

// duration reads a duration attribute of a JSON record ("19.1s").
func (r logRecord) duration(key string) time.Duration {
	s, _ := r[key].(string)
	d, _ := time.ParseDuration(s)
	return d
}

func consumerConfig(t *testing.T, js jetstream.JetStream, stream, durable string) (jetstream.ConsumerConfig, bool) {
	t.Helper()
	cons, err := js.Consumer(context.Background(), stream, durable)
	if err != nil {
		return jetstream.ConsumerConfig{}, false
	}
	return cons.CachedInfo().Config, true
}

// run creates its durable with the plan's AckWait and metadata; run with a
// longer plan (--batch 10 → 500, --deadline 1s → 3s) raises that AckWait
// itself, logs both values at info, and consumes.
func TestRunRaisesTheAckWaitOfItsOwnDurable(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	dir := t.TempDir()
	db := filepath.Join(dir, "l.db")
	args := []string{"run", "--nats", srv.ClientURL(), "--db", db, "--stream", "EV", "--subjects", "ev.>"}
	small := ackwait.Plan{Deadline: time.Second, BatchSize: 10}.WithDefaults()
	large := ackwait.Plan{Deadline: 3 * time.Second, BatchSize: 500}.WithDefaults()

	startUntilBound(t, append(args, "--batch", "10", "--deadline", "1s")...)
	created, _ := consumerConfig(t, js, "EV", consumer.DurableDefault)
	if created.AckWait != small.AckWait() || created.Metadata[consumer.MetadataVersion] != version() ||
		created.Metadata[consumer.MetadataPlan] != consumer.PlanMetadata(small) || !consumer.MadeByJetledger(created) {
		t.Fatalf("created durable: AckWait %s, metadata %v", created.AckWait, created.Metadata)
	}

	second := startCommand(t, append(args, "--batch", "500", "--deadline", "3s", "--log-format", "json")...)
	ctx := context.Background()
	for _, id := range []string{"a", "b", "c"} {
		if _, err := js.Publish(ctx, "ev.x", []byte(`{}`), jetstream.WithMsgID(id)); err != nil {
			t.Fatal(err)
		}
	}
	consumertest.Eventually(t, 30*time.Second, "the second run acked every message", func() bool {
		second.failIfExited(t)
		cons, err := js.Consumer(ctx, "EV", consumer.DurableDefault)
		if err != nil {
			return false
		}
		info, err := cons.Info(ctx)
		return err == nil && info.AckFloor.Stream == 3 && info.NumAckPending == 0
	})
	if code := second.stop(t); code != exitOK {
		t.Fatalf("second run: exit %d\n%s", code, second.stderr)
	}
	raised, _ := consumerConfig(t, js, "EV", consumer.DurableDefault)
	if raised.AckWait != large.AckWait() || raised.Metadata[consumer.MetadataPlan] != consumer.PlanMetadata(large) {
		t.Fatalf("after --batch 500 --deadline 3s: AckWait %s (want %s), plan %q", raised.AckWait, large.AckWait(), raised.Metadata[consumer.MetadataPlan])
	}
	var logged []logRecord
	for _, r := range second.records() {
		if _, ok := r["ack_wait_from"]; ok {
			logged = append(logged, r)
		}
	}
	if len(logged) != 1 || logged[0]["level"] != "INFO" || logged[0].duration("ack_wait_from") != small.AckWait() ||
		logged[0].duration("ack_wait_to") != large.AckWait() {
		t.Fatalf("the raise was logged as %v, want one info record from %s to %s", logged, small.AckWait(), large.AckWait())
	}
	st, err := ledger.Open(db, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var n int
	if err := st.DB().QueryRow(`SELECT count(*) FROM events`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("events: %d, %v; want 3", n, err)
	}
}

// A durable jetledger did not create, or created before it recorded so, is
// refused (exit 1) with the exact nats CLI command that fixes it, and left
// as it is.
func TestRunRefusesADurableItDidNotCreate(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.>"}})
	plan := ackwait.Plan{BatchSize: 10}.WithDefaults()
	tests := []struct {
		name    string
		cfg     jetstream.ConsumerConfig
		err     error  // what run refuses it with
		command string // the fix it prints
	}{
		{name: "by hand", cfg: jetstream.ConsumerConfig{Durable: "hand", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 3 * time.Second},
			err:     &ackwait.TooShortError{Field: "AckWait", Have: 3 * time.Second, Need: plan.AckWait(), Plan: plan},
			command: "nats consumer edit EV hand --wait " + plan.AckWait().String()},
		{name: "small MaxAckPending", cfg: jetstream.ConsumerConfig{Durable: "narrow", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Hour, MaxAckPending: 5},
			err:     ackwait.ErrMaxAckPending,
			command: "nats consumer edit EV narrow --max-pending 10"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			if _, err := js.CreateConsumer(ctx, "EV", tt.cfg); err != nil {
				t.Fatal(err)
			}
			p := startCommand(t, "run", "--nats", srv.ClientURL(), "--db", filepath.Join(t.TempDir(), "l.db"), "--stream", "EV",
				"--durable", tt.cfg.Durable, "--batch", "10", "--log-format", "json")
			if code := p.wait(t); code != exitFailure {
				t.Fatalf("exit %d, want %d\n%s", code, exitFailure, p.stderr)
			}
			lines := strings.Split(strings.TrimSuffix(p.stderr.String(), "\n"), "\n")
			want := "jetledger run: " + refusal("EV", tt.cfg.Durable, plan.BatchSize, tt.err).Error()
			if last := lines[len(lines)-1]; last != want || !strings.Contains(last, tt.command+";") {
				t.Fatalf("stderr ends with\n%s\nwant\n%s\n(with %q)", last, want, tt.command)
			}
			got, _ := consumerConfig(t, js, "EV", tt.cfg.Durable)
			if got.AckWait != tt.cfg.AckWait || (tt.cfg.MaxAckPending > 0 && got.MaxAckPending != tt.cfg.MaxAckPending) {
				t.Fatalf("the refused durable was changed: AckWait %s, MaxAckPending %d", got.AckWait, got.MaxAckPending)
			}
		})
	}
}
