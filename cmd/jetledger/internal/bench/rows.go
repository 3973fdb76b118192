package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jetledger/jetledger/ledger"
	"github.com/oklog/ulid/v2"
)

// The kinds of message id the bench publishes (Config.IDKind).
const (
	// IDULID: ULIDs, in time order, as `jetledger publish` makes them: each
	// batch's ids land next to each other in the ledger's B-trees.
	IDULID = "ulid"
	// IDRandom: 32 random hex digits, as a webhook provider, a UUIDv4
	// publisher or a hash gives: each id of a batch lands on its own leaf.
	IDRandom = "random"
)

// idMaker returns the id of message i of the kind.
func idMaker(kind string) func(i int) string {
	if kind == IDRandom {
		return func(int) string {
			var b [16]byte
			rand.Read(b[:]) //nolint:errcheck // crypto/rand does not fail
			return fmt.Sprintf("%x", b)
		}
	}
	entropy := ulid.Monotonic(rand.Reader, 0)
	return func(int) string { return ulid.MustNew(ulid.Now(), entropy).String() }
}

// prefillBatch is how many rows one transaction of the pre-fill inserts.
const prefillBatch = 100_000

// prefill puts n rows of random ids (32 hex digits) in the ledger at path,
// as a ledger that has run for a while holds them, and returns how long it
// took. The ids are random (each the next of an even split of the id
// space, plus a random part) but inserted in two sorted sweeps, the even
// ones then the odd ones: each sweep writes the B-trees in order, so a
// million rows take seconds, not the hours random inserts take; the
// second sweep splits the leaves the first packed, which leaves them part
// full, as random inserts do, not packed as one sorted sweep would.
func prefill(ctx context.Context, path string, n int) (time.Duration, error) {
	start := time.Now()
	st, err := ledger.Open(path, ledger.Config{Logger: quiet})
	if err != nil {
		return 0, err
	}
	defer st.Close()
	step := ^uint64(0) / uint64(n)
	now := time.Now().Add(-time.Duration(n) * time.Millisecond).UnixMilli()
	for sweep := range 2 {
		rng := mrand.New(mrand.NewPCG(7, uint64(sweep)))
		for from := sweep; from < n; from += 2 * prefillBatch {
			if err := prefillBatchAt(ctx, st, rng, from, min(from+2*prefillBatch, n), step, now); err != nil {
				return 0, err
			}
		}
	}
	// As batches would have as they wrote the rows.
	if _, err := st.SealRuns(ctx); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// prefillBatchAt inserts, in one transaction, rows from, from+2, … up to
// to (excluded).
func prefillBatchAt(ctx context.Context, st *ledger.Store, rng *mrand.Rand, from, to int, step uint64, now int64) error {
	tx, err := st.DB().BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	ins, err := tx.PrepareContext(ctx, `INSERT INTO processed_messages (message_id, stream, stream_seq, subject, payload_sha256, processed_at) VALUES (?, 'PREFILL', ?, 'prefill', ?, ?)`)
	if err != nil {
		return err
	}
	// Where the built-in handler's events table is, each row has its
	// events row too, as the handler writes it.
	events, err := tx.PrepareContext(ctx, `INSERT INTO events (message_id, subject, stream_seq, data, applied_at)
		VALUES (?, 'prefill', ?, '{"account":"acct-1","amount":1}', ?)`)
	if err != nil && !strings.Contains(err.Error(), "no such table") {
		return err
	}
	sum := make([]byte, 32)
	for i := from; i < to; i += 2 {
		id := fmt.Sprintf("%016x%016x", uint64(i)*step+rng.Uint64N(step), rng.Uint64())
		for j := range sum {
			sum[j] = byte(rng.Uint32())
		}
		if _, err := ins.ExecContext(ctx, id, i+1, sum, now+int64(i)); err != nil {
			return fmt.Errorf("bench: pre-fill row %d: %w", i, err)
		}
		if events != nil {
			if _, err := events.ExecContext(ctx, id, i+1, now+int64(i)); err != nil {
				return fmt.Errorf("bench: pre-fill events row %d: %w", i, err)
			}
		}
	}
	return tx.Commit()
}

// groupAtRows runs (c) again, on a ledger pre-filled with cfg.LedgerRows
// rows, over the same messages (another durable), and reports it beside
// (c) on an empty ledger.
func groupAtRows(ctx context.Context, cfg Config, res *Result) error {
	path := filepath.Join(cfg.Dir, "group-rows.db")
	cfg.progress("pre-filling a ledger with %d rows of random ids…", cfg.LedgerRows)
	took, err := prefill(ctx, path, cfg.LedgerRows)
	if err != nil {
		return err
	}
	res.LedgerRows, res.PrefillSeconds = cfg.LedgerRows, took.Seconds()
	warm, err := warmIndex(ctx, path)
	if err != nil {
		return err
	}
	res.IndexReadSeconds = warm.Seconds()
	// The pre-fill left gigabytes for the kernel to write back; done while
	// (c_N) runs, they slowed its every fsync (c_N/c 0.53 at 10M rows, not
	// what a ledger that has run for a while pays).
	if err := syncFile(path); err != nil {
		return err
	}
	cfg.progress("(c) on the ledger of %d rows (pre-filled in %s)…", cfg.LedgerRows, took.Round(time.Second))
	stop, err := cfg.profile(".ledger-rows") // where a large ledger's time goes
	if err != nil {
		return err
	}
	rate, st, err := consumeLedger(ctx, cfg, path, "group-rows", nil)
	stop()
	if err != nil {
		return err
	}
	res.GroupAtRowsPerSec, res.RatioRowsOverEmpty = rate, rate/res.GroupPerSec
	return st.Close()
}

// syncFile writes the file at path to disk.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
