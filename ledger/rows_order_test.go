package ledger_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

// runRows is ledger.runRows: the seqs a sealed run of fingerprints covers.
const runRows = 1 << 16

// randomIDs applies n messages of random ids in batches of 500 and returns
// the ids, in order; the message of id has payload id.
func randomIDs(t *testing.T, st *ledger.Store, n int, from uint64) []string {
	t.Helper()
	ids := make([]string, 0, n)
	for len(ids) < n {
		batch := make([]ledger.Delivery, min(500, n-len(ids)))
		for i := range batch {
			var b [16]byte
			rand.Read(b[:])
			id := hex.EncodeToString(b[:])
			ids = append(ids, id)
			batch[i] = delivery(id, from+uint64(len(ids)), id)
		}
		rs, err := st.ApplyBatch(context.Background(), batch, noop, ledger.Budget{})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rs {
			if r.Outcome != ledger.Applied {
				t.Fatalf("new id %s: %v %v", batch[i].MessageID, r.Outcome, r.Err)
			}
		}
	}
	return ids
}

// processed_messages keeps its rows in arrival order, and an id is found
// again wherever its row is: above the sealed runs, in any of them, or in
// the rows of the old layout; and after the ledger is opened again, when
// the index is read back from the file. Same id, other payload, is still a
// conflict.
func TestAnIDIsFoundInEveryPartOfTheLedger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "l.db")
	st, err := ledger.Open(file, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { st.Close() }()
	legacy := sha256.Sum256([]byte("legacy-1"))
	if _, err := st.DB().ExecContext(ctx, `INSERT INTO processed_messages_v1
		(message_id, stream, stream_seq, subject, payload_sha256, processed_at, last_seq, last_seen_at) VALUES ('legacy-1', 'S', 1, 's', ?, 0, 1, 0)`, legacy[:]); err != nil {
		t.Fatal(err)
	}
	ids := randomIDs(t, st, 3*runRows+1000, 10)
	if n := count(t, st, `SELECT count(*) FROM processed_runs`); n != 3 {
		t.Fatalf("%d runs sealed after %d rows, want 3", n, len(ids))
	}
	if n := count(t, st, `SELECT count(*) FROM processed_messages WHERE seq <> stream_seq - 10`); n != 0 {
		t.Fatalf("%d rows out of arrival order", n)
	}
	seq := uint64(1_000_000)
	check := func(when string) {
		t.Helper()
		// ids[runRows-1]: the first run's last row, which the batch that
		// sealed the run wrote.
		olds := []string{ids[0], ids[runRows-1], ids[runRows+7], ids[2*runRows+runRows/2], ids[len(ids)-1], "legacy-1"}
		var batch []ledger.Delivery
		for _, id := range olds {
			seq++
			batch = append(batch, delivery(id, seq, id))
		}
		fresh := hex.EncodeToString([]byte(when))
		seq++
		batch = append(batch, delivery(fresh, seq, fresh), delivery(ids[100], seq+1, "another payload"))
		seq++
		rs, err := st.ApplyBatch(ctx, batch, noop, ledger.Budget{})
		if err != nil {
			t.Fatal(err)
		}
		want := []ledger.Outcome{ledger.Duplicate, ledger.Duplicate, ledger.Duplicate, ledger.Duplicate, ledger.Duplicate, ledger.Duplicate, ledger.Applied, ledger.Conflict}
		if got := outcomes(rs); !slices.Equal(got, want) {
			t.Fatalf("%s: outcomes %v, want %v", when, got, want)
		}
		for _, id := range append(olds, fresh) {
			if held, err := st.Holds(ctx, id, 0); err != nil || !held {
				t.Fatalf("%s: holds %s = %v, %v", when, id, held, err)
			}
		}
		if held, err := st.Holds(ctx, "never-applied", 0); err != nil || held {
			t.Fatalf("%s: holds an id never applied = %v, %v", when, held, err)
		}
	}
	check("open")
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err = ledger.Open(file, ledger.Config{}); err != nil {
		t.Fatal(err)
	}
	check("reopened")
}

// A prune drops the runs of fingerprints whose rows are all gone, and
// keeps finding the rows left.
func TestPruneDropsTheRunsItEmptied(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, clock := openAgingStore(t)
	ids := randomIDs(t, st, 2*runRows+100, 0)
	clock.advance(8 * 24 * time.Hour)
	// The first run's rows and half the second's are gone from the stream.
	first := uint64(runRows + runRows/2 + 1)
	res, err := st.Prune(ctx, ledger.PruneOptions{Stream: "S", FirstSeq: first})
	if err != nil || res.Processed != int64(first-1) {
		t.Fatalf("prune: %+v, %v; want %d rows", res, err, first-1)
	}
	if runs, chunks := count(t, st, `SELECT count(*) FROM processed_runs`), count(t, st, `SELECT count(*) FROM processed_fingerprints`); runs != 1 || chunks != (runRows+239)/240 {
		t.Fatalf("after the prune: %d runs, %d chunks of fingerprints; want the second run's alone", runs, chunks)
	}
	batch := []ledger.Delivery{delivery(ids[first], 1, ids[first]), delivery(ids[len(ids)-1], 2, ids[len(ids)-1]), delivery(ids[0], 3, ids[0])}
	rs, err := st.ApplyBatch(ctx, batch, noop, ledger.Budget{})
	if err != nil {
		t.Fatal(err)
	}
	// A pruned id is forgotten: its copies are gone from the stream.
	if got, want := outcomes(rs), []ledger.Outcome{ledger.Duplicate, ledger.Duplicate, ledger.Applied}; !slices.Equal(got, want) {
		t.Fatalf("after the prune: outcomes %v, want %v", got, want)
	}
}

// Rows a tool wrote itself (the bench's pre-fill) are sealed into runs by
// SealRuns, and found through them.
func TestSealRunsSealsTheRowsAToolWrote(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.DB().ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
		INSERT INTO processed_messages (message_id, stream, stream_seq, last_seq, subject, payload_sha256, processed_at, last_seen_at)
		SELECT printf('id-%08d', i), 'S', i, i, 's', randomblob(32), 0, 0 FROM n`, 2*runRows+5); err != nil {
		t.Fatal(err)
	}
	if n, err := st.SealRuns(ctx); err != nil || n != 2 {
		t.Fatalf("SealRuns = %d, %v; want 2 runs", n, err)
	}
	if n, err := st.SealRuns(ctx); err != nil || n != 0 {
		t.Fatalf("SealRuns again = %d, %v; want none", n, err)
	}
	for _, id := range []string{"id-00000001", fmt.Sprintf("id-%08d", runRows+1), fmt.Sprintf("id-%08d", 2*runRows+5)} {
		if held, err := st.Holds(ctx, id, 0); err != nil || !held {
			t.Fatalf("holds %s = %v, %v", id, held, err)
		}
		rs := apply(t, st, noop, delivery(id, 1, "other"))
		if rs[0].Outcome != ledger.Conflict {
			t.Fatalf("%s again: %v, want a conflict (same id, other payload)", id, rs[0].Outcome)
		}
	}
}
