package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/service"
	"github.com/nats-io/nats.go/jetstream"
)

// publishEvents puts n messages with ids on subject.
func publishEvents(t *testing.T, js jetstream.JetStream, subject string, n int) {
	t.Helper()
	for i := range n {
		if _, err := js.Publish(context.Background(), subject, fmt.Appendf(nil, `{"n":%d}`, i),
			jetstream.WithMsgID(fmt.Sprintf("%s-%d", subject, i))); err != nil {
			t.Fatal(err)
		}
	}
}

// ackedThrough waits until durable has acked every message of stream.
func ackedThrough(t *testing.T, js jetstream.JetStream, stream, durable string, seq uint64) {
	t.Helper()
	consumertest.Eventually(t, 30*time.Second, fmt.Sprintf("%s/%s acked through seq %d", stream, durable, seq), func() bool {
		c, err := js.Consumer(context.Background(), stream, durable)
		if err != nil {
			return false
		}
		info, err := c.Info(context.Background())
		return err == nil && info.AckFloor.Stream >= seq && info.NumAckPending == 0
	})
}

// The ledger remembers the stream and durable run served: after one run,
// status, ledger prune and replay find them without --stream and say so;
// a name given still wins.
func TestCommandsReadTheConsumerRunRecorded(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "PAY", Subjects: []string{"pay.>"}})
	publishEvents(t, js, "pay.in", 3)
	db := filepath.Join(t.TempDir(), "l.db")
	run := startCommand(t, "run", "--nats", srv.ClientURL(), "--db", db, "--stream", "PAY", "--durable", "payer", "--log-format", "json")
	ackedThrough(t, js, "PAY", "payer", 3)
	if code := run.stop(t); code != exitOK {
		t.Fatalf("run: exit %d\n%s", code, run.stderr)
	}

	code, out, errOut := runMain("status", "--db", db, "--nats", srv.ClientURL(), "--json")
	var st statusReport
	if err := json.Unmarshal([]byte(out), &st); code != exitOK || err != nil {
		t.Fatalf("status without --stream: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	if st.Serves == nil || *st.Serves != (servesStatus{Stream: "PAY", Durable: "payer", From: fromLedger}) ||
		st.Stream == nil || st.Stream.Name != "PAY" || st.Stream.LastSeq != 3 || st.Consumer == nil || st.Consumer.Name != "payer" {
		t.Fatalf("status without --stream read %+v, %+v, %+v; want PAY/payer from the ledger", st.Serves, st.Stream, st.Consumer)
	}

	code, out, errOut = runMain("ledger", "prune", "--db", db, "--nats", srv.ClientURL(), "--json")
	var pr pruneResult
	if err := json.Unmarshal([]byte(out), &pr); code != exitOK || err != nil || pr.Stream != "PAY" || pr.Durable != "payer" {
		t.Fatalf("ledger prune without --stream: exit %d, %+v, %v\n%s%s", code, pr, err, out, errOut)
	}

	code, out, errOut = runMain("replay", "--db", db, "--nats", srv.ClientURL(), "--json", "--log-level", "error")
	var rr service.ReplayResult
	if err := json.Unmarshal([]byte(out), &rr); code != exitOK || err != nil || rr.UpTo != 3 || rr.Duplicates != 3 || rr.Applied != 0 {
		t.Fatalf("replay without --stream: exit %d, %+v, %v\n%s%s", code, rr, err, out, errOut)
	}

	// A name given wins over the ledger's: this stream does not exist.
	code, out, _ = runMain("status", "--db", db, "--nats", srv.ClientURL(), "--stream", "OTHER", "--json")
	st = statusReport{}
	if err := json.Unmarshal([]byte(out), &st); code != exitFailure || err != nil || st.Serves == nil ||
		*st.Serves != (servesStatus{Stream: "OTHER", Durable: "jetledger", From: fromGiven}) {
		t.Fatalf("status --stream OTHER: exit %d, %v, serves %+v", code, err, st.Serves)
	}
	// The durable alone picks the stream it was recorded with.
	code, out, _ = runMain("status", "--db", db, "--nats", srv.ClientURL(), "--durable", "payer", "--json")
	st = statusReport{}
	if err := json.Unmarshal([]byte(out), &st); code != exitOK || err != nil || st.Serves == nil || st.Serves.Stream != "PAY" {
		t.Fatalf("status --durable payer: exit %d, %v, serves %+v", code, err, st.Serves)
	}
}

// JETLEDGER_STREAM is a name given: it wins over the ledger's. Not parallel:
// the environment is the process's.
func TestStreamFromEnvironmentWinsOverTheLedger(t *testing.T) {
	db := recordConsumers(t, [2]string{"PAY", "jetledger"})
	t.Setenv("JETLEDGER_STREAM", "FROMENV")
	code, out, _ := runMain("status", "--db", db, "--nats", "nats://127.0.0.1:1", "--json")
	var st statusReport
	if err := json.Unmarshal([]byte(out), &st); code != exitFailure || err != nil || st.Serves == nil || st.Serves.Stream != "FROMENV" || st.Serves.From != fromGiven {
		t.Fatalf("status with JETLEDGER_STREAM: exit %d, %v, serves %+v", code, err, st.Serves)
	}
}

// recordConsumers makes a ledger that run recorded these pairs in.
func recordConsumers(t *testing.T, pairs ...[2]string) string {
	t.Helper()
	db := filepath.Join(t.TempDir(), "l.db")
	st, err := ledger.Open(db, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, p := range pairs {
		if err := st.RememberConsumer(context.Background(), p[0], p[1], ""); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// A ledger that served two streams leaves the choice to the user: every
// command that reads it without --stream exits 2 naming both, before it
// connects to anything; --stream settles it.
func TestTwoRecordedStreamsAskWhich(t *testing.T) {
	t.Parallel()
	db := recordConsumers(t, [2]string{"PAY", "jetledger"}, [2]string{"ORDERS", "jetledger"})
	unreachable := "nats://127.0.0.1:1"
	for _, args := range [][]string{
		{"status", "--db", db, "--nats", unreachable},
		{"ledger", "prune", "--db", db, "--nats", unreachable},
		{"replay", "--db", db, "--nats", unreachable},
		{"run", "--db", db, "--nats", unreachable},
	} {
		msg := usageMessage(t, args...)
		for _, want := range []string{"--stream not given", "stream PAY (durable jetledger)", "stream ORDERS (durable jetledger)", "give --stream"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%q: %q does not say %q", args, msg, want)
			}
		}
	}
	// Named, the stream is read (here: the server is not there, exit 1).
	if code, _, errOut := runMain("status", "--db", db, "--nats", unreachable, "--stream", "ORDERS"); code != exitFailure {
		t.Fatalf("status --stream ORDERS: exit %d\n%s", code, errOut)
	}

	db = recordConsumers(t, [2]string{"PAY", "a"}, [2]string{"PAY", "b"})
	msg := usageMessage(t, "status", "--db", db, "--nats", unreachable, "--stream", "PAY")
	for _, want := range []string{"--durable not given", "stream PAY (durable a)", "stream PAY (durable b)", "give --durable"} {
		if !strings.Contains(msg, want) {
			t.Errorf("two durables: %q does not say %q", msg, want)
		}
	}
}

// With no name given and none recorded, the defaults are read, and a stream
// not found says so: that run records the stream it consumes.
func TestNothingRecordedSaysRunRecordsIt(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	db := recordConsumers(t)
	code, out, _ := runMain("status", "--db", db, "--nats", srv.ClientURL(), "--json")
	var st statusReport
	if err := json.Unmarshal([]byte(out), &st); code != exitFailure || err != nil || st.Serves == nil ||
		*st.Serves != (servesStatus{Stream: streamDefault, Durable: "jetledger", From: fromDefault}) {
		t.Fatalf("status: exit %d, %v, serves %+v", code, err, st.Serves)
	}
	if len(st.Problems) == 0 || !strings.Contains(st.Problems[0], "'jetledger run' records the one it consumes") {
		t.Fatalf("the stream not found does not say where its name came from: %q", st.Problems)
	}
	code, _, errOut := runMain("ledger", "prune", "--db", db, "--nats", srv.ClientURL())
	if code != exitFailure || !strings.Contains(errOut, "'jetledger run' records the one it consumes") {
		t.Fatalf("ledger prune: exit %d, %s", code, errOut)
	}
}
