package ledger

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// Status is an outbox row's state.
type Status string

// Outbox states. queued → sending only by Claim; sending → sent only by the
// claimer's MarkSent; failure paths never touch sent rows.
const (
	StatusQueued     Status = "queued"     // waiting to be claimed
	StatusSending    Status = "sending"    // claimed; a send may be in flight
	StatusSent       Status = "sent"       // the destination accepted it (external_id)
	StatusFailed     Status = "failed"     // the destination refused it, or retries ran out
	StatusReview     Status = "review"     // ambiguous: may or may not be at the destination
	StatusCancelled  Status = "cancelled"  // never sent, or deleted at the destination
	StatusSuppressed Status = "suppressed" // recorded but deliberately not sent (replay)
)

// Statuses lists every state, in lifecycle order.
var Statuses = []Status{StatusQueued, StatusSending, StatusSent, StatusFailed, StatusReview, StatusCancelled, StatusSuppressed}

// OutboxItem is one outbox row.
type OutboxItem struct {
	ID            string    `json:"id"` // ULID; the idempotency key sent downstream
	MessageID     string    `json:"message_id"`
	Sink          string    `json:"sink"`
	Payload       []byte    `json:"payload"`
	Status        Status    `json:"status"`
	Attempts      int       `json:"attempts"`
	ClaimedBy     string    `json:"claimed_by,omitempty"`
	ClaimedAt     time.Time `json:"claimed_at,omitzero"`
	LeaseUntil    time.Time `json:"lease_until,omitzero"`
	PendingDelete bool      `json:"pending_delete,omitempty"`
	MaybeSent     bool      `json:"maybe_sent,omitempty"` // an earlier attempt's outcome was unknown
	ExternalID    string    `json:"external_id,omitempty"`
	Error         string    `json:"error,omitempty"`
	NextAttemptAt time.Time `json:"next_attempt_at,omitzero"`
	SentAt        time.Time `json:"sent_at,omitzero"`
	// SentTo is where the row's sends may have gone, recorded with each
	// claim before its send; zero when nothing can say (see Destination).
	SentTo    Destination `json:"sent_to,omitzero"`
	CreatedAt time.Time   `json:"created_at"`
	UpdatedAt time.Time   `json:"updated_at"`
}

// Destination is an instance of a destination and a position in it, as a
// sink names them (for a stream: its name and creation time, and its last
// sequence): the ledger stores it and never reads it. On a row it says that
// every send of the row since the last proof that none had landed went to
// Instance, after Position, so a lookup reading Instance from Position on
// sees every copy. It is zero when the sink names no instance, when the
// row's sends may have gone to more than one, and on rows claimed before
// the ledger recorded it: then nothing proves the item never arrived.
type Destination struct {
	Instance string `json:"instance"`
	Position uint64 `json:"position"`
}

var ulidEntropy = struct {
	sync.Mutex
	r io.Reader
}{r: ulid.Monotonic(rand.Reader, 0)}

func newULID(now time.Time) string {
	ulidEntropy.Lock()
	defer ulidEntropy.Unlock()
	return ulid.MustNew(ulid.Timestamp(now), ulidEntropy.r).String()
}

// Enqueue adds an outbox row for the message being applied, inside its
// savepoint: the row exists if and only if the message is applied. It
// returns the row's id, which is also the idempotency key.
func (t *Tx) Enqueue(ctx context.Context, sink string, payload []byte) (string, error) {
	return t.enqueue(ctx, sink, payload, StatusQueued, "")
}

// EnqueuePayload is a Handler that enqueues each delivery's payload to
// sink's outbox in the delivery's savepoint, so that the row exists if and
// only if the message is applied: a consumer (or sqlhandler.Config.Effect)
// that sends every message on, with nothing else to record.
func EnqueuePayload(sink string) Handler {
	return func(ctx context.Context, tx *Tx, d Delivery) error {
		_, err := tx.Enqueue(ctx, sink, d.Data)
		return err
	}
}

// EnqueueSuppressed records an effect that must not be sent (a replayed
// message's, say), so the ledger still shows it.
func (t *Tx) EnqueueSuppressed(ctx context.Context, sink string, payload []byte) (string, error) {
	return t.enqueue(ctx, sink, payload, StatusSuppressed, "")
}

