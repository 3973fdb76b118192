package ledger

import (
	"cmp"
	"database/sql"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
)

// pinnedSeq is the last_seq of an id seen in more than one stream: prune
// goes stream by stream and could not tell when every copy is gone, so the
// row is never pruned.
const pinnedSeq = math.MaxInt64

// seen is what a pass knows of one message id: its ledger row as it was
// when the pass began, or the row the pass will insert for a message it
// applied.
type seen struct {
	id      string
	sum     [32]byte
	stream  string
	lastSeq int64 // highest sequence of a copy in stream; pinnedSeq once seen in another
	stored  bool  // in the ledger before the pass; else inserted by flush
	moved   bool  // a stored row whose last_seq the pass raised
	first   *Delivery
}

// conflictRow is a copy whose payload differs from the applied one.
type conflictRow struct {
	d        *Delivery
	existing [32]byte
	sum      [32]byte
}

// ledgerRows is a pass's view of the ledger: one lookup at the start, the
// batch's own rows kept in memory, and every write at the end in as few
// statements as the counts allow. The handlers never see processed_messages
// change (the guard keeps them from writing it), so a lookup at the start
// stays true for the whole pass.
type ledgerRows struct {
	known     map[string]*seen
	fresh     []*seen // rows to insert, in the order applied
	conflicts []conflictRow
	now       int64
}

// lookupChunk is the most ids one lookup binds; chunks are rounded up to a
// power of two, padded with a repeated id, so a few statement shapes serve
// every batch.
const lookupChunk = 512

// lookup loads the ledger rows of the ids of batch that the pass runs.
func (p *pass) lookup(batch []Delivery, skip []bool) error {
	ids := make([]any, 0, len(batch))
	seenID := make(map[string]bool, len(batch))
	for i := range batch {
		if id := batch[i].MessageID; !skip[i] && id != "" && !seenID[id] {
			seenID[id] = true
			ids = append(ids, id)
		}
	}
	p.rows = ledgerRows{known: make(map[string]*seen, len(ids)), now: p.s.cfg.Now().UnixMilli()}
	if len(ids) == 0 {
		return nil
	}
	// An id above the ledger's greatest (the order of its primary key,
	// bytewise as Go's in a UTF-8 file) is not in it: ids that grow, as
	// ULIDs do, need no lookup but this one.
	if p.s.utf8 {
		greatest, err := p.greatestID()
		if err != nil || !greatest.Valid {
			return err
		}
		ids = slices.DeleteFunc(ids, func(id any) bool { return id.(string) > greatest.String })
	}
	for len(ids) > 0 {
		n := min(len(ids), lookupChunk)
		size := 1 << bits.Len(uint(n-1)) // n rounded up to a power of two
		args := ids[:n]
		if size > n {
			args = make([]any, size)
			copy(args, ids[:n])
			for i := n; i < size; i++ {
				args[i] = ids[n-1]
			}
		}
		if err := p.lookupChunk(args); err != nil {
			return err
		}
		ids = ids[n:]
	}
	return nil
}

// greatestID is the ledger's greatest message id; not Valid if it is empty.
func (p *pass) greatestID() (greatest sql.NullString, err error) {
	rows, err := p.b.query(`SELECT max(message_id) FROM processed_messages`)
	if err == nil {
		defer rows.Close()
		if rows.Next() {
			err = rows.Scan(&greatest)
		}
		err = cmp.Or(err, rows.Err())
	}
	if err != nil {
		return greatest, fmt.Errorf("ledger: look up the greatest id: %w", err)
	}
	return greatest, nil
}

func (p *pass) lookupChunk(args []any) error {
	rows, err := p.b.query(`SELECT message_id, payload_sha256, stream, last_seq FROM processed_messages WHERE message_id IN (`+
		placeholders(len(args))+`)`, args...)
	if err != nil {
		return fmt.Errorf("ledger: look up %d ids: %w", len(args), err)
	}
	defer rows.Close()
	for rows.Next() {
		k := &seen{stored: true}
		var sum []byte
		if err := rows.Scan(&k.id, &sum, &k.stream, &k.lastSeq); err != nil {
			return fmt.Errorf("ledger: look up ids: %w", err)
		}
		copy(k.sum[:], sum)
		p.rows.known[k.id] = k
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("ledger: look up ids: %w", err)
	}
	return nil
}

