package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// A look that fails while the index is read (a batch past its deadline, on
// a large ledger just opened) keeps what it read, and the next look goes
// on from there and finds every id: no look starts the whole read again.
func TestAnIndexReadCutShortGoesOnFromWhereItWas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := sealedStore(t, 3*runRows+10)
	reads, failAt := 0, 0
	q := func(query string, args ...any) (*sql.Rows, error) {
		// A whole run's chunks: its read into the filter, not a look at one.
		if strings.Contains(query, "FROM processed_fingerprints WHERE chunk BETWEEN") && args[1].(int64)-args[0].(int64) > 2 {
			if reads++; reads == failAt {
				return nil, errors.New("interrupted")
			}
		}
		return st.reader.QueryContext(ctx, query, args...)
	}
	x := &st.ids
	for _, fail := range []int{2, 3} {
		failAt = fail
		if _, err := x.candidates(q, []string{"id-00000001"}); err == nil {
			t.Fatalf("the look failing at run %d did not fail", fail)
		}
	}
	if reads != 3 {
		t.Fatalf("the runs were read %d times over two failed looks; want 3 (one each, the first kept)", reads)
	}
	failAt = 0
	ids := []string{"id-00000001", fmt.Sprintf("id-%08d", runRows+5), fmt.Sprintf("id-%08d", 2*runRows+5), fmt.Sprintf("id-%08d", 3*runRows+10)}
	found, err := st.lookupIDs(q, ids)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if found[id] == nil {
			t.Errorf("%s not found after the read went on", id)
		}
	}
	if reads != 5 {
		t.Errorf("the runs were read %d times in all; want 5 (the second and third once more)", reads)
	}
}

// WarmIndex reads the runs and the newest rows on a reader, so the first
// batch after a start finds the index read.
func TestWarmIndexReadsTheIndexBeforeTheFirstBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := sealedStore(t, 2*runRows+7)
	if err := st.WarmIndex(ctx); err != nil {
		t.Fatal(err)
	}
	x := &st.ids
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.loaded || x.partial || len(x.runs) != 2 || len(x.open) != 7 || x.known != 2*runRows+7 {
		t.Fatalf("after WarmIndex: loaded %v, partial %v, %d runs (want 2), %d open rows (want 7), known %d", x.loaded, x.partial, len(x.runs), len(x.open), x.known)
	}
}

// A fingerprint two ids share may have its pairs at the end of one chunk
// and the start of the next: both are read. The greatest fingerprint is
// found too.
func TestChunksOfAFingerprintStraddlingTwoChunks(t *testing.T) {
	r := &idRun{chunk0: 10, los: []uint64{5, 9, 9, 20, ^uint64(0)}}
	for _, c := range []struct {
		fp       uint64
		from, to int64
		ok       bool
	}{
		{4, 0, 0, false},
		{5, 10, 10, true},
		{7, 10, 10, true},
		{9, 10, 12, true}, // may end chunk 10, fill 11, start 12
		{15, 12, 12, true},
		{20, 12, 13, true},
		{^uint64(0), 13, 14, true},
	} {
		from, to, ok := r.chunksOf(c.fp)
		if from != c.from || to != c.to || ok != c.ok {
			t.Errorf("chunksOf(%d) = %d..%d %v, want %d..%d %v", c.fp, from, to, ok, c.from, c.to, c.ok)
		}
	}
}

// sealedStore is a ledger of rows ids id-00000001 on (a tool's rows, as
// the bench's pre-fill writes them), their whole runs sealed.
func sealedStore(t *testing.T, rows int) *Store {
	t.Helper()
	ctx := context.Background()
	st, err := Open(filepath.Join(t.TempDir(), "l.db"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.writer.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
		INSERT INTO processed_messages (message_id, stream, stream_seq, last_seq, subject, payload_sha256, processed_at, last_seen_at)
		SELECT printf('id-%08d', i), 'S', i, i, 's', randomblob(32), 0, 0 FROM n`, rows); err != nil {
		t.Fatal(err)
	}
	if n, err := st.SealRuns(ctx); err != nil || n != rows/runRows {
		t.Fatalf("SealRuns = %d, %v; want %d runs", n, err, rows/runRows)
	}
	return st
}
