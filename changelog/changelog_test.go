package changelog_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, consumertest.KnownLeaks...) }

func credit(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO balances VALUES ('a', 1) ON CONFLICT (account) DO UPDATE SET amount = amount + 1`); err != nil {
		return err
	}
	_, err := tx.Enqueue(ctx, "hook", d.Data)
	return err
}

// ensure opens the changelog cfg names on js.
func ensure(t *testing.T, js jetstream.JetStream, cfg changelog.Config) *changelog.Log {
	t.Helper()
	log, err := changelog.Ensure(context.Background(), js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return log
}

func openLedger(t *testing.T, file string, log ledger.Changelog) *ledger.Store {
	t.Helper()
	st, err := ledger.Open(file, ledger.Config{Changelog: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.DB().Exec(`CREATE TABLE IF NOT EXISTS balances (account TEXT PRIMARY KEY, amount INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return st
}

func batch(from, n, size int) []ledger.Delivery {
	var b []ledger.Delivery
	for i := from; i < from+n; i++ {
		b = append(b, ledger.Delivery{MessageID: fmt.Sprintf("m%04d", i), Stream: "PAY", Sequence: uint64(i + 1), Subject: "pay",
			Data: []byte(fmt.Sprintf("%d%s", i, strings.Repeat("x", size)))})
	}
	return b
}

func balance(t *testing.T, st *ledger.Store) (amount, rows int) {
	t.Helper()
	st.DB().QueryRow(`SELECT coalesce((SELECT amount FROM balances WHERE account = 'a'), 0), (SELECT count(*) FROM processed_messages)`).Scan(&amount, &rows)
	return amount, rows
}

// The owner's batches reach a standby through the log, a large one split
// over several messages; a standby that took over fences the old owner,
// whose next batch is rolled back with nothing in its file; the new owner
// goes on where the log is.
func TestLogCarriesAndFences(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, s)
	dir := t.TempDir()
	cfg := changelog.Config{Stream: "PAY", Durable: "pay-p0", MaxEntry: 8 << 10}
	log := ensure(t, js, cfg)
	owner := openLedger(t, filepath.Join(dir, "a.db"), log)
	applied, last, err := log.CatchUp(ctx, owner)
	if err != nil || applied != 0 || last != 0 {
		t.Fatal(applied, last, err)
	}
	if err := owner.TakeOver(ctx, log.Instance(), "a", applied, last); err != nil {
		t.Fatal(err)
	}
	budget := ledger.Budget{Work: time.Minute}
	if _, err := owner.ApplyBatch(ctx, batch(0, 10, 0), credit, budget); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.ApplyBatch(ctx, batch(10, 50, 1000), credit, budget); err != nil { // ~100 KB: many parts
		t.Fatal(err)
	}
	if last, _ := log.Last(ctx); last < 10 {
		t.Fatalf("the log has %d messages; the large batch alone needs more than 10", last)
	}
	log2 := ensure(t, js, cfg)
	standby := openLedger(t, filepath.Join(dir, "b.db"), log2)
	applied, last, err = log2.CatchUp(ctx, standby)
	if err != nil || applied != last {
		t.Fatalf("catch up: %d of %d, %v", applied, last, err)
	}
	if a, n := balance(t, standby); a != 60 || n != 60 {
		t.Fatalf("the standby holds balance %d and %d rows, want 60 and 60", a, n)
	}
	if err := standby.TakeOver(ctx, log2.Instance(), "b", applied, last); err != nil {
		t.Fatal(err)
	}
	_, err = owner.ApplyBatch(ctx, batch(60, 5, 0), credit, budget)
	if !errors.Is(err, changelog.ErrFenced) || !errors.Is(err, ledger.ErrNotChangelogOwner) {
		t.Fatalf("the old owner's batch after the take-over: %v, want ErrFenced", err)
	}
	if a, n := balance(t, owner); a != 60 || n != 60 {
		t.Fatalf("the fenced batch is in the old owner's file: balance %d, %d rows", a, n)
	}
	rs, err := standby.ApplyBatch(ctx, append(batch(55, 5, 1000), batch(60, 5, 0)...), credit, budget)
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Outcome != ledger.Duplicate || rs[9].Outcome != ledger.Applied {
		t.Fatalf("the new owner: %v", rs)
	}
	if a, _ := balance(t, standby); a != 65 {
		t.Fatalf("balance %d, want 65", a)
	}
}