// placeholders is n "?" separated by commas, for an IN list.
func placeholders(n int) string { return strings.TrimSuffix(strings.Repeat("?, ", n), ", ") }

// applied records a message the pass applied: its row is inserted by flush.
func (r *ledgerRows) applied(d *Delivery, sum [32]byte) {
	k := &seen{id: d.MessageID, sum: sum, stream: d.Stream, lastSeq: int64(d.Sequence), first: d}
	r.known[d.MessageID] = k
	r.fresh = append(r.fresh, k)
}

// copyOf classifies a delivery whose id the ledger (or the batch) already
// holds, and notes where this copy was seen: prune keeps the row while it
// is in the stream.
func (r *ledgerRows) copyOf(k *seen, d *Delivery, sum [32]byte) Result {
	seq := int64(d.Sequence)
	if d.Stream != k.stream {
		seq = pinnedSeq
	}
	if seq > k.lastSeq { // a redelivery of the same copy changes nothing
		k.lastSeq = seq
		k.moved = k.stored
	}
	if sum == k.sum {
		return Result{Outcome: Duplicate}
	}
	r.conflicts = append(r.conflicts, conflictRow{d: d, existing: k.sum, sum: sum})
	return Result{Outcome: Conflict, Err: &ConflictError{MessageID: d.MessageID, Existing: k.sum[:], New: sum[:]}}
}

// flush writes the pass's ledger rows: the applied messages' rows in
// multi-row inserts, the copies' last_seq and the conflicts.
func (p *pass) flush() error {
	r := &p.rows
	if err := p.insertLedgerRows(r.fresh); err != nil {
		return fmt.Errorf("ledger: record %d applied messages: %w", len(r.fresh), err)
	}
	for _, k := range r.known {
		if !k.moved {
			continue
		}
		if _, err := p.b.exec(`UPDATE processed_messages SET last_seq = ?, last_seen_at = ? WHERE message_id = ?`,
			k.lastSeq, r.now, k.id); err != nil {
			return fmt.Errorf("ledger: record copy of %s: %w", k.id, err)
		}
	}
	for _, c := range r.conflicts {
		if _, err := p.b.exec(`INSERT INTO conflicts
			(message_id, stream, stream_seq, subject, existing_sha256, new_sha256, payload, seen_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (message_id, stream, stream_seq) DO NOTHING`,
			c.d.MessageID, c.d.Stream, int64(c.d.Sequence), c.d.Subject, c.existing[:], c.sum[:], c.d.Data, r.now); err != nil {
			return fmt.Errorf("ledger: record conflict for %s: %w", c.d.MessageID, err)
		}
	}
	return nil
}

// ledgerRowHead is the ledger row's insert up to VALUES; insertMany binds
// its stream and time, and a subject the rows share, once per statement.
const ledgerRowHead = `INSERT INTO processed_messages
	(message_id, stream, stream_seq, last_seq, subject, payload_sha256, processed_at, last_seen_at) VALUES `

const ledgerRowWidth = 8

func (p *pass) insertLedgerRows(rows []*seen) error {
	args := make([]any, 0, ledgerRowWidth*len(rows))
	// Boxed once: the same value in every row costs no allocation.
	now := any(p.rows.now)
	var stream, subject any
	for _, k := range rows {
		d := k.first
		if stream == nil || stream.(string) != d.Stream {
			stream = d.Stream
		}
		if subject == nil || subject.(string) != d.Subject {
			subject = d.Subject
		}
		args = append(args, k.id, stream, int64(d.Sequence), k.lastSeq, subject, k.sum[:], now, now)
	}
	return insertMany(func(query string, args []any) error {
		_, err := p.b.exec(query, args...)
		return err
	}, ledgerRowHead, "", ledgerRowWidth, args)
}
