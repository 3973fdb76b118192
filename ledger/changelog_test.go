package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

// memLog is a changelog in memory with the one rule a real log enforces:
// an entry lands only after the entry its writer names. The real log is a
// JetStream stream (package changelog); this is the ledger's side alone.
type memLog struct {
	mu      sync.Mutex
	entries [][]byte     // entry i+1
	ends    map[int]bool // entries that end an Append
	max     int
	fail    error // the next Append lands, then fails with it (a lost answer)
}

func (l *memLog) MaxEntry() int { return l.max }

func (l *memLog) Append(_ context.Context, after uint64, parts [][]byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	fail := l.fail
	l.fail = nil
	for _, p := range parts {
		if uint64(len(l.entries)) != after {
			return fmt.Errorf("fenced: the log's last is %d, not %d", len(l.entries), after)
		}
		l.entries = append(l.entries, bytes.Clone(p))
		after++
	}
	if l.ends == nil {
		l.ends = map[int]bool{}
	}
	l.ends[len(l.entries)] = true
	return fail
}

// follow applies to standby every entry of l past its position; the parts
// of one Append are applied together.
func (l *memLog) follow(t *testing.T, standby *ledger.Store) {
	t.Helper()
	ctx := context.Background()
	pos, err := standby.ChangelogPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	entries, ends := l.entries, l.ends
	l.mu.Unlock()
	var changes []byte
	for seq := int(pos.Seq) + 1; seq <= len(entries); seq++ {
		changes = append(changes, entries[seq-1]...)
		if !ends[seq] {
			continue
		}
		if err := standby.ApplyChanges(ctx, "log1", uint64(seq), changes); err != nil {
			t.Fatalf("apply through %d: %v", seq, err)
		}
		changes = nil
	}
}