// One lease: the second process is told who holds it; a renewal by the
// holder keeps it; once the holder stops renewing the key expires and
// another takes it, and the old holder's renewal then fails.
func TestLeaseHasOneHolder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, s)
	ttl := 2 * time.Second
	a, err := changelog.OpenLease(ctx, js, "PAY", "pay-p0", "host-a", ttl, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := changelog.OpenLease(ctx, js, "PAY", "pay-p0", "host-b", ttl, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Acquire(ctx); !errors.Is(err, changelog.ErrLeaseHeld) || !strings.Contains(err.Error(), "host-a") {
		t.Fatalf("second acquire: %v, want ErrLeaseHeld naming host-a", err)
	}
	if err := a.Renew(ctx); err != nil || !a.Held() {
		t.Fatal(err)
	}
	if _, err := changelog.OpenLease(ctx, js, "PAY", "pay-p1", "host-a", time.Minute, 1); err != nil {
		t.Fatalf("another partition's lease of another TTL: %v", err)
	}
	consumertest.Eventually(t, 10*time.Second, "the lease expires", func() bool { return b.Acquire(ctx) == nil })
	if err := a.Renew(ctx); !errors.Is(err, changelog.ErrLeaseLost) {
		t.Fatalf("the old holder's renewal: %v, want ErrLeaseLost", err)
	}
	if a.Held() {
		t.Fatal("the old holder still believes it holds the lease")
	}
}

// A new standby restores the latest snapshot and catches up by the
// entries after it; the log is trimmed behind the snapshot before, so a
// ledger that needs trimmed entries is told it needs the snapshot.
func TestStandbyStartsFromTheSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, s)
	dir := t.TempDir()
	log := ensure(t, js, changelog.Config{Stream: "PAY", Durable: "pay-p0"})
	owner := openLedger(t, filepath.Join(dir, "a.db"), log)
	if err := owner.TakeOver(ctx, log.Instance(), "a", 0, 0); err != nil {
		t.Fatal(err)
	}
	budget := ledger.Budget{Work: time.Minute}
	for i := range 3 {
		if _, err := owner.ApplyBatch(ctx, batch(i*10, 10, 0), credit, budget); err != nil {
			t.Fatal(err)
		}
	}
	first, err := log.Snapshot(ctx, owner)
	if err != nil || first == 0 {
		t.Fatal(first, err)
	}
	early := openLedger(t, filepath.Join(dir, "early.db"), nil)
	if _, _, err := log.CatchUp(ctx, early); err != nil {
		t.Fatal(err) // nothing trimmed yet
	}
	for i := 3; i < 6; i++ {
		if _, err := owner.ApplyBatch(ctx, batch(i*10, 10, 0), credit, budget); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := log.Snapshot(ctx, owner); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.ApplyBatch(ctx, batch(60, 10, 0), credit, budget); err != nil {
		t.Fatal(err)
	}
	fresh := openLedger(t, filepath.Join(dir, "fresh.db"), nil)
	if _, _, err := log.CatchUp(ctx, fresh); !errors.Is(err, changelog.ErrNeedSnapshot) {
		t.Fatalf("a new ledger after the log was trimmed: %v, want ErrNeedSnapshot", err)
	}
	fresh.Close()
	file := filepath.Join(dir, "b.db")
	if ok, err := log.Restore(ctx, file); err != nil || !ok {
		t.Fatal(ok, err)
	}
	standby := openLedger(t, file, nil)
	applied, last, err := log.CatchUp(ctx, standby)
	if err != nil || applied != last {
		t.Fatalf("catch up after the restore: %d of %d, %v", applied, last, err)
	}
	if a, n := balance(t, standby); a != 70 || n != 70 {
		t.Fatalf("the restored standby holds balance %d, %d rows; want 70, 70", a, n)
	}
	// A copy at the first snapshot still catches up by entries: the log
	// keeps them from the snapshot before the latest on.
	if _, _, err := log.CatchUp(ctx, early); err != nil {
		t.Fatalf("a copy at the snapshot before: %v", err)
	}
	if a, _ := balance(t, early); a != 70 {
		t.Fatalf("the copy at the snapshot before holds %d, want 70", a)
	}
}

// An entry encoded in a way this version does not know (a newer owner's)
// stops the catch-up with an error naming the encoding, rather than being
// applied as it is, or skipped.
func TestAnEntryOfAnUnknownEncodingIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, s)
	log := ensure(t, js, changelog.Config{Stream: "PAY", Durable: "pay-p0"})
	_, subject := changelog.Names("PAY", "pay-p0")
	m := nats.NewMsg(subject)
	m.Data = []byte("changes")
	m.Header.Set(changelog.HeaderFirst, "1")
	m.Header.Set(changelog.HeaderParts, "1")
	m.Header.Set(changelog.HeaderEncoding, "zstd-99")
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	st := openLedger(t, filepath.Join(t.TempDir(), "b.db"), nil)
	if _, _, err := log.CatchUp(ctx, st); err == nil || !strings.Contains(err.Error(), "zstd-99") {
		t.Fatalf("an entry of an unknown encoding: %v, want an error naming it", err)
	}
	if p, err := st.ChangelogPosition(ctx); err != nil || p.Seq != 0 {
		t.Fatalf("the ledger moved to %+v (%v)", p, err)
	}
}
