package ledger_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

// fullDump renders every row of every table of the main database,
// sqlite_sequence included, in a stable order.
func fullDump(t *testing.T, st *ledger.Store) string {
	t.Helper()
	rows, err := st.DB().Query(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_stat%' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	var b strings.Builder
	for _, tb := range tables {
		b.WriteString("## " + tb + "\n")
		rs, err := st.DB().Query(`SELECT * FROM "` + tb + `"`)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rs.Columns()
		var lines []string
		for rs.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rs.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			var parts []string
			for i, v := range vals {
				if cols[i] == "owner" && tb == "jetledger_changelog" {
					continue
				}
				if bs, ok := v.([]byte); ok {
					v = string(bs)
				}
				parts = append(parts, fmt.Sprintf("%v", v))
			}
			lines = append(lines, strings.Join(parts, "|"))
		}
		rs.Close()
		sort.Strings(lines)
		for _, l := range lines {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func pair(t *testing.T, max int) (*memLog, *ledger.Store, *ledger.Store) {
	t.Helper()
	dir := t.TempDir()
	log := &memLog{max: max}
	owner := openWithLog(t, filepath.Join(dir, "owner.db"), log)
	standby := openWithLog(t, filepath.Join(dir, "standby.db"), nil)
	if err := owner.TakeOver(context.Background(), "log1", "a", 0, 0); err != nil {
		t.Fatal(err)
	}
	return log, owner, standby
}

func sameAsOwner(t *testing.T, log *memLog, owner, standby *ledger.Store) {
	t.Helper()
	log.follow(t, standby)
	if got, want := fullDump(t, standby), fullDump(t, owner); got != want {
		t.Fatalf("the standby holds\n%s\nthe owner\n%s", got, want)
	}
}

// A handler may CREATE TABLE (the guard allows it) and write to it; the
// changeset has the rows but not the DDL, and SQLite skips the changes of
// a table the standby lacks without a word: ApplyChanges must refuse them
// (ErrChangesDoNotFit) rather than report success with the rows lost.
func TestAttackHandlerDDLIsNotReplicated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	log, owner, standby := pair(t, 1<<20)
	h := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS audit (id TEXT PRIMARY KEY, body TEXT)`); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO audit VALUES (?, ?)`, d.MessageID, string(d.Data))
		return err
	}
	apply(t, owner, h, batchOf(0, 3, 0)...)
	if err := applyAll(ctx, log, standby); !errors.Is(err, ledger.ErrChangesDoNotFit) {
		t.Fatalf("changes to a table the standby lacks: %v, want ErrChangesDoNotFit", err)
	}
}

// applyAll applies the log's whole entries to standby until one fails.
func applyAll(ctx context.Context, log *memLog, standby *ledger.Store) error {
	var changes []byte
	for i, e := range log.entries {
		changes = append(changes, e...)
		if !log.ends[i+1] {
			continue
		}
		if err := standby.ApplyChanges(ctx, "log1", uint64(i+1), changes); err != nil {
			return err
		}
		changes = nil
	}
	return nil
}

// A table whose shape differs at the standby (a column the owner added
// through Store.Exec, which the changelog does not record) would have its
// changes skipped by sqlite3changeset_apply without an error; ApplyChanges
// refuses them, naming the table, and applies nothing of the entry.
func TestAttackSchemaMismatchIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	log, owner, standby := pair(t, 1<<20)
	if _, err := owner.Exec(ctx, `ALTER TABLE balances ADD COLUMN note TEXT`); err != nil {
		t.Fatal(err)
	}
	h := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO balances (account, amount) VALUES (?, 1)`, d.MessageID)
		return err
	}
	for _, r := range apply(t, owner, h, batchOf(0, 3, 0)...) {
		if r.Outcome != ledger.Applied {
			t.Fatal(r)
		}
	}
	err := applyAll(ctx, log, standby)
	if !errors.Is(err, ledger.ErrChangesDoNotFit) || !strings.Contains(err.Error(), "balances") {
		t.Fatalf("changes to a table of another shape: %v, want ErrChangesDoNotFit naming balances", err)
	}
	if n := count(t, standby, `SELECT count(*) FROM processed_messages`); n != 0 {
		t.Fatalf("the refused entry left %d ledger rows at the standby", n)
	}
}

// A handler table with a non-INTEGER PRIMARY KEY admits NULL keys (a
// SQLite quirk); the session extension does not record rows with a NULL
// key, so the standby misses them.
func TestAttackNullPrimaryKeyRowsAreNotReplicated(t *testing.T) {
	t.Skip("known limitation, left in issue 25's note: the session extension does not record rows with a NULL primary key")
	t.Parallel()
	log, owner, standby := pair(t, 1<<20)
	for _, st := range []*ledger.Store{owner, standby} {
		if _, err := st.DB().Exec(`CREATE TABLE tags (k TEXT PRIMARY KEY, v TEXT)`); err != nil {
			t.Fatal(err)
		}
	}
	h := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO tags VALUES (NULL, ?)`, d.MessageID)
		return err
	}
	apply(t, owner, h, batchOf(0, 2, 0)...)
	sameAsOwner(t, log, owner, standby)
}

