package main

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/stream"
	"github.com/nats-io/nats.go/jetstream"
)

// A ledger names the instance of the stream run served (name and creation
// time): replay and ledger prune pointed at another server whose stream has
// the same name (a wrong --nats) are refused, and nothing is applied or
// pruned by it; a run on a stream made again records the new instance, and
// replay then reads it. Issue 19: "look for every other place that reads the
// stream by name alone".
func TestReplayAndPruneRefuseAnotherInstanceOfTheStream(t *testing.T) {
	t.Parallel()
	ours, other := consumertest.RunServer(t), consumertest.RunServer(t)
	_, js := consumertest.Connect(t, ours)
	_, otherJS := consumertest.Connect(t, other)
	for _, j := range []jetstream.JetStream{js, otherJS} {
		consumertest.CreateStream(t, j, jetstream.StreamConfig{Name: "PAY", Subjects: []string{"pay.>"}})
	}
	publishEvents(t, js, "pay.ours", 3)
	publishEvents(t, otherJS, "pay.theirs", 5)
	db := filepath.Join(t.TempDir(), "l.db")
	run := startCommand(t, "run", "--nats", ours.ClientURL(), "--db", db, "--stream", "PAY", "--log-format", "json")
	ackedThrough(t, js, "PAY", "jetledger", 3)
	if code := run.stop(t); code != exitOK {
		t.Fatalf("run: exit %d\n%s", code, run.stderr)
	}

	rows := func() int64 {
		t.Helper()
		st, err := ledger.Open(db, ledger.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		s, err := st.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return s.Processed
	}
	for _, args := range [][]string{
		{"replay", "--nats", other.ClientURL(), "--db", db, "--to-seq", "5", "--no-effects"},
		{"ledger", "prune", "--nats", other.ClientURL(), "--db", db, "--retention", "0s"},
	} {
		code, out, errOut := runMain(args...)
		if code != exitFailure {
			t.Fatalf("%q on another server's PAY: exit %d, want %d\n%s%s", args, code, exitFailure, out, errOut)
		}
		if n := rows(); n != 3 {
			t.Fatalf("%q on another server's PAY left %d ledger rows, want 3", args, n)
		}
	}
	st, err := ledger.Open(db, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pruner(st, otherJS, streamFlags{Stream: "PAY", Durable: "jetledger"}, retentionFlags{}, nil).Options(context.Background()); !errors.Is(err, stream.ErrNotTheInstance) {
		t.Fatalf("prune options on another server's PAY: %v, want stream.ErrNotTheInstance", err)
	}
	st.Close()

	// Made again on our server: run adopts it, and replay reads it.
	if err := js.DeleteStream(context.Background(), "PAY"); err != nil {
		t.Fatal(err)
	}
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "PAY", Subjects: []string{"pay.>"}})
	publishEvents(t, js, "pay.again", 2)
	run = startCommand(t, "run", "--nats", ours.ClientURL(), "--db", db, "--stream", "PAY", "--log-format", "json")
	ackedThrough(t, js, "PAY", "jetledger", 2)
	if code := run.stop(t); code != exitOK {
		t.Fatalf("run on the stream made again: exit %d\n%s", code, run.stderr)
	}
	if code, out, errOut := runMain("replay", "--nats", ours.ClientURL(), "--db", db, "--no-effects"); code != exitOK {
		t.Fatalf("replay after run adopted the stream made again: exit %d\n%s%s", code, out, errOut)
	}
	if n := rows(); n != 5 {
		t.Fatalf("%d ledger rows, want 5", n)
	}
}
