package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"path/filepath"
	"testing"
)

// oldChanges is a changeset as a build before schema 18 records it: a row
// of processed_messages keyed by message_id, and a row of a user's table
// whose blob holds the very bytes of that table's header.
func oldChanges(id string) []byte {
	var b []byte
	text := func(kind byte, s []byte) { b = append(append(append(b, kind), byte(len(s))), s...) }
	integer := func(v int64) { b = binary.BigEndian.AppendUint64(append(b, 1), uint64(v)) }
	b = append(append(b, oldLedgerRows...), 18, 0) // INSERT
	sum := sha256.Sum256([]byte(id))
	text(3, []byte(id))
	text(3, []byte("S"))
	integer(7)
	text(3, []byte("ev"))
	text(4, sum[:])
	integer(0)
	integer(7)
	integer(0)
	b = append(append(b, 'T', 2, 1, 0), "notes\x00"...)
	b = append(b, 18, 0)
	text(3, []byte("k"))
	text(4, oldLedgerRows)
	return b
}

// A standby upgraded before its owner applies the old owner's rows of
// processed_messages to processed_messages_v1, where its own rows of that
// layout are, and finds them there; nothing else of the changes changes.
func TestAnOldOwnersLedgerRowsApplyToTheOldLayoutsTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	changes := oldChanges("evt-1")
	out, err := toLegacyRows(changes)
	if err != nil {
		t.Fatal(err)
	}
	renamed := bytes.Replace(changes, oldLedgerRows, append(bytes.Clone(oldLedgerRows[:len(oldLedgerRows)-1]), "_v1\x00"...), 1)
	if !bytes.Equal(out, renamed) {
		t.Fatalf("rewritten changes:\n%q\nwant only the first table's name changed:\n%q", out, renamed)
	}
	st, err := Open(filepath.Join(t.TempDir(), "l.db"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Exec(ctx, `CREATE TABLE notes (k TEXT PRIMARY KEY, v BLOB)`); err != nil {
		t.Fatal(err)
	}
	tx, err := st.writer.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.applyChangeset(ctx, tx, changes); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	var v1, now int
	var note []byte
	if err := st.writer.QueryRow(`SELECT (SELECT count(*) FROM processed_messages_v1 WHERE message_id = 'evt-1'),
		(SELECT count(*) FROM processed_messages), (SELECT v FROM notes)`).Scan(&v1, &now, &note); err != nil {
		t.Fatal(err)
	}
	if v1 != 1 || now != 0 || !bytes.Equal(note, oldLedgerRows) {
		t.Fatalf("after the old changes: %d rows of the old layout, %d of the new, note %q", v1, now, note)
	}
	rs, err := st.ApplyBatch(ctx, []Delivery{{MessageID: "evt-1", Stream: "S", Sequence: 8, Subject: "ev", Data: []byte("evt-1")}},
		func(context.Context, *Tx, Delivery) error { return nil }, Budget{})
	if err != nil || rs[0].Outcome != Duplicate {
		t.Fatalf("evt-1 again: %+v, %v; want a duplicate", rs, err)
	}
	if _, err := toLegacyRows(changes[:len(changes)-3]); err == nil {
		t.Fatal("changes cut short were read without an error")
	}
}
