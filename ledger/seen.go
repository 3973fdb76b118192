package ledger

import (
	"fmt"
	"math"
	"math/bits"
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

// rowsOf is n rows of width "?" each, for VALUES: "(?, ?), (?, ?)".
func rowsOf(n, width int) string {
	return strings.TrimSuffix(strings.Repeat("("+placeholders(width)+"), ", n), ", ")
}

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
	// Rows of one stream share its name and the time: bound once per
	// statement as ?1 and ?2, not once a row (each text binding is an
	// allocation, a copy and an unbinding in the driver).
	for start := 0; start < len(r.fresh); {
		stream := r.fresh[start].first.Stream
		end := start + 1
		for end < len(r.fresh) && r.fresh[end].first.Stream == stream {
			end++
		}
		if err := p.insertLedgerRows(stream, r.fresh[start:end]); err != nil {
			return fmt.Errorf("ledger: record %d applied messages: %w", len(r.fresh), err)
		}
		start = end
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

// ledgerRowWidth is the values of a ledger row bound per row; the stream
// and the time are bound once per statement.
const ledgerRowWidth = 5

func (p *pass) insertLedgerRows(stream string, rows []*seen) error {
	args := make([]any, 0, 2+ledgerRowWidth*min(len(rows), maxRowsPerInsert))
	var subject any
	for len(rows) > 0 {
		n := 1 << (bits.Len(uint(min(len(rows), maxRowsPerInsert))) - 1)
		args = append(args[:0], stream, p.rows.now)
		for _, k := range rows[:n] {
			d := k.first
			if subject == nil || subject.(string) != d.Subject {
				subject = d.Subject
			}
			args = append(args, k.id, int64(d.Sequence), k.lastSeq, subject, k.sum[:])
		}
		if _, err := p.b.exec(ledgerInsert(n), args...); err != nil {
			return err
		}
		rows = rows[n:]
	}
	return nil
}

// ledgerInserts[i] inserts 1<<i ledger rows: the first row numbers its
// parameters after ?1 (stream) and ?2 (time), and SQLite numbers each later
// "?" one past the largest so far.
var ledgerInserts = func() (q [9]string) { // 1 to maxRowsPerInsert (256) rows
	for i := range q {
		q[i] = `INSERT INTO processed_messages
		(message_id, stream, stream_seq, last_seq, subject, payload_sha256, processed_at, last_seen_at) VALUES
		(?3, ?1, ?4, ?5, ?6, ?7, ?2, ?2)` + strings.Repeat(", (?, ?1, ?, ?, ?, ?, ?2, ?2)", 1<<i-1)
	}
	return q
}()

func ledgerInsert(n int) string { return ledgerInserts[bits.Len(uint(n))-1] }
