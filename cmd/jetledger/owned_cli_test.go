package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
)

// The binary's row commands, run with --db on an owned partition's file
// (the owner's host), would write the file without its changelog, and the
// host that takes over would act on the rows as they were: `outbox cancel`
// of a queued effect and `dlq discard` of a dead letter are refused, naming
// why, and the file is unchanged.
func TestRowCommandsRefuseAnOwnedLedger(t *testing.T) {
	ctx := context.Background()
	s := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, s)
	dir := t.TempDir()
	log, err := changelog.Ensure(ctx, js, changelog.Config{Stream: "PAY", Durable: "pay-p0"})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "ledger-p0.db")
	owner, err := ledger.Open(path, ledger.Config{Changelog: log})
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	if err := owner.TakeOver(ctx, log.Instance(), "a", 0, 0); err != nil {
		t.Fatal(err)
	}
	var id string
	if _, err := owner.ApplyBatch(ctx, []ledger.Delivery{{MessageID: "m1", Stream: "PAY", Sequence: 1, Subject: "pay", Data: []byte(`{}`)}},
		func(ctx context.Context, tx *ledger.Tx, _ ledger.Delivery) error {
			var err error
			id, err = tx.Enqueue(ctx, "hook", []byte(`{"charge":1}`))
			return err
		}, ledger.Budget{Work: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := owner.RecordDeadLetters(ctx, []ledger.DeadLetter{{MessageID: "m2", Stream: "PAY", Sequence: 2, Subject: "pay", Payload: []byte(`{}`), Reason: "poison", Deliveries: 5}}); err != nil {
		t.Fatal(err)
	}
	dls, err := owner.DeadLetters(ctx, 0)
	if err != nil || len(dls) != 1 {
		t.Fatal(dls, err)
	}
	for _, args := range [][]string{{"outbox", "cancel", id, "--db", path}, {"dlq", "discard", "1", "--db", path}} {
		code, out, errOut := runMain(args...)
		if code == 0 || !strings.Contains(errOut, "kept by a changelog") {
			t.Errorf("%v on an owned ledger: exit %d, want a refusal naming the changelog\n%s%s", args, code, out, errOut)
		}
	}
	it, err := owner.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if dls, _ := owner.DeadLetters(ctx, 0); it.Status != ledger.StatusQueued || len(dls) != 1 {
		t.Errorf("the refused commands changed the file: row %s, %d dead letters", it.Status, len(dls))
	}
}

// --changelog (or --standby) is a usage error without a server to keep the
// ledger through, partitioned or not, before anything is created (it was
// dropped without a word when the run was not partitioned).
func TestChangelogNeedsNATS(t *testing.T) {
	for _, extra := range [][]string{{"--changelog"}, {"--standby"}, {"--changelog", "--partitions", "2", "--partition", "0"}} {
		db := filepath.Join(t.TempDir(), "l.db")
		args := append([]string{"run", "--db", db, "--stream", "S", "--subjects", "s.*"}, extra...)
		code, _, errOut := runMain(args...)
		if code != 2 || !strings.Contains(errOut, "--nats") {
			t.Errorf("%v: exit %d, want 2 naming --nats\n%s", extra, code, errOut)
		}
		if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%v: the refused run left %s: %v", extra, db, err)
		}
	}
}
