package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

// What needs a person is counted per kind, with the oldest one's time:
// review rows from when they went to review, dead letters from when they
// were recorded, conflicts until a person acknowledges them.
func TestAttentionCountsWhatNeedsAPerson(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_700_000_000_000)
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	want := func(review, dead, conflict int64, oldest map[string]time.Time) {
		t.Helper()
		got, err := st.Attention(ctx)
		if err != nil {
			t.Fatal(err)
		}
		counts := map[string]int64{ledger.AttentionReview: review, ledger.AttentionDeadLetter: dead, ledger.AttentionConflict: conflict}
		for _, a := range got {
			if a.Count != counts[a.Kind] || !a.Oldest.Equal(oldest[a.Kind]) {
				t.Fatalf("attention %+v, want count %d oldest %v", a, counts[a.Kind], oldest[a.Kind])
			}
		}
		if len(got) != len(ledger.AttentionKinds) {
			t.Fatalf("attention %+v: want every kind", got)
		}
	}
	want(0, 0, 0, nil)

	first, _ := enqueueWith(t, st, "m1", nil)
	second, _ := enqueueWith(t, st, "m2", nil)
	toReview := func(id string) {
		if _, err := st.Transition(ctx, id, ledger.Claim, ledger.Params{Worker: "w", Lease: time.Minute}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Transition(ctx, id, ledger.Review, ledger.Params{Worker: "w", Reason: "timed out"}); err != nil {
			t.Fatal(err)
		}
	}
	t0 := now.Add(time.Minute)
	now = t0
	toReview(first)
	now = now.Add(time.Minute)
	toReview(second)
	if err := st.RecordDeadLetters(ctx, []ledger.DeadLetter{{MessageID: "d", Stream: "S", Sequence: 9, Subject: "ev", Reason: "bad", Deliveries: 5}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ApplyBatch(ctx, []ledger.Delivery{delivery("c", 10, "a")}, noop, ledger.Budget{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ApplyBatch(ctx, []ledger.Delivery{delivery("c", 11, "other")}, noop, ledger.Budget{}); err != nil {
		t.Fatal(err)
	}
	want(2, 1, 1, map[string]time.Time{ledger.AttentionReview: t0, ledger.AttentionDeadLetter: now, ledger.AttentionConflict: now})

	cs, err := st.Conflicts(ctx, 0)
	if err != nil || len(cs) != 1 {
		t.Fatalf("conflicts %+v, %v", cs, err)
	}
	if err := st.AcknowledgeConflict(ctx, cs[0].ID, ledger.Audit{Who: "ops@example", From: "test", Note: "the sender reused the id: refunded by hand"}); err != nil {
		t.Fatal(err)
	}
	if err := st.AcknowledgeConflict(ctx, cs[0].ID, ledger.Audit{Who: "ops@example", Note: "again"}); !errors.Is(err, ledger.ErrAlreadySettled) {
		t.Fatalf("a second acknowledgement: %v, want ErrAlreadySettled", err)
	}
	if err := st.AcknowledgeConflict(ctx, 999, ledger.Audit{Who: "ops@example"}); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("an unknown conflict: %v, want ErrNotFound", err)
	}
	if cs, _ = st.Conflicts(ctx, 0); cs[0].Acknowledged.IsZero() || cs[0].By != "ops@example" || cs[0].Note == "" {
		t.Fatalf("the acknowledged conflict lists as %+v", cs[0])
	}
	want(2, 1, 0, map[string]time.Time{ledger.AttentionReview: t0, ledger.AttentionDeadLetter: now})
	if rec, err := st.AuditOf(ctx, fmt.Sprintf("conflict %d", cs[0].ID)); err != nil || len(rec) != 1 || rec[0].Action != "acknowledge" || rec[0].Who != "ops@example" {
		t.Fatalf("the acknowledgement's record: %v %+v, want one", err, rec)
	}
}

// A ledger within NearCapShare of its MaxSizeBytes needs a person: at the
// cap every commit fails.
func TestAttentionSaysALedgerNearItsCap(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "l.db")
	st, err := ledger.Open(path, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// Past MinSizeBytes, the smallest cap, so that a cap a page above it is one.
	if _, err := st.DB().Exec(`CREATE TABLE pad (b BLOB); INSERT INTO pad VALUES (zeroblob(100000))`); err != nil {
		t.Fatal(err)
	}
	stats, err := st.Stats(context.Background())
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	near := func(cap int64) int64 {
		st, err := ledger.Open(path, ledger.Config{MaxSizeBytes: cap})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		as, err := st.Attention(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return as[len(as)-1].Count
	}
	if n := near(stats.SizeBytes * 2); n != 0 {
		t.Fatalf("at half its cap: near_cap %d, want 0", n)
	}
	if stats.SizeBytes+4096 < ledger.MinSizeBytes {
		t.Fatalf("the ledger is %d bytes, under the smallest cap", stats.SizeBytes)
	}
	if n := near(stats.SizeBytes + 4096); n != 1 {
		t.Fatalf("a page short of its cap: near_cap %d, want 1", n)
	}
}

// A dead letter's id is never given again: the newest discarded, the next
// one recorded gets a new id, so an action on the old id (from a list seen
// earlier) finds nothing rather than another dead letter.
func TestADeadLettersIDIsNeverGivenAgain(t *testing.T) {
	t.Parallel()
	st := open(t, filepath.Join(t.TempDir(), "l.db"), ledger.Config{})
	ctx := context.Background()
	record := func(seq uint64) int64 {
		t.Helper()
		if err := st.RecordDeadLetters(ctx, []ledger.DeadLetter{{MessageID: fmt.Sprint("m", seq), Stream: "S", Sequence: seq, Subject: "ev", Reason: "bad"}}); err != nil {
			t.Fatal(err)
		}
		dls, err := st.DeadLetters(ctx, 0)
		if err != nil || len(dls) == 0 {
			t.Fatal(dls, err)
		}
		return dls[len(dls)-1].ID
	}
	first := record(1)
	if err := st.DiscardDeadLetter(ctx, first); err != nil {
		t.Fatal(err)
	}
	if next := record(2); next == first {
		t.Fatalf("the next dead letter took the id %d of the one discarded", first)
	}
	if _, err := st.DeadLetter(ctx, first); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("the discarded id: %v, want ErrNotFound", err)
	}
}

// An id seen in two streams pins its last_seq (no sequence): the highest
// sequence the ledger has seen leaves it out, or a copy holding one would
// seem to hold every message the durable acknowledged.
func TestSeenLeavesOutAPinnedSequence(t *testing.T) {
	t.Parallel()
	st := open(t, filepath.Join(t.TempDir(), "l.db"), ledger.Config{})
	ctx := context.Background()
	if _, err := st.DB().ExecContext(ctx, `INSERT INTO processed_messages (message_id, stream, stream_seq, subject, payload_sha256, processed_at, last_seq)
		VALUES ('a', 'S', 7, 's', x'00', 0, 9223372036854775807), ('b', 'S', 5, 's', x'00', 0, 9)`); err != nil {
		t.Fatal(err)
	}
	if seen, err := st.Seen(ctx); err != nil || seen != 9 {
		t.Fatalf("seen %d, %v; want 9", seen, err)
	}
}

// A dead letter removed (discarded, requeued) was seen: the highest stream
// sequence the ledger has seen keeps it, or a copy whose newest dead letter
// a person discarded would seem to lack that acknowledged message, and no
// copy of its partition would own it again (a long nemesis schedule).
func TestSeenKeepsADeadLetterRemoved(t *testing.T) {
	t.Parallel()
	st := open(t, filepath.Join(t.TempDir(), "l.db"), ledger.Config{})
	ctx := context.Background()
	if err := st.RecordDeadLetters(ctx, []ledger.DeadLetter{{Stream: "S", Sequence: 25, Subject: "ev", Reason: "no Nats-Msg-Id"}}); err != nil {
		t.Fatal(err)
	}
	dls, err := st.DeadLetters(ctx, 0)
	if err != nil || len(dls) != 1 {
		t.Fatal(dls, err)
	}
	if err := st.DiscardDeadLetter(ctx, dls[0].ID); err != nil {
		t.Fatal(err)
	}
	if seen, err := st.Seen(ctx); err != nil || seen != 25 {
		t.Fatalf("seen %d, %v; want 25", seen, err)
	}
	if err := st.DiscardDeadLetter(ctx, dls[0].ID); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("discarded again: %v, want ErrNotFound", err)
	}
}
