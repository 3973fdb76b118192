package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jetledger/jetledger/ledger"
)

// A ledger with rows that need a person: status says ATTENTION with how
// many, where and what to do. With no server to read, a failure, it exits
// 1: a failure outranks attention (exit 3, TestStatusReadsEveryPartitionsLedger);
// settled, the line goes.
func TestStatusSaysAttentionEvenWhenItFails(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "l.db")
	st, err := ledger.Open(db, ledger.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := st.RecordDeadLetters(ctx, []ledger.DeadLetter{{MessageID: "d", Stream: "S", Sequence: 3, Subject: "ev", Reason: "bad", Deliveries: 5}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	code, stdout, stderr := runMain("status", "--db", db)
	if code != exitFailure || !strings.Contains(stdout, "ATTENTION") || !strings.Contains(stdout, "1 dead letters in "+db) || !strings.Contains(stdout, "dlq list") {
		t.Fatalf("exit %d, want %d, with an ATTENTION line naming the dead letter, its ledger and what to do:\n%s\n%s", code, exitFailure, stdout, stderr)
	}
	code, stdout, _ = runMain("status", "--db", db, "--json")
	if code != exitFailure || !strings.Contains(stdout, `"attention"`) || !strings.Contains(stdout, `"kind": "dead_letter"`) {
		t.Fatalf("--json: exit %d:\n%s", code, stdout)
	}

	st, err = ledger.Open(db, ledger.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	dls, _ := st.DeadLetters(ctx, 0)
	if err := st.DiscardDeadLetter(ctx, dls[0].ID); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if code, stdout, stderr := runMain("status", "--db", db); code != exitFailure || strings.Contains(stdout, "ATTENTION") {
		t.Fatalf("settled: exit %d:\n%s\n%s", code, stdout, stderr)
	}
}
