package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/internal/table"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/status"
)

// status fits a screen of 100 columns: long values (the outbox counts, a
// problem) wrap under their label instead of widening a column for every
// line, and nothing of them is lost.
func TestStatusFitsOneHundredColumns(t *testing.T) {
	t.Parallel()
	plan := ackwait.Plan{}.WithDefaults()
	problems := []string{
		refusal("PAYMENTS", "jetledger", 100, &ackwait.TooShortError{Field: "AckWait", Have: 3 * time.Second, Need: plan.AckWait(), Plan: plan}).Error(),
		"connect to NATS at nats://127.0.0.1:1: nats: no servers available for connection (is a server running there? 'jetledger run' without --nats starts one)",
	}
	outbox := map[ledger.Status]int64{}
	for _, s := range ledger.Statuses {
		outbox[s] = 1_000_000_000
	}
	rep := statusReport{Report: status.Report{
		Stream:   &status.Stream{Name: "PAYMENTS", FirstSeq: 1, LastSeq: 1 << 40, Messages: 1 << 40, DuplicateWindow: 2 * time.Minute},
		Consumer: &status.Consumer{Name: "jetledger", AckWait: 3 * time.Second, PlanAckWait: plan.AckWait(), Pending: 1 << 30, AckPending: 1000, Redelivered: 1000, AckFloorSeq: 1 << 40},
		Ledger:   &ledger.Stats{Path: "/var/lib/jetledger/payments.db", Processed: 1 << 40, SizeBytes: 1 << 40, Oldest: time.Now()},
		Outbox:   outbox,
	}, Problems: problems}
	var out bytes.Buffer
	printStatus(&out, rep)
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		if n := utf8.RuneCountInString(line); n > status.TextWidth {
			t.Errorf("a line of %d columns:\n%s", n, line)
		}
	}
	words := strings.Join(strings.Fields(out.String()), " ")
	for _, p := range problems {
		if !strings.Contains(words, strings.Join(strings.Fields(p), " ")) {
			t.Errorf("the output lost part of the problem %q:\n%s", p, out.String())
		}
	}
	if !strings.Contains(words, "suppressed 1000000000") {
		t.Errorf("the outbox counts are cut:\n%s", out.String())
	}
}

// A table cuts a long cell and escapes what would break its lines; --json
// and `dlq show` keep the whole value. `dlq discard --json` prints JSON.
func TestDeadLetterWithLongIDKeepsTheTableReadable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "l.db")
	st, err := ledger.Open(db, ledger.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	id := strings.Repeat("x", 5000)
	err = st.RecordDeadLetters(ctx, []ledger.DeadLetter{{MessageID: id, Stream: "EV", Sequence: 1, Subject: "ev.a",
		Payload: []byte(`{}`), Reason: "line one\n\tline two", Deliveries: 1}})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runMain("dlq", "list", "--db", db)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != exitOK || len(lines) != 2 || strings.Contains(out, id) || !strings.Contains(lines[1], `line one\n\tline two`) {
		t.Fatalf("dlq list: exit %d (%s)\n%s", code, errOut, out)
	}
	if n := utf8.RuneCountInString(lines[1]); n > 7*(table.MaxCell+2)+table.MaxLastCell {
		t.Fatalf("a row of %d columns", n)
	}
	var listed []ledger.DeadLetter
	if code, out, _ := runMain("dlq", "list", "--db", db, "--json"); code != exitOK || json.Unmarshal([]byte(out), &listed) != nil ||
		len(listed) != 1 || listed[0].MessageID != id {
		t.Fatalf("dlq list --json: exit %d\n%.300s", code, out)
	}
	if code, out, _ := runMain("dlq", "show", "1", "--db", db); code != exitOK || !strings.Contains(out, id) {
		t.Fatalf("dlq show: exit %d", code)
	}
	var discarded struct{ Discarded int64 }
	if code, out, _ := runMain("dlq", "discard", "1", "--db", db, "--json"); code != exitOK ||
		json.Unmarshal([]byte(out), &discarded) != nil || discarded.Discarded != 1 {
		t.Fatalf("dlq discard --json: exit %d\n%s", code, out)
	}
}

func TestCell(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{in: "short", want: "short"},
		{in: strings.Repeat("é", table.MaxCell), want: strings.Repeat("é", table.MaxCell)},
		{in: strings.Repeat("é", table.MaxCell+1), want: strings.Repeat("é", table.MaxCell-1) + "…"},
		{in: "a\tb\nc", want: `a\tb\nc`},
		{in: "\xff", want: `\xff`},
	}
	for _, tt := range tests {
		if got := table.Cell(tt.in, table.MaxCell); got != tt.want {
			t.Errorf("cell(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