// EnqueueReview records an effect whose fate nobody can tell (a replay of a
// message another process may have handled and sent) straight into review,
// with reason, for a person to settle; it is never sent automatically.
func (t *Tx) EnqueueReview(ctx context.Context, sink string, payload []byte, reason string) (string, error) {
	return t.enqueue(ctx, sink, payload, StatusReview, reason)
}

// enqueue inserts the row in status st; a review row (reason set) may be at
// the destination, so it carries maybe_sent from the start.
func (t *Tx) enqueue(ctx context.Context, sink string, payload []byte, st Status, reason string) (string, error) {
	if t.d == nil {
		return "", fmt.Errorf("ledger: enqueue outside a handler")
	}
	if t.done.Load() {
		return "", ErrTxDone
	}
	if sink == "" {
		return "", fmt.Errorf("ledger: enqueue for %s: empty sink name", t.d.MessageID)
	}
	if sinks := t.b.s.cfg.Sinks; sinks != nil && !slices.Contains(sinks, sink) {
		return "", fmt.Errorf("ledger: enqueue for %s: sink %q (this store serves %q): %w", t.d.MessageID, sink, sinks, ErrUnknownSink)
	}
	now := t.b.s.cfg.Now()
	id := newULID(now)
	if payload == nil {
		payload = []byte{}
	}
	if _, err := t.ownExec(ctx, `INSERT INTO outbox (id, message_id, sink, payload, status, maybe_sent, error, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, nullif(?, ''), ?, ?)`, id, t.d.MessageID, sink, payload, string(st), st == StatusReview, reason,
		now.UnixMilli(), now.UnixMilli()); err != nil {
		return "", fmt.Errorf("ledger: enqueue for %s: %w", t.d.MessageID, err)
	}
	return id, nil
}

const outboxCols = `id, message_id, sink, payload, status, attempts, claimed_by, claimed_at, lease_until,
	pending_delete, maybe_sent, external_id, error, next_attempt_at, sent_at, sent_to_instance, sent_to_position,
	created_at, updated_at`

func scanItem(sc scanner) (OutboxItem, error) {
	var it OutboxItem
	var status string
	var claimedBy, ext, errText, sentTo sql.NullString
	var claimedAt, lease, sentAt, sentToPos sql.NullInt64
	var next, created, updated int64
	if err := sc.Scan(&it.ID, &it.MessageID, &it.Sink, &it.Payload, &status, &it.Attempts, &claimedBy, &claimedAt,
		&lease, &it.PendingDelete, &it.MaybeSent, &ext, &errText, &next, &sentAt, &sentTo, &sentToPos, &created, &updated); err != nil {
		return OutboxItem{}, err
	}
	it.Status, it.ClaimedBy, it.ExternalID, it.Error = Status(status), claimedBy.String, ext.String, errText.String
	if sentTo.Valid && sentToPos.Valid {
		it.SentTo = Destination{Instance: sentTo.String, Position: uint64(sentToPos.Int64)}
	}
	it.ClaimedAt, it.LeaseUntil, it.SentAt = msTime(claimedAt), msTime(lease), msTime(sentAt)
	if next > 0 {
		it.NextAttemptAt = time.UnixMilli(next)
	}
	it.CreatedAt, it.UpdatedAt = time.UnixMilli(created), time.UnixMilli(updated)
	return it, nil
}

func msTime(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMilli(v.Int64)
}