// AUTOINCREMENT keeps its high-water mark in sqlite_sequence; an id used
// and deleted in one transaction leaves the owner's mark past the rows,
// and the standby's, maintained by its own inserts, behind: after a
// failover the standby hands out an id the owner had used.
func TestAttackAutoincrementHighWaterMark(t *testing.T) {
	t.Skip("known limitation, left in issue 25's note: sqlite_sequence is not recorded")
	t.Parallel()
	log, owner, standby := pair(t, 1<<20)
	for _, st := range []*ledger.Store{owner, standby} {
		if _, err := st.DB().Exec(`CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, body TEXT)`); err != nil {
			t.Fatal(err)
		}
	}
	h := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO jobs (body) VALUES (?)`, d.MessageID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO jobs (body) VALUES ('tmp')`); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM jobs WHERE body = 'tmp'`)
		return err
	}
	apply(t, owner, h, batchOf(0, 2, 0)...)
	sameAsOwner(t, log, owner, standby)
}

// A handler may not write the changelog position, directly or via a trigger.
func TestAttackHandlerCannotWriteThePosition(t *testing.T) {
	t.Parallel()
	log, owner, standby := pair(t, 1<<20)
	if _, err := owner.DB().Exec(`CREATE TABLE trig (x); CREATE TRIGGER tg AFTER INSERT ON trig BEGIN UPDATE jetledger_changelog SET seq = 99; END`); err != nil {
		t.Fatal(err)
	}
	if _, err := standby.DB().Exec(`CREATE TABLE trig (x)`); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`UPDATE jetledger_changelog SET seq = 99`, `INSERT INTO trig VALUES (1)`, `DELETE FROM jetledger_changelog`} {
		h := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
			_, err := tx.ExecContext(ctx, q)
			return err
		}
		rs, err := owner.ApplyBatch(context.Background(), batchOf(0, 1, 0), h, ledger.Budget{Work: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if rs[0].Outcome != ledger.Failed || !errors.Is(rs[0].Err, ledger.ErrTransactionControl) {
			t.Fatalf("%s: %v", q, rs[0])
		}
	}
	apply(t, owner, creditAndNote, batchOf(0, 2, 0)...)
	sameAsOwner(t, log, owner, standby)
}

// Every ledger-owned write besides batches: dead letters, consumers,
// source floors, ClassifyUnseen, AdoptSequenceIDs, HoldRows, outbox
// transitions, DiscardDeadLetter, Prune.
func TestAttackEveryLedgerWriteIsReplicated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	log, owner, standby := pair(t, 700)
	apply(t, owner, creditAndNote, batchOf(0, 30, 50)...)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(owner.RememberConsumer(ctx, "S", "d", "inst"))
	must(owner.RecordDeadLetters(ctx, []ledger.DeadLetter{{MessageID: "dl1", Stream: "S", Sequence: 900, Subject: "s", Payload: []byte("p"), Reason: "r", Deliveries: 3}, {MessageID: "dl2", Stream: "S", Sequence: 901, Subject: "s", Payload: []byte("p"), Reason: "r", Deliveries: 3}}))
	dls, err := owner.DeadLetters(ctx, 10)
	must(err)
	must(owner.DiscardDeadLetter(ctx, dls[0].ID))
	must(owner.RaiseSourceFloors(ctx, "S", []ledger.SourceFloor{{Source: "SRC", Instance: "i", Below: 5}}))
	_, err = owner.ClassifyUnseen(ctx, ledger.Delivery{MessageID: "m0001", Stream: "S", Sequence: 2, Subject: "s", Data: []byte("1")})
	must(err)
	_, err = owner.ClassifyUnseen(ctx, ledger.Delivery{MessageID: "m0001", Stream: "S", Sequence: 2, Subject: "s", Data: []byte("different")})
	must(err)
	_, err = owner.HoldRows(ctx, "S", 1000)
	must(err)
	_, err = owner.AdoptSequenceIDs(ctx, "S", "seq-", time.Now())
	must(err)
	due, err := owner.Due(ctx, "hook", 5)
	must(err)
	_, err = owner.Transition(ctx, due[0], ledger.Claim, ledger.Params{Worker: "w", Lease: time.Minute})
	must(err)
	_, err = owner.Transition(ctx, due[0], ledger.Sent, ledger.Params{Worker: "w", ExternalID: "e"})
	must(err)
	_, err = owner.Transition(ctx, due[1], ledger.Claim, ledger.Params{Worker: "w", Lease: time.Nanosecond})
	must(err)
	time.Sleep(5 * time.Millisecond)
	_, err = owner.ExpireLeases(ctx, "hook", true)
	must(err)
	_, err = owner.Prune(ctx, ledger.PruneOptions{Stream: "S", FirstSeq: 20, OutboxRetention: time.Nanosecond})
	if err != nil {
		t.Logf("prune: %v", err)
	}
	sameAsOwner(t, log, owner, standby)
}

// Redone batches (a failure without a savepoint), savepoint mode, InsertLater
// rows and pipelined batches with a small MaxEntry (many parts).
func TestAttackRedoAndPipelinedWithManyParts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, max := range []int{1, 13, 257, 1 << 20} {
		for _, sp := range []bool{false, true} {
			t.Run(fmt.Sprintf("max%d_sp%v", max, sp), func(t *testing.T) {
				t.Parallel()
				log, owner, standby := pair(t, max)
				for _, st := range []*ledger.Store{owner, standby} {
					if _, err := st.DB().Exec(`CREATE TABLE events (message_id TEXT PRIMARY KEY, data BLOB CHECK (CAST(data AS TEXT) IS NOT 'bad')) WITHOUT ROWID`); err != nil {
						t.Fatal(err)
					}
				}
				h := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
					if err := creditAndNote(ctx, tx, d); err != nil {
						return err
					}
					if err := tx.InsertLater(eventsRow, d.MessageID, d.Data); err != nil {
						return err
					}
					if strings.HasSuffix(d.MessageID, "3") {
						return errors.New("fails after writing")
					}
					return nil
				}
				for i := 0; i < 4; i++ {
					ledger.UseSavepoints(owner, sp)
					b := batchOf(i*10, 10, 20)
					if i == 2 {
						b[5].Data = []byte("bad") // InsertLater's multi-row insert fails
					}
					if i%2 == 0 {
						apply(t, owner, h, b...)
					} else {
						_, p, err := owner.ApplyBatchPipelined(ctx, b, h, ledger.Budget{Work: time.Minute})
						if err != nil {
							t.Fatal(err)
						}
						if err := p.Durable(ctx); err != nil {
							t.Fatal(err)
						}
					}
				}
				sameAsOwner(t, log, owner, standby)
			})
		}
	}
}

// slowLog lands every entry, then takes longer than the commit bound.
type slowLog struct {
	*memLog
	delay time.Duration
}

func (l *slowLog) Append(ctx context.Context, after uint64, parts [][]byte) error {
	err := l.memLog.Append(ctx, after, parts)
	time.Sleep(l.delay)
	return err
}

// The commit bound elapsing after the entry went to the log: the commit
// fails, and the store must write nothing more until it takes over again.
func TestAttackCommitBoundAfterPublish(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	ml := &memLog{max: 1 << 20}
	sl := &slowLog{memLog: ml}
	owner := openWithLog(t, filepath.Join(dir, "owner.db"), sl)
	standby := openWithLog(t, filepath.Join(dir, "standby.db"), nil)
	if err := owner.TakeOver(ctx, "log1", "a", 0, 0); err != nil {
		t.Fatal(err)
	}
	apply(t, owner, creditAndNote, batchOf(0, 2, 0)...)
	sl.delay = 300 * time.Millisecond
	_, err := owner.ApplyBatch(ctx, batchOf(2, 2, 0), creditAndNote, ledger.Budget{Work: time.Minute, Commit: 50 * time.Millisecond})
	t.Logf("the late batch: %v", err)
	sl.delay = 0
	if err == nil {
		// committed: the standby must hold it too
		sameAsOwner(t, ml, owner, standby)
		return
	}
	_, err2 := owner.ApplyBatch(ctx, batchOf(4, 1, 0), creditAndNote, ledger.Budget{Work: time.Minute})
	if !errors.Is(err2, ledger.ErrNotChangelogOwner) {
		t.Fatalf("the batch after a failed commit: %v, want ErrNotChangelogOwner", err2)
	}
	err3 := owner.RecordDeadLetters(ctx, []ledger.DeadLetter{{MessageID: "x", Stream: "S", Sequence: 77, Subject: "s", Reason: "r"}})
	if !errors.Is(err3, ledger.ErrNotChangelogOwner) {
		t.Fatalf("a dead letter after a failed commit: %v, want ErrNotChangelogOwner", err3)
	}
}

// A fenced owner's other write paths commit nothing either.
func TestAttackFencedOwnerOtherWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	old, _ := fencedPair(t)
	before := fullDump(t, old)
	var errs []error
	errs = append(errs, old.RememberConsumer(ctx, "S", "d2", "i"))
	errs = append(errs, old.RaiseSourceFloors(ctx, "S", []ledger.SourceFloor{{Source: "X", Below: 3}}))
	_, e := old.HoldRows(ctx, "S", 1000)
	errs = append(errs, e)
	_, e = old.AdoptSequenceIDs(ctx, "S", "p-", time.Now())
	errs = append(errs, e)
	_, e = old.ClassifyUnseen(ctx, ledger.Delivery{MessageID: "m0001", Stream: "S", Sequence: 2, Subject: "s", Data: []byte("zz")})
	errs = append(errs, e)
	_, e = old.Prune(ctx, ledger.PruneOptions{Stream: "S", FirstSeq: 4})
	errs = append(errs, e)
	for i, e := range errs {
		t.Logf("write %d: %v", i, e)
	}
	if after := fullDump(t, old); after != before {
		t.Fatalf("the fenced owner's file changed:\n%s\nwas\n%s", after, before)
	}
}

// A trigger of the handler's schema (on both files, as a schema is) writes
// a second table; the owner's changeset carries the trigger's rows, and
// the standby's trigger, off while the changes apply, does not write them
// again.
func TestAttackSchemaTriggerAtTheStandby(t *testing.T) {
	t.Parallel()
	log, owner, standby := pair(t, 1<<20)
	for _, st := range []*ledger.Store{owner, standby} {
		if _, err := st.DB().Exec(`CREATE TABLE history (account TEXT, amount INTEGER);
			CREATE TRIGGER balances_history AFTER UPDATE ON balances BEGIN INSERT INTO history VALUES (new.account, new.amount); END`); err != nil {
			t.Fatal(err)
		}
	}
	apply(t, owner, creditAndNote, batchOf(0, 3, 0)...)
	apply(t, owner, creditAndNote, batchOf(3, 3, 0)...)
	sameAsOwner(t, log, owner, standby)
	// Back on once the changes are in: the standby's own writes fire it.
	history := func() (n int) {
		standby.DB().QueryRow(`SELECT count(*) FROM history`).Scan(&n) //nolint:errcheck // 0 fails below
		return n
	}
	before := history()
	if _, err := standby.Exec(context.Background(), `UPDATE balances SET amount = amount + 1`); err != nil {
		t.Fatal(err)
	}
	if history() <= before {
		t.Fatalf("the standby's trigger did not fire on its own write after applying changes (history %d rows, before %d)", history(), before)
	}
}

// ON DELETE CASCADE (foreign_keys is on): the owner's changeset holds the
// parent's and the children's deletes; the standby's cascade, off while
// the changes apply, does not delete the children first.
func TestAttackForeignKeyCascadeAtTheStandby(t *testing.T) {
	t.Parallel()
	log, owner, standby := pair(t, 1<<20)
	for _, st := range []*ledger.Store{owner, standby} {
		if _, err := st.DB().Exec(`CREATE TABLE parent (id TEXT PRIMARY KEY);
			CREATE TABLE child (id TEXT PRIMARY KEY, parent TEXT REFERENCES parent (id) ON DELETE CASCADE)`); err != nil {
			t.Fatal(err)
		}
	}
	apply(t, owner, func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO parent VALUES (?)`, d.MessageID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO child VALUES (?, ?)`, d.MessageID+"c", d.MessageID)
		return err
	}, batchOf(0, 2, 0)...)
	apply(t, owner, func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM parent WHERE id = 'm0000'`)
		return err
	}, batchOf(2, 1, 0)...)
	sameAsOwner(t, log, owner, standby)
}

