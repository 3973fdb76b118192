package ledger

import (
	"bytes"
	"fmt"
)

// oldLedgerRows is the table header of processed_messages as a build before
// schema 18 records it: 8 columns, keyed by message_id.
var oldLedgerRows = append([]byte{'T', 8, 1, 0, 0, 0, 0, 0, 0, 0}, "processed_messages\x00"...)

// toLegacyRows renames, in a changeset, the changes to processed_messages
// of the old layout to processed_messages_v1, where this build keeps those
// rows: a standby upgraded before its owner then applies the old owner's
// entries to the same rows the owner's own migration will rename. Other
// changes are returned as they are.
func toLegacyRows(changes []byte) ([]byte, error) {
	if !bytes.Contains(changes, oldLedgerRows) {
		return changes, nil
	}
	var out []byte
	for b := changes; len(b) > 0; {
		if b[0] != 'T' {
			return nil, fmt.Errorf("%w: the changes cannot be read: a table header was expected", ErrChangesDoNotFit)
		}
		cols, n := sqliteVarint(b[1:])
		end := 1 + n + int(cols)
		if n == 0 || cols > 1<<16 || end > len(b) {
			return nil, fmt.Errorf("%w: the changes cannot be read: a bad table header", ErrChangesDoNotFit)
		}
		name := bytes.IndexByte(b[end:], 0)
		if name < 0 {
			return nil, fmt.Errorf("%w: the changes cannot be read: a table name without its end", ErrChangesDoNotFit)
		}
		header := b[:end+name+1]
		body, err := changesOfTable(b[len(header):], int(cols))
		if err != nil {
			return nil, err
		}
		b = b[len(header)+len(body):]
		if bytes.Equal(header, oldLedgerRows) {
			header = append(bytes.Clone(header[:len(header)-1]), "_v1\x00"...)
		}
		out = append(append(out, header...), body...)
	}
	return out, nil
}

// changesOfTable returns the changes at the start of b up to the next
// table header, each of cols values a record.
func changesOfTable(b []byte, cols int) ([]byte, error) {
	i := 0
	for i < len(b) && b[i] != 'T' {
		if i+2 > len(b) {
			return nil, fmt.Errorf("%w: the changes cannot be read: a change cut short", ErrChangesDoNotFit)
		}
		records := 1
		switch b[i] {
		case 18, 9: // SQLITE_INSERT, SQLITE_DELETE
		case 23: // SQLITE_UPDATE: the old values, then the new
			records = 2
		default:
			return nil, fmt.Errorf("%w: the changes cannot be read: change kind %d", ErrChangesDoNotFit, b[i])
		}
		i += 2 // kind, indirect
		for range records * cols {
			n, err := valueLength(b[i:])
			if err != nil {
				return nil, err
			}
			i += n
		}
	}
	return b[:i], nil
}

// valueLength is the length of the changeset value at the start of b.
func valueLength(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, fmt.Errorf("%w: the changes cannot be read: a value cut short", ErrChangesDoNotFit)
	}
	switch b[0] {
	case 0, 5: // undefined, NULL
		return 1, nil
	case 1, 2: // integer, real
		if len(b) < 9 {
			break
		}
		return 9, nil
	case 3, 4: // text, blob: a varint length, then the bytes
		l, n := sqliteVarint(b[1:])
		if n > 0 && uint64(len(b)-1-n) >= l {
			return 1 + n + int(l), nil
		}
	}
	return 0, fmt.Errorf("%w: the changes cannot be read: a bad value", ErrChangesDoNotFit)
}

// sqliteVarint reads SQLite's variable-length integer (big-endian groups
// of seven bits, the ninth byte whole); n is 0 when b is too short.
func sqliteVarint(b []byte) (v uint64, n int) {
	for i := 0; i < len(b) && i < 9; i++ {
		if i == 8 {
			return v<<8 | uint64(b[i]), 9
		}
		v = v<<7 | uint64(b[i]&0x7f)
		if b[i] < 0x80 {
			return v, i + 1
		}
	}
	return 0, 0
}