// Get reads one outbox row.
// It reads through the reader connections, so it never waits behind a batch
// holding the writer.
func (s *Store) Get(ctx context.Context, id string) (OutboxItem, error) {
	it, err := scanItem(s.reader.QueryRowContext(ctx, `SELECT `+outboxCols+` FROM outbox WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return OutboxItem{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return OutboxItem{}, fmt.Errorf("ledger: get outbox %s: %w", id, err)
	}
	return it, nil
}

// ListOutbox lists rows, oldest first, optionally of one status; limit 0 is all.
func (s *Store) ListOutbox(ctx context.Context, status Status, limit int) ([]OutboxItem, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.reader.QueryContext(ctx, `SELECT `+outboxCols+` FROM outbox
		WHERE ? = '' OR status = ? ORDER BY id LIMIT ?`, string(status), string(status), limit)
	return collect("list outbox", rows, err, scanItem)
}

// OutboxCounts counts rows per status.
func (s *Store) OutboxCounts(ctx context.Context) (map[Status]int64, error) {
	type count struct {
		st Status
		n  int64
	}
	rows, err := s.reader.QueryContext(ctx, `SELECT status, count(*) FROM outbox GROUP BY status`)
	counts, err := collect("count outbox", rows, err, func(sc scanner) (c count, err error) {
		return c, sc.Scan(&c.st, &c.n)
	})
	if err != nil {
		return nil, err
	}
	out := map[Status]int64{}
	for _, st := range Statuses {
		out[st] = 0
	}
	for _, c := range counts {
		out[c.st] = c.n
	}
	return out, nil
}

// Due returns ids of queued rows of sink whose next attempt is due, oldest
// first. They are candidates: Claim decides who gets each. A row last
// changed more than a minute ahead of the clock now was scheduled before
// the clock stepped back, and by the clock would wait as long as the step:
// it is due (see leaseOver).
func (s *Store) Due(ctx context.Context, sink string, limit int) ([]string, error) {
	rows, err := s.writer.QueryContext(ctx, `SELECT id FROM outbox
		WHERE status = 'queued' AND sink = ? AND (next_attempt_at <= ?2 OR updated_at > ?2 + `+clockStepSlackMs+`)
		ORDER BY id LIMIT ?3`,
		sink, s.cfg.Now().UnixMilli(), limit)
	return collect("due outbox rows", rows, err, func(sc scanner) (id string, err error) { return id, sc.Scan(&id) })
}

// Resolve settles a row in review by a person's decision: sent (with the
// external id found at the destination) or failed. It is ResolveSent or
// ResolveFailed, and returns the row as it left it. A row cancelled while it
// was being sent is never settled as sent (ErrCancelPending); "failed", the
// item is not there, finishes its cancel (SettleCancel): it is cancelled,
// never sent again.
func (s *Store) Resolve(ctx context.Context, id string, as Status, externalID string) (OutboxItem, error) {
	switch as {
	case StatusFailed:
		it, err := s.Transition(ctx, id, ResolveFailed, Params{})
		if errors.Is(err, ErrCancelPending) {
			return s.Transition(ctx, id, SettleCancel, Params{Reason: "cancelled while sending; a person found the item not at the destination"})
		}
		return it, err
	case StatusSent:
		if externalID == "" {
			return OutboxItem{}, fmt.Errorf("%w: resolving %s as sent needs the external id", ErrIllegalTransition, id)
		}
		return s.Transition(ctx, id, ResolveSent, Params{ExternalID: externalID})
	}
	return OutboxItem{}, fmt.Errorf("%w: resolve %s as %q: want sent or failed", ErrIllegalTransition, id, as)
}

// Retry puts a failed row back in the queue (Requeue).
func (s *Store) Retry(ctx context.Context, id string) error {
	_, err := s.Transition(ctx, id, Requeue, Params{})
	return err
}

// Reviewable returns review rows of sink due for a lookup at the
// destination, oldest first.
func (s *Store) Reviewable(ctx context.Context, sink string, limit int) ([]OutboxItem, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT `+outboxCols+` FROM outbox
		WHERE status = 'review' AND sink = ? AND (next_attempt_at <= ?2 OR updated_at > ?2 + `+clockStepSlackMs+`)
		ORDER BY id LIMIT ?3`,
		sink, s.cfg.Now().UnixMilli(), limit)
	return collect("reviewable outbox rows", rows, err, scanItem)
}

// LastSent returns the newest sent row of sink, if there is one: a known
// item to check a destination's lookup against.
func (s *Store) LastSent(ctx context.Context, sink string) (OutboxItem, bool, error) {
	return s.LastSentExcept(ctx, sink, "")
}

// LastSentExcept is LastSent passing over row except: a known item to check
// a lookup against when the lookup is asked about except itself.
func (s *Store) LastSentExcept(ctx context.Context, sink, except string) (OutboxItem, bool, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT `+outboxCols+` FROM outbox
		WHERE status = 'sent' AND sink = ? AND id <> ? ORDER BY id DESC LIMIT 1`, sink, except)
	items, err := collect("last sent outbox row", rows, err, scanItem)
	if err != nil || len(items) == 0 {
		return OutboxItem{}, false, err
	}
	return items[0], true, nil
}

// SentInto returns up to limit sent rows of sink whose sends went to
// instance (their recorded Destination) and were claimed after after,
// earliest claim first: rows a sink can check the instance still holds (at
// the place their external ids name) before it says another row never
// arrived there. The ledger does not read the ids; the sink does.
func (s *Store) SentInto(ctx context.Context, sink, instance string, after time.Time, limit int) ([]OutboxItem, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT `+outboxCols+` FROM outbox
		WHERE status = 'sent' AND sink = ? AND sent_to_instance = ? AND claimed_at > ? ORDER BY claimed_at, id LIMIT ?`,
		sink, instance, after.UnixMilli(), limit)
	return collect("outbox rows sent into "+instance, rows, err, scanItem)
}

