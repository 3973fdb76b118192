package ledger

import (
	"cmp"
	"database/sql"
	"fmt"
	"maps"
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
	seq     int64 // its processed_messages row; 0 for one of processed_messages_v1
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

// lookup loads the ledger rows of the ids of batch that the pass runs:
// from the rows of the old layout (processed_messages_v1, until they age
// out), then from processed_messages through its index of ids.
func (p *pass) lookup(batch []Delivery, skip []bool) error {
	ids := make([]string, 0, len(batch))
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
	if err := p.lookupLegacy(ids); err != nil {
		return err
	}
	ids = slices.DeleteFunc(ids, func(id string) bool { return p.rows.known[id] != nil })
	found, err := p.s.lookupIDs(p.b.query, ids)
	if err != nil {
		return fmt.Errorf("ledger: look up %d ids: %w", len(ids), err)
	}
	maps.Copy(p.rows.known, found)
	return nil
}

// lookupLegacy loads the rows of ids in processed_messages_v1.
func (p *pass) lookupLegacy(ids []string) error {
	args := make([]any, 0, len(ids))
	for _, id := range ids {
		args = append(args, id)
	}
	// An id above the table's greatest (the order of its primary key,
	// bytewise as Go's in a UTF-8 file) is not in it: ids that grow, as
	// ULIDs do, need no lookup but this one, and an empty table none.
	if p.s.utf8 {
		greatest, err := p.greatestID()
		if err != nil || !greatest.Valid {
			return err
		}
		args = slices.DeleteFunc(args, func(id any) bool { return id.(string) > greatest.String })
	}
	return inChunks(args, func(args []any) error {
		rows, err := p.b.query(`SELECT message_id, payload_sha256, stream, last_seq FROM processed_messages_v1 WHERE message_id IN (`+
			placeholders(len(args))+`)`, args...)
		if err != nil {
			return fmt.Errorf("ledger: look up %d ids: %w", len(args), err)
		}
		return scanSeen(rows, p.rows.known, false)
	})
}

// greatestID is the greatest message id of processed_messages_v1; not
// Valid if it is empty.
func (p *pass) greatestID() (greatest sql.NullString, err error) {
	rows, err := p.b.query(`SELECT max(message_id) FROM processed_messages_v1`)
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

// lookupIDs finds the processed_messages rows of ids through the index,
// reading each candidate row and keeping those whose id is one sought.
func (s *Store) lookupIDs(q query, ids []string) (map[string]*seen, error) {
	found := map[string]*seen{}
	if len(ids) == 0 {
		return found, nil
	}
	cands, err := s.ids.candidates(q, ids)
	if err != nil {
		return nil, err
	}
	var args []any
	have := map[int64]bool{}
	for _, seqs := range cands {
		for _, seq := range seqs {
			if !have[seq] {
				have[seq] = true
				args = append(args, seq)
			}
		}
	}
	slices.SortFunc(args, func(a, b any) int { return cmp.Compare(a.(int64), b.(int64)) })
	all := map[string]*seen{}
	err = inChunks(args, func(args []any) error {
		rows, err := q(`SELECT message_id, payload_sha256, stream, last_seq, seq FROM processed_messages WHERE seq IN (`+
			placeholders(len(args))+`)`, args...)
		if err != nil {
			return err
		}
		return scanSeen(rows, all, true)
	})
	if err != nil {
		return nil, err
	}
	for id := range cands {
		if k := all[id]; k != nil {
			found[id] = k
		}
	}
	return found, nil
}

// inChunks calls f on args in chunks of at most lookupChunk, each rounded
// up to a power of two, padded with a repeated value, so a few statement
// shapes serve every batch.
func inChunks(args []any, f func([]any) error) error {
	for len(args) > 0 {
		n := min(len(args), lookupChunk)
		size := 1 << bits.Len(uint(n-1)) // n rounded up to a power of two
		chunk := args[:n]
		if size > n {
			chunk = make([]any, size)
			copy(chunk, args[:n])
			for i := n; i < size; i++ {
				chunk[i] = args[n-1]
			}
		}
		if err := f(chunk); err != nil {
			return err
		}
		args = args[n:]
	}
	return nil
}

// scanSeen files rows of (message_id, payload_sha256, stream, last_seq
// [, seq]) in known, the first of an id.
func scanSeen(rows *sql.Rows, known map[string]*seen, withSeq bool) error {
	defer rows.Close()
	for rows.Next() {
		k := &seen{stored: true}
		var sum []byte
		dest := []any{&k.id, &sum, &k.stream, &k.lastSeq}
		if withSeq {
			dest = append(dest, &k.seq)
		}
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("ledger: look up ids: %w", err)
		}
		copy(k.sum[:], sum)
		if known[k.id] == nil {
			known[k.id] = k
		}
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
		query, key := `UPDATE processed_messages SET last_seq = ?, last_seen_at = ? WHERE seq = ?`, any(k.seq)
		if k.seq == 0 {
			query, key = `UPDATE processed_messages_v1 SET last_seq = ?, last_seen_at = ? WHERE message_id = ?`, k.id
		}
		if _, err := p.b.exec(query, k.lastSeq, r.now, key); err != nil {
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
	(seq, message_id, stream, stream_seq, last_seq, subject, payload_sha256, processed_at, last_seen_at) VALUES `

const ledgerRowWidth = 9

func (p *pass) insertLedgerRows(rows []*seen) error {
	if len(rows) == 0 {
		return nil
	}
	next, err := p.s.ids.nextSeq(p.b.query)
	if err != nil {
		return err
	}
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
		k.seq = next
		next++
		args = append(args, k.seq, k.id, stream, int64(d.Sequence), k.lastSeq, subject, k.sum[:], now, now)
	}
	exec := func(query string, args ...any) error {
		_, err := p.b.exec(query, args...)
		return err
	}
	if err := insertMany(func(query string, args []any) error { return exec(query, args...) }, ledgerRowHead, "", ledgerRowWidth, args); err != nil {
		return err
	}
	if first, last, pairs := p.s.ids.sealDue(next-1, rows); pairs != nil {
		if err := writeRun(p.b.query, exec, first, last, pairs); err != nil {
			return fmt.Errorf("seal the run of seqs %d..%d: %w", first, last, err)
		}
	}
	return nil
}
