package main

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/requeue"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/publisher"
	"github.com/nats-io/nats.go/jetstream"
)

// ownedDeadLetter is an owned partition's ledger at path, kept by its
// changelog on the server of js, holding dead letter 1: message m, which
// it publishes into PAY, recorded by the owner as run records one. The
// owner stays open, as on the owner's host.
func ownedDeadLetter(t *testing.T, js jetstream.JetStream, path string, m publisher.Message) (*ledger.Store, *changelog.Log) {
	t.Helper()
	ctx := t.Context()
	log, err := changelog.Ensure(ctx, js, changelog.Config{Stream: "PAY", Durable: "pay-p0"})
	if err != nil {
		t.Fatal(err)
	}
	owner, err := ledger.Open(path, ledger.Config{Changelog: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { owner.Close() })
	if err := owner.TakeOver(ctx, log.Instance(), "a", 0, 0); err != nil {
		t.Fatal(err)
	}
	p, err := publisher.New(js, publisher.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ack, err := p.Publish(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, ack.Stream)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := s.GetMsg(ctx, ack.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	if err := owner.RecordDeadLetters(ctx, []ledger.DeadLetter{{MessageID: ack.ID, Stream: ack.Stream, Sequence: ack.Sequence,
		Subject: raw.Subject, Headers: raw.Header, Payload: raw.Data, Reason: "poison", Deliveries: 5}}); err != nil {
		t.Fatal(err)
	}
	return owner, log
}

// `dlq requeue` on an owned partition's file (the owner's host, without
// --changelog) may not remove the dead letter, so it must not publish the
// copy either: the owner would apply it and the dead letter would stay,
// and every further requeue would publish again (issue 42, item 14). It is
// refused before anything is published (exit 1, ledger.ErrChangelogCopy
// naming the log), and the stream and the dead letter are as they were.
func TestRequeueOnAnOwnedLedgerPublishesNothing(t *testing.T) {
	t.Parallel()
	s := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, s)
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "PAY", Subjects: []string{"pay.*"}, Duplicates: 100 * time.Millisecond})
	path := filepath.Join(t.TempDir(), "ledger-p0.db")
	owner, log := ownedDeadLetter(t, js, path, publisher.Message{Subject: "pay.alice", ID: "evt-1", Data: []byte(`{"amount":1}`)})
	before := messagesIn(t, js, "PAY")

	// Requeued as an operator would, again while PAY's duplicate window
	// holds the id: a copy published into the window is dropped by the
	// stream, which would hide a publish made before the refusal.
	args := []string{"dlq", "requeue", "--db", path, "--nats", s.ClientURL(), "1"}
	var err error
	consumertest.Eventually(t, 10*time.Second, "requeue outside PAY's duplicate window", func() bool {
		err = runCommand(t, args...)
		return !errors.Is(err, requeue.ErrStillInWindow)
	})
	if !errors.Is(err, ledger.ErrChangelogCopy) || !strings.Contains(err.Error(), log.Instance()) {
		t.Errorf("requeue on an owned ledger: %v, want ledger.ErrChangelogCopy naming changelog %s", err, log.Instance())
	}
	if code, out, errOut := runMain(args...); code != exitFailure {
		t.Errorf("requeue on an owned ledger: exit %d, want %d\n%s%s", code, exitFailure, out, errOut)
	}
	if n := messagesIn(t, js, "PAY"); n != before {
		t.Errorf("PAY holds %d messages after the refused requeues, want %d: a copy was published", n, before)
	}
	if dls, err := owner.DeadLetters(context.Background(), 0); err != nil || len(dls) != 1 {
		t.Errorf("dead letters after the refused requeues: %v (%v), want the one kept", dls, err)
	}
}

// The dead letter goes only after its copy is in the stream, so a delete
// that fails then (a full disk, a lock held past the busy timeout; here a
// trigger makes SQLite refuse it) leaves a published copy and the dead
// letter: the requeue exits 1 with the delete's error, naming where the
// copy is and how to remove the dead letter without publishing again.
func TestRequeueThatCannotRemoveTheDeadLetterSaysTheCopyIsIn(t *testing.T) {
	t.Parallel()
	s := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, s)
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "PAY", Subjects: []string{"pay.*"}, Duplicates: 100 * time.Millisecond})
	db := filepath.Join(t.TempDir(), "one.db")
	id := deadLettered(t, js, db, "PAY", publisher.Message{Subject: "pay.alice", ID: "evt-1", Data: []byte(`{"amount":1}`)})
	st, err := ledger.Open(db, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().Exec(`CREATE TRIGGER keep_dead_letters BEFORE DELETE ON dead_letters BEGIN SELECT RAISE(ABORT, 'kept'); END`); err != nil {
		t.Fatal(err)
	}
	st.Close()

	var got error
	consumertest.Eventually(t, 10*time.Second, "requeue outside PAY's duplicate window", func() bool {
		got = runCommand(t, "dlq", "requeue", "--db", db, "--nats", s.ClientURL(), strconv.FormatInt(id, 10))
		return !errors.Is(got, requeue.ErrStillInWindow)
	})
	if !errors.Is(got, ledger.ErrConstraint) {
		t.Fatalf("requeue whose delete fails: %v, want the delete's ledger.ErrConstraint", got)
	}
	if msg := got.Error(); !strings.Contains(msg, "PAY seq 2") || !strings.Contains(msg, "dlq discard "+strconv.FormatInt(id, 10)) {
		t.Errorf("requeue whose delete fails: %q, want the copy's place (PAY seq 2) and the discard to run", msg)
	}
	if n := messagesIn(t, js, "PAY"); n != 2 {
		t.Errorf("PAY holds %d messages, want the original and the one copy", n)
	}
	if n := deadLetters(t, db); n != 1 {
		t.Errorf("%d dead letters, want the one the delete failed on", n)
	}
}