func openWithLog(t *testing.T, file string, log ledger.Changelog) *ledger.Store {
	t.Helper()
	st, err := ledger.Open(file, ledger.Config{Changelog: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.DB().Exec(`CREATE TABLE IF NOT EXISTS balances (account TEXT PRIMARY KEY, amount INTEGER NOT NULL);
		CREATE TABLE IF NOT EXISTS notes (body TEXT)`); err != nil {
		t.Fatal(err)
	}
	return st
}

// creditAndNote changes a keyed table, a table without a key, and queues
// an effect: every kind of table a standby must copy.
func creditAndNote(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
	if err := credit(ctx, tx, d); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO notes VALUES (?)`, string(d.Data)); err != nil {
		return err
	}
	_, err := tx.Enqueue(ctx, "hook", d.Data)
	return err
}

func batchOf(from, n int, size int) []ledger.Delivery {
	var b []ledger.Delivery
	for i := from; i < from+n; i++ {
		b = append(b, ledger.Delivery{MessageID: fmt.Sprintf("m%04d", i), Stream: "S", Sequence: uint64(i + 1), Subject: "s",
			Data: []byte(fmt.Sprintf("%d%s", i, strings.Repeat("x", size)))})
	}
	return b
}

func dump(t *testing.T, st *ledger.Store) string {
	t.Helper()
	var b strings.Builder
	for _, q := range []string{
		`SELECT message_id || ':' || stream_seq FROM processed_messages ORDER BY 1`,
		`SELECT account || '=' || amount FROM balances ORDER BY 1`,
		`SELECT rowid || ':' || body FROM notes ORDER BY rowid`,
		`SELECT id || ':' || status || ':' || coalesce(claimed_by, '') FROM outbox ORDER BY id`,
		`SELECT log || '/' || seq FROM jetledger_changelog`,
	} {
		rows, err := st.DB().Query(q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s string
			rows.Scan(&s)
			b.WriteString(s + "\n")
		}
		rows.Close()
	}
	return b.String()
}

// A standby that applies the owner's changelog holds what the owner's
// file holds: batches, a message that failed (not in the log), a batch
// split over several entries, an outbox claim and its write-back.
func TestStandbyHoldsWhatTheOwnerHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	log := &memLog{max: 4096}
	owner := openWithLog(t, filepath.Join(dir, "owner.db"), log)
	standby := openWithLog(t, filepath.Join(dir, "standby.db"), nil)
	if _, err := owner.ApplyBatch(ctx, batchOf(0, 1, 0), creditAndNote, ledger.Budget{Work: time.Minute}); !errors.Is(err, ledger.ErrNotChangelogOwner) {
		t.Fatalf("a batch before TakeOver: %v, want ErrNotChangelogOwner", err)
	}
	if err := owner.TakeOver(ctx, "log1", "a", 0, 0); err != nil {
		t.Fatal(err)
	}
	apply(t, owner, creditAndNote, batchOf(0, 10, 10)...)
	failing := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		if err := creditAndNote(ctx, tx, d); err != nil {
			return err
		}
		if d.MessageID == "m0012" {
			return errors.New("fails after writing")
		}
		return nil
	}
	rs := apply(t, owner, failing, batchOf(10, 5, 10)...)
	if rs[2].Outcome != ledger.Failed {
		t.Fatalf("m0012: %v", rs[2])
	}
	apply(t, owner, creditAndNote, batchOf(15, 40, 300)...) // about 20 KB: several entries
	due, err := owner.Due(ctx, "hook", 2)
	if err != nil || len(due) != 2 {
		t.Fatal(due, err)
	}
	if _, err := owner.Transition(ctx, due[0], ledger.Claim, ledger.Params{Worker: "w1", Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Transition(ctx, due[0], ledger.Sent, ledger.Params{Worker: "w1", ExternalID: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Transition(ctx, due[1], ledger.Claim, ledger.Params{Worker: "w1", Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if len(log.entries) < 6 {
		t.Fatalf("the log has %d entries; the large batch alone needs several", len(log.entries))
	}
	log.follow(t, standby)
	if got, want := dump(t, standby), dump(t, owner); got != want {
		t.Fatalf("the standby holds\n%s\nthe owner\n%s", got, want)
	}
	if n := count(t, standby, `SELECT count(*) FROM processed_messages WHERE message_id = 'm0012'`); n != 0 {
		t.Fatalf("the failed message is at the standby: %d", n)
	}
}

// fencedPair is an owner, old, that committed five messages, and a
// second writer, next, that caught up with its log and took it over.
func fencedPair(t *testing.T) (old, next *ledger.Store) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	log := &memLog{max: 1 << 20}
	old = openWithLog(t, filepath.Join(dir, "old.db"), log)
	if err := old.TakeOver(ctx, "log1", "old", 0, 0); err != nil {
		t.Fatal(err)
	}
	apply(t, old, creditAndNote, batchOf(0, 5, 0)...)
	next = openWithLog(t, filepath.Join(dir, "next.db"), log)
	log.follow(t, next)
	last := uint64(len(log.entries))
	if err := next.TakeOver(ctx, "log1", "next", last, last); err != nil {
		t.Fatal(err)
	}
	return old, next
}

// A second writer that took over the log fences the first: the first's
// next batch is rolled back, nothing of it in its file, and it writes
// nothing more until it takes over again.
func TestAFencedOwnerCommitsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	old, next := fencedPair(t)
	before := dump(t, old)
	_, err := old.ApplyBatch(ctx, batchOf(5, 5, 0), creditAndNote, ledger.Budget{Work: time.Minute})
	if !errors.Is(err, ledger.ErrNotChangelogOwner) {
		t.Fatalf("the old owner's batch after the take-over: %v, want ErrNotChangelogOwner", err)
	}
	if after := dump(t, old); after != before {
		t.Fatalf("the fenced batch changed the old owner's file:\n%s\nwas\n%s", after, before)
	}
	due, _ := old.Due(ctx, "hook", 1)
	if _, err := old.Transition(ctx, due[0], ledger.Claim, ledger.Params{Worker: "w", Lease: time.Minute}); !errors.Is(err, ledger.ErrNotChangelogOwner) {
		t.Fatalf("the old owner's claim: %v, want ErrNotChangelogOwner", err)
	}
	apply(t, next, creditAndNote, batchOf(5, 5, 0)...)
	if n := count(t, next, `SELECT count(*) FROM processed_messages`); n != 10 {
		t.Fatalf("the new owner holds %d messages, want 10", n)
	}
}

// An entry whose Append failed may be in the log anyway: the store writes
// nothing more until it has applied the log and taken over again.
func TestAFailedAppendStopsTheWriter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	log := &memLog{max: 1 << 20}
	st := openWithLog(t, filepath.Join(t.TempDir(), "a.db"), log)
	if err := st.TakeOver(ctx, "log1", "a", 0, 0); err != nil {
		t.Fatal(err)
	}
	log.fail = errors.New("timeout")
	if _, err := st.ApplyBatch(ctx, batchOf(0, 1, 0), creditAndNote, ledger.Budget{Work: time.Minute}); !errors.Is(err, ledger.ErrNotChangelogOwner) {
		t.Fatalf("%v", err)
	}
	if _, err := st.ApplyBatch(ctx, batchOf(1, 1, 0), creditAndNote, ledger.Budget{Work: time.Minute}); !errors.Is(err, ledger.ErrNotChangelogOwner) {
		t.Fatalf("the batch after: %v", err)
	}
	if n := count(t, st, `SELECT count(*) FROM processed_messages`); n != 0 {
		t.Fatalf("the batch whose Append failed is in the file: %d rows", n)
	}
	last := uint64(len(log.entries))
	if err := st.TakeOver(ctx, "log1", "a", last, last); !errors.Is(err, ledger.ErrChangelogAhead) {
		t.Fatalf("take over past entries it lacks: %v, want ErrChangelogAhead", err)
	}
	log.follow(t, st) // the entry did land: the file catches up with it
	if err := st.TakeOver(ctx, "log1", "a", last, last); err != nil {
		t.Fatal(err)
	}
	rs := apply(t, st, creditAndNote, batchOf(0, 2, 0)...)
	if rs[0].Outcome != ledger.Duplicate || rs[1].Outcome != ledger.Applied {
		t.Fatalf("after catching up: %v, want the landed message a duplicate", rs)
	}
}

// A ledger kept by a changelog, opened without it (a command on the
// owner's file, a run that forgot --changelog, a standby's copy), writes
// nothing: a change made there alone would not be in the log. Opened with
// LeaveChangelog it is a ledger of this host alone again.
func TestAKeptLedgerOpenedWithoutItsChangelogWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "owner.db")
	owner := openWithLog(t, file, &memLog{max: 1 << 20})
	if err := owner.TakeOver(ctx, "log1", "a", 0, 0); err != nil {
		t.Fatal(err)
	}
	apply(t, owner, creditAndNote, batchOf(0, 3, 0)...)
	owner.Close()
	plain := openWithLog(t, file, nil)
	writes := []error{
		func() error {
			_, err := plain.ApplyBatch(ctx, batchOf(3, 1, 0), creditAndNote, ledger.Budget{Work: time.Minute})
			return err
		}(),
		plain.RecordDeadLetters(ctx, []ledger.DeadLetter{{MessageID: "d", Stream: "S", Sequence: 9, Subject: "s", Payload: []byte("x"), Reason: "r", Deliveries: 1}}),
		plain.RememberConsumer(ctx, "S", "d2", ""),
	}
	for i, err := range writes {
		if !errors.Is(err, ledger.ErrChangelogCopy) || !strings.Contains(err.Error(), "log1") {
			t.Errorf("write %d to a kept ledger opened without its changelog: %v, want ErrChangelogCopy naming log1", i, err)
		}
	}
	if got := dump(t, plain); !strings.Contains(got, "m0002") || strings.Contains(got, "m0003") {
		t.Fatalf("the refused writes changed the file:\n%s", got)
	}
	plain.Close()
	left, err := ledger.Open(file, ledger.Config{LeaveChangelog: true})
	if err != nil {
		t.Fatal(err)
	}
	defer left.Close()
	apply(t, left, creditAndNote, batchOf(3, 1, 0)...)
	if p, err := left.ChangelogPosition(ctx); err != nil || p.Log != "" || p.Seq != 0 {
		t.Fatalf("after leaving its changelog the ledger's position is %+v (%v), want none", p, err)
	}
}
