package ledger

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// DeadLetter is a message the consumer gave up on, kept with its headers and
// payload so that it can be inspected and republished with its original id.
type DeadLetter struct {
	ID        int64  `json:"id"`
	MessageID string `json:"message_id"` // empty when the message carried no Nats-Msg-Id
	Stream    string `json:"stream"`
	// Instance is the stream instance (consumer.StreamInstance: name and
	// creation time) the message was in; '' for one recorded before the
	// ledger kept it. Sequences count from 1 in each instance.
	Instance   string              `json:"stream_instance,omitempty"`
	Sequence   uint64              `json:"stream_seq"`
	Subject    string              `json:"subject"`
	Headers    map[string][]string `json:"headers"`
	Payload    []byte              `json:"payload"`
	Reason     string              `json:"reason"`
	Deliveries uint64              `json:"deliveries"`
	CreatedAt  time.Time           `json:"created_at"`
}

// RecordDeadLetters stores dead letters in one transaction. A message that
// is dead-lettered again (same stream instance and sequence) has its row
// updated.
func (s *Store) RecordDeadLetters(ctx context.Context, dls []DeadLetter) error {
	return s.explainFull(interpret(s.recordDeadLetters(ctx, dls)))
}

func (s *Store) recordDeadLetters(ctx context.Context, dls []DeadLetter) error {
	if len(dls) == 0 {
		return nil
	}
	tx, err := s.write(ctx)
	if err != nil {
		return fmt.Errorf("ledger: record dead letters: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	now := s.cfg.Now().UnixMilli()
	for _, dl := range dls {
		hdr, err := json.Marshal(cmpHeaders(dl.Headers))
		if err != nil {
			return fmt.Errorf("ledger: dead letter %s/%d headers: %w", dl.Stream, dl.Sequence, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO dead_letters
			(message_id, stream, stream_instance, stream_seq, subject, headers, payload, reason, deliveries, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (stream, stream_instance, stream_seq) DO UPDATE SET
				reason = excluded.reason, deliveries = excluded.deliveries, created_at = excluded.created_at`,
			dl.MessageID, dl.Stream, dl.Instance, int64(dl.Sequence), dl.Subject, string(hdr), dl.Payload,
			dl.Reason, int64(dl.Deliveries), now); err != nil {
			return fmt.Errorf("ledger: record dead letter %s/%d: %w", dl.Stream, dl.Sequence, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("ledger: record dead letters: %w", err)
	}
	return nil
}

func cmpHeaders(h map[string][]string) map[string][]string {
	if h == nil {
		return map[string][]string{}
	}
	return h
}

// DeadLetters lists dead letters, oldest first, at most limit (0: all).
func (s *Store) DeadLetters(ctx context.Context, limit int) ([]DeadLetter, error) {
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	return s.deadLetters(ctx, `ORDER BY id LIMIT ?`, limit)
}

func (s *Store) deadLetters(ctx context.Context, where string, args ...any) ([]DeadLetter, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT id, message_id, stream, stream_instance, stream_seq, subject, headers,
		payload, reason, deliveries, created_at FROM dead_letters `+where, args...)
	return collect("list dead letters", rows, err, func(sc scanner) (DeadLetter, error) {
		var dl DeadLetter
		var seq, deliveries, created int64
		var hdr string
		if err := sc.Scan(&dl.ID, &dl.MessageID, &dl.Stream, &dl.Instance, &seq, &dl.Subject, &hdr,
			&dl.Payload, &dl.Reason, &deliveries, &created); err != nil {
			return dl, err
		}
		dl.Sequence, dl.Deliveries = uint64(seq), uint64(deliveries)
		dl.CreatedAt = time.UnixMilli(created)
		if err := json.Unmarshal([]byte(hdr), &dl.Headers); err != nil {
			return dl, fmt.Errorf("dead letter %d headers: %w", dl.ID, err)
		}
		return dl, nil
	})
}

// ConflictRecord is a same-id-different-payload case from the conflicts table.
type ConflictRecord struct {
	ID             int64     `json:"id"`
	MessageID      string    `json:"message_id"`
	Stream         string    `json:"stream"`
	Sequence       uint64    `json:"stream_seq"`
	Subject        string    `json:"subject"`
	ExistingSHA256 SHA256    `json:"existing_sha256"` // of the applied payload
	NewSHA256      SHA256    `json:"new_sha256"`      // of the payload that reused the id
	SeenAt         time.Time `json:"seen_at"`
	// Acknowledged is when a person acknowledged it (AcknowledgeConflict),
	// zero while it needs attention; By and Note say who and how.
	Acknowledged time.Time `json:"acknowledged,omitzero"`
	By           string    `json:"acknowledged_by,omitempty"`
	Note         string    `json:"note,omitempty"`
}

// SHA256 is a payload's hash, said in hex everywhere (JSON and tables).
type SHA256 []byte

func (h SHA256) String() string { return hex.EncodeToString(h) }

// MarshalText says h in hex.
func (h SHA256) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText reads h from hex.
func (h *SHA256) UnmarshalText(b []byte) error {
	v, err := hex.DecodeString(string(b))
	*h = v
	return err
}

// Conflicts lists recorded conflicts, oldest first, at most limit (0: all).
func (s *Store) Conflicts(ctx context.Context, limit int) ([]ConflictRecord, error) {
	if limit <= 0 {
		limit = -1
	}
	return s.conflicts(ctx, `ORDER BY c.id LIMIT ?`, limit)
}

// AppliedFrom is where the message applied under a conflict's id was:
// its stream, sequence and subject.
type AppliedFrom struct {
	Stream   string `json:"stream"`
	Sequence uint64 `json:"stream_seq"`
	Subject  string `json:"subject"`
}

// Conflict reads conflict id, and where the message applied under its id
// was (ok false once the id is pruned from the ledger).
func (s *Store) Conflict(ctx context.Context, id int64) (c ConflictRecord, applied AppliedFrom, ok bool, err error) {
	cs, err := s.conflicts(ctx, `WHERE c.id = ?`, id)
	if err == nil && len(cs) == 0 {
		err = fmt.Errorf("%w: conflict %d", ErrNotFound, id)
	}
	if err != nil {
		return c, applied, false, err
	}
	var seq int64
	from, key, err := s.rowOf(ctx, cs[0].MessageID)
	if err == nil {
		err = s.reader.QueryRowContext(ctx, `SELECT stream, stream_seq, subject FROM `+from, key).Scan(&applied.Stream, &seq, &applied.Subject)
	}
	applied.Sequence = uint64(seq)
	if errors.Is(err, sql.ErrNoRows) {
		return cs[0], AppliedFrom{}, false, nil
	}
	if err != nil {
		return cs[0], AppliedFrom{}, false, fmt.Errorf("ledger: conflict %d: where %s was applied from: %w", id, cs[0].MessageID, interpret(err))
	}
	return cs[0], applied, true, nil
}

// conflicts reads the conflicts rest (a WHERE or ORDER clause) selects.
func (s *Store) conflicts(ctx context.Context, rest string, args ...any) ([]ConflictRecord, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT c.id, c.message_id, c.stream, c.stream_seq, c.subject,
		c.existing_sha256, c.new_sha256, c.seen_at, a.acknowledged_at, coalesce(a.acknowledged_by, ''), coalesce(a.note, '')
		FROM conflicts c LEFT JOIN jetledger_conflict_acks a ON a.conflict_id = c.id `+rest, args...)
	return collect("list conflicts", rows, err, func(sc scanner) (ConflictRecord, error) {
		var c ConflictRecord
		var seq, seen int64
		var acked sql.NullInt64
		err := sc.Scan(&c.ID, &c.MessageID, &c.Stream, &seq, &c.Subject, &c.ExistingSHA256, &c.NewSHA256, &seen, &acked, &c.By, &c.Note)
		c.Sequence, c.SeenAt = uint64(seq), time.UnixMilli(seen)
		if acked.Valid {
			c.Acknowledged = time.UnixMilli(acked.Int64)
		}
		return c, err
	})
}

// DeadLetter reads one dead letter by its id.
func (s *Store) DeadLetter(ctx context.Context, id int64) (DeadLetter, error) {
	dls, err := s.deadLetters(ctx, `WHERE id = ?`, id)
	if err != nil {
		return DeadLetter{}, err
	}
	if len(dls) == 0 {
		return DeadLetter{}, fmt.Errorf("%w: dead letter %d", ErrNotFound, id)
	}
	return dls[0], nil
}

// HasDeadLetter reports whether the message at seq of the stream's
// instance is dead-lettered (a row recorded before instances were kept
// counts for any instance: it may be this one's).
func (s *Store) HasDeadLetter(ctx context.Context, stream, instance string, seq uint64) (bool, error) {
	var n int
	err := s.reader.QueryRowContext(ctx, `SELECT count(*) FROM dead_letters
		WHERE stream = ? AND stream_instance IN (?, '') AND stream_seq = ?`, stream, instance, int64(seq)).Scan(&n)
	return n > 0, err
}

// HasProcessed reports whether the ledger holds the message: by its id when
// it is known, otherwise by the stream sequence at which an id was applied
// or last seen.
func (s *Store) HasProcessed(ctx context.Context, stream string, seq uint64, id string) (bool, error) {
	var n int
	var err error
	if id != "" {
		var from string
		if from, _, err = s.rowOf(ctx, id); from != "" {
			n = 1
		} else if errors.Is(err, sql.ErrNoRows) {
			err = nil
		}
	} else {
		err = s.reader.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM processed_messages
			WHERE stream = ?1 AND (last_seq = ?2 OR stream_seq = ?2)) + (SELECT count(*) FROM processed_messages_v1
			WHERE stream = ?1 AND (last_seq = ?2 OR stream_seq = ?2))`, stream, int64(seq)).Scan(&n)
	}
	if err != nil {
		return false, fmt.Errorf("ledger: look up %s/%d: %w", stream, seq, err)
	}
	return n > 0, nil
}

// DiscardDeadLetter deletes a dead letter: a person decided it needs nothing.
func (s *Store) DiscardDeadLetter(ctx context.Context, id int64) error {
	return s.DiscardDeadLetterAs(ctx, id, nil)
}

// DiscardDeadLetterAs is DiscardDeadLetter as a person's action, recorded
// (Audit) in its transaction when a is set.
func (s *Store) DiscardDeadLetterAs(ctx context.Context, id int64, a *Audit) error {
	return s.removeDeadLetter(ctx, id, "discard", a)
}

// RequeuedDeadLetterAs removes dead letter id once its copy is back in its
// stream (package requeue), recorded as a person's action "requeue" when a
// is set.
func (s *Store) RequeuedDeadLetterAs(ctx context.Context, id int64, a *Audit) error {
	return s.removeDeadLetter(ctx, id, "requeue", a)
}

// removeDeadLetter deletes dead letter id, recorded as action by a, and
// keeps its sequence in jetledger_removed (the ledger has seen it).
func (s *Store) removeDeadLetter(ctx context.Context, id int64, action string, a *Audit) error {
	res, err := s.writeTxExec(ctx, func(tx *writeTx, res sql.Result) error {
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM dead_letters WHERE id = ?`, id); err != nil || a == nil {
			return err
		}
		return insertAudit(ctx, tx, s.cfg.Now().UnixMilli(), a, action, fmt.Sprintf("dead letter %d", id))
	}, `INSERT INTO jetledger_removed (id, seq) SELECT 1, stream_seq FROM dead_letters WHERE id = ?
		ON CONFLICT (id) DO UPDATE SET seq = max(seq, excluded.seq)`, id)
	if err != nil {
		return fmt.Errorf("ledger: %s dead letter %d: %w", action, id, interpret(err))
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%w: dead letter %d", ErrNotFound, id)
	}
	return nil
}

// ClearDeadLetter removes, in the message's savepoint, the dead letter of the
// message being applied (same stream and sequence), if it has one, and
// reports whether it had. A replay applying a message that run gave up on
// (after its cause was fixed) settles its dead letter this way: the message
// was never handled by run, so its effects are not run's to have sent.
func (t *Tx) ClearDeadLetter(ctx context.Context) (bool, error) {
	if t.d == nil {
		return false, fmt.Errorf("ledger: clear dead letter outside a handler")
	}
	res, err := t.ownExec(ctx, `DELETE FROM dead_letters WHERE stream = ? AND stream_instance IN (?, '') AND stream_seq = ?`,
		t.d.Stream, t.d.Instance, int64(t.d.Sequence))
	if err != nil {
		return false, fmt.Errorf("ledger: clear dead letter of %s/%d: %w", t.d.Stream, t.d.Sequence, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// ClassifyUnseen decides what a copy the consumer never got to apply (the
// server gave up on it) was: Duplicate if its id is in the ledger with its
// payload, Conflict if with another (recorded in conflicts, as ApplyBatch
// would), 0 if the ledger does not know the id. Either way the ledger
// records where the copy was seen, so prune keeps the row while it is in the
// stream.
func (s *Store) ClassifyUnseen(ctx context.Context, d Delivery) (Outcome, error) {
	tx, err := s.write(ctx)
	if err != nil {
		return 0, fmt.Errorf("ledger: classify %s: %w", d.MessageID, interpret(err))
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	p := &pass{s: s, ctx: ctx, b: newBatchTx(s, tx.Tx, context.WithoutCancel(ctx))}
	if err := p.lookup([]Delivery{d}, []bool{false}); err != nil {
		return 0, fmt.Errorf("ledger: classify %s: %w", d.MessageID, interpret(err))
	}
	k := p.rows.known[d.MessageID]
	if k == nil {
		return 0, nil
	}
	res := p.rows.copyOf(k, &d, sha256.Sum256(d.Data))
	if err := p.flush(); err != nil {
		return 0, interpret(err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("ledger: classify %s: %w", d.MessageID, interpret(err))
	}
	return res.Outcome, nil
}

// AdoptSequenceIDs renames the ledger rows of stream whose ids have the
// sequence-id form of earlier releases, "<stream>/<seq>", to prefix+"<seq>",
// for rows applied since the stream instance was created (older ones belong
// to an earlier instance of the stream and keep their ids). It returns how
// many it renamed. A consumer that allows sequence ids calls it at start, so
// a message applied under the old form is still a duplicate.
func (s *Store) AdoptSequenceIDs(ctx context.Context, stream, prefix string, created time.Time) (int64, error) {
	old := stream + "/"
	// The range is the primary key's: only ids starting "<stream>/" are read.
	// Rows of those releases are all of the old layout. The rows of
	// processed_messages are never renamed in place: the fingerprints of
	// their run would no longer find them.
	res, err := s.writeExec(ctx, `UPDATE OR IGNORE processed_messages_v1 SET message_id = ?1 || stream_seq
		WHERE message_id >= ?2 AND message_id < ?3 AND stream = ?4 AND message_id = ?2 || stream_seq AND processed_at >= ?5`,
		prefix, old, stream+"0", stream, created.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("ledger: adopt sequence ids of %s: %w", stream, interpret(err))
	}
	return res.RowsAffected()
}