// REPLACE deleting a row under another key (a UNIQUE column), and a
// statement that rolls the whole batch back (ON CONFLICT ROLLBACK), in
// both modes.
func TestAttackReplaceAndRollbackConflict(t *testing.T) {
	t.Parallel()
	for _, sp := range []bool{false, true} {
		t.Run(fmt.Sprint(sp), func(t *testing.T) {
			t.Parallel()
			log, owner, standby := pair(t, 300)
			for _, st := range []*ledger.Store{owner, standby} {
				if _, err := st.DB().Exec(`CREATE TABLE u (id TEXT PRIMARY KEY, k TEXT UNIQUE);
					CREATE TABLE r (id TEXT PRIMARY KEY ON CONFLICT ROLLBACK)`); err != nil {
					t.Fatal(err)
				}
			}
			ledger.UseSavepoints(owner, sp)
			h := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
				if err := creditAndNote(ctx, tx, d); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO u VALUES (?, 'same')`, d.MessageID); err != nil {
					return err
				}
				id := d.MessageID
				if strings.HasSuffix(id, "4") {
					id = "m0001"
				}
				_, err := tx.ExecContext(ctx, `INSERT INTO r VALUES (?)`, id)
				return err
			}
			apply(t, owner, h, batchOf(0, 8, 0)...)
			ledger.UseSavepoints(owner, sp)
			apply(t, owner, h, batchOf(8, 8, 0)...)
			sameAsOwner(t, log, owner, standby)
		})
	}
}

// A copy whose row differs from the one an entry changes is refused, and
// the refusal says which change of which row did not fit and how, for the
// person comparing the copies (the long owned nemesis met one it could not
// say more of).
func TestChangesThatDoNotFitSayWhichRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	log, owner, standby := pair(t, 1<<20)
	apply(t, owner, credit, batchOf(0, 2, 0)...)
	if err := applyAll(ctx, log, standby); err != nil {
		t.Fatal(err)
	}
	// The copy's row changed outside the log (as sqlite3 would).
	db, err := sql.Open("sqlite", "file:"+standby.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE balances SET amount = 99 WHERE account = 'a'`); err != nil {
		t.Fatal(err)
	}
	apply(t, owner, credit, batchOf(2, 1, 0)...)
	pos, err := standby.ChangelogPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var changes []byte
	for seq := int(pos.Seq) + 1; seq <= len(log.entries); seq++ {
		changes = append(changes, log.entries[seq-1]...)
	}
	err = standby.ApplyChanges(ctx, "log1", uint64(len(log.entries)), changes)
	if !errors.Is(err, ledger.ErrChangesDoNotFit) || !strings.Contains(err.Error(), `update of balances "a": its row differs`) {
		t.Fatalf("a change to a row that differs: %v, want ErrChangesDoNotFit naming the row", err)
	}
}
