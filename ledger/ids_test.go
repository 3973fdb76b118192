package ledger_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

// Ids are any bytes (consumer.MessageID: "the ledger compares ids
// exactly"): one applied in one batch must be a Duplicate in the next, not
// re-applied, and must not fail the whole batch.
func TestOddBytesIDsDedupeAcrossBatches(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"a\x00b", "\xff\xfe\xfd", "x' OR 1=1 --", "ends-with-space ", "é", "e\u0301"} {
		for _, m := range modes {
			t.Run(m.name+"/"+id, func(t *testing.T) {
				t.Parallel()
				st := openEventsStore(t, m.savepoints)
				rs := apply(t, st, credit, delivery(id, 1, "x"))
				if rs[0].Outcome != ledger.Applied {
					t.Fatalf("first = %+v", rs[0])
				}
				rs, err := st.ApplyBatch(context.Background(), []ledger.Delivery{delivery(id, 1, "x"), delivery("other", 2, "y")}, credit, ledger.Budget{})
				if err != nil {
					t.Fatalf("redelivery of id %q fails the whole batch (nothing acked, forever): %v", id, err)
				}
				if got := outcomes(rs); !equal(got, []ledger.Outcome{ledger.Duplicate, ledger.Applied}) {
					t.Fatalf("redelivery outcomes = %v (%+v)", got, rs)
				}
				if b := balance(t, st); b != 2 {
					t.Fatalf("balance = %d, want 2", b)
				}
			})
		}
	}
}

// A batch looks up only the ids at or below the ledger's greatest (ids above
// it cannot be there): the comparison must be SQLite's order of the primary
// key, bytewise, or a redelivered id would be taken for new. The ids here
// arrive out of order and sort differently by runes, by length and by bytes.
func TestIDsAtOrBelowTheGreatestAreLookedUp(t *testing.T) {
	t.Parallel()
	first := []string{"m", "\xff\xfe", "a\x00b", "é", "zz", "01J0000000000000000000000Z"}
	again := []string{"a", "a\x00b", "zz", "é", "\xff\xfe", "\xff\xff", "01J0000000000000000000000Z", "01J00000000000000000000000"}
	want := []ledger.Outcome{ledger.Applied, ledger.Duplicate, ledger.Duplicate, ledger.Duplicate, ledger.Duplicate,
		ledger.Applied, ledger.Duplicate, ledger.Applied}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			st := openEventsStore(t, m.savepoints)
			var batch []ledger.Delivery
			for i, id := range first {
				batch = append(batch, delivery(id, uint64(i+1), "x"))
			}
			apply(t, st, credit, batch...)
			batch = batch[:0]
			for i, id := range again {
				batch = append(batch, delivery(id, uint64(len(first)+i+1), "x"))
			}
			if got := outcomes(apply(t, st, credit, batch...)); !equal(got, want) {
				t.Fatalf("outcomes = %v, want %v", got, want)
			}
			if b := balance(t, st); b != len(first)+3 {
				t.Fatalf("balance = %d, want %d", b, len(first)+3)
			}
		})
	}
}

// openStoreEncoded opens a ledger in a file that already existed with the
// given text encoding: the ledger may share the file of an application's
// database, and SQLite fixes the encoding when the first table is created.
func openStoreEncoded(t *testing.T, encoding string) *ledger.Store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(fmt.Sprintf("PRAGMA encoding = '%s'", encoding)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE balances (account TEXT PRIMARY KEY, amount INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := ledger.Open(path, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var got string
	if err := st.DB().QueryRow(`PRAGMA encoding`).Scan(&got); err != nil || !strings.EqualFold(got, encoding) {
		t.Fatalf("encoding = %q (%v), want %s", got, err, encoding)
	}
	return st
}

// lookup skips the ids above max(message_id), compared as Go strings, only
// in a UTF-8 file. In a UTF-16 one SQLite's BINARY order is memcmp of the
// UTF-16 text: its greatest id can be smaller, by Go's order, than an id it
// holds, which redelivered would be taken for new, and its ledger row's
// insert would fail the whole batch every time it is delivered.
func TestUTF16LedgerLooksEveryIDUp(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		encoding string
		ids      [2]string // SQLite's greatest first, Go's second
	}{
		{"UTF-16le", [2]string{"é", "ā"}},               // E9 00 > 01 01; C3 A9 < C4 81
		{"UTF-16be", [2]string{"\ufffd", "\U0001F600"}}, // FF FD > D8 3D; EF BF BD < F0 9F 98 80
	} {
		t.Run(c.encoding, func(t *testing.T) {
			t.Parallel()
			st := openStoreEncoded(t, c.encoding)
			apply(t, st, credit, delivery(c.ids[0], 1, "x"), delivery(c.ids[1], 2, "y"))
			rs, err := st.ApplyBatch(context.Background(),
				[]ledger.Delivery{delivery(c.ids[1], 2, "y"), delivery(c.ids[0], 1, "x"), delivery("new", 3, "z")},
				credit, ledger.Budget{Work: time.Minute})
			if err != nil {
				t.Fatalf("redelivery of %q and %q with a new message fails the whole batch (nothing acked, the same batch again and again): %v",
					c.ids[1], c.ids[0], err)
			}
			if got := outcomes(rs); !equal(got, []ledger.Outcome{ledger.Duplicate, ledger.Duplicate, ledger.Applied}) {
				t.Fatalf("redelivery outcomes = %v (%+v), want [duplicate duplicate applied]", got, rs)
			}
			if b := balance(t, st); b != 3 {
				t.Fatalf("balance = %d, want 3", b)
			}
		})
	}
}