// Expired is what ExpireLeases did.
type Expired struct {
	Review   []string // sending rows whose worker vanished: moved to review
	Requeued []string // sending rows re-queued because the sink is idempotent
}

// ExpireLeases handles rows of sink whose worker's lease ran out mid-send.
// Such a send is ambiguous. With requeue (the destination honours
// idempotency keys) the row is queued again to be re-sent with the same key
// (ExpireRequeue, which keeps maybe_sent); otherwise it goes to review
// (Expire), never re-sent automatically. A row cancelled during such a send
// also goes to review: its item may be at the destination.
func (s *Store) ExpireLeases(ctx context.Context, sink string, requeue bool) (Expired, error) {
	type row struct{ id, status, worker string }
	rows, err := s.writer.QueryContext(ctx, `SELECT id, status, claimed_by FROM outbox
		WHERE sink = ? AND (lease_until < :now OR claimed_at > :now + `+clockStepSlackMs+`)
		AND (status = 'sending' OR (status = 'cancelled' AND pending_delete = 1))`,
		sink, sql.Named("now", s.cfg.Now().UnixMilli()))
	found, err := collect("expired leases", rows, err, func(sc scanner) (r row, err error) {
		return r, sc.Scan(&r.id, &r.status, &r.worker)
	})
	if err != nil {
		return Expired{}, err
	}
	var ex Expired
	for _, r := range found {
		c, list := Expire, &ex.Review
		if requeue && r.status == string(StatusSending) {
			c, list = ExpireRequeue, &ex.Requeued
		}
		_, err := s.Transition(ctx, r.id, c, Params{Worker: r.worker})
		switch {
		case err == nil:
			*list = append(*list, r.id)
		case errors.Is(err, ErrNotOwner), errors.Is(err, ErrIllegalTransition), errors.Is(err, ErrCancelled):
			// Its worker wrote back meanwhile: not ours to expire.
		default:
			return ex, err
		}
	}
	return ex, nil
}

// CountOutbox counts rows in status created at or after since.
func (s *Store) CountOutbox(ctx context.Context, status Status, since time.Time) (int64, error) {
	var n int64
	if err := s.reader.QueryRowContext(ctx, `SELECT count(*) FROM outbox WHERE status = ? AND created_at >= ?`,
		string(status), since.UnixMilli()).Scan(&n); err != nil {
		return 0, fmt.Errorf("ledger: count outbox: %w", err)
	}
	return n, nil
}

// LastExternalSeq is the highest sequence among the outbox rows whose
// external id is "<stream>:<seq>" (a NATS sink's, stored at that sequence
// of stream), 0 with none: where a stream of that name made again must
// number from, above, for a source of it to take its messages.
func (s *Store) LastExternalSeq(ctx context.Context, stream string) (uint64, error) {
	prefix := stream + ":"
	var n sql.NullInt64
	err := s.reader.QueryRowContext(ctx, `SELECT max(CAST(substr(external_id, length(?1) + 1) AS INTEGER)) FROM outbox
		WHERE substr(external_id, 1, length(?1)) = ?1`, prefix).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("ledger: last sequence sent to %s: %w", stream, err)
	}
	return uint64(max(n.Int64, 0)), nil
}
