package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Consumer is a stream and a durable consumer on it that this database
// served, as recorded by RememberConsumer. The ledger only keeps the names,
// and the caller's name for the stream's instance.
type Consumer struct {
	Stream  string `json:"stream"`
	Durable string `json:"durable"`
	// StreamInstance is the instance of the stream last served, as the
	// caller named it (jetledger: consumer.StreamInstance); empty when none
	// was recorded.
	StreamInstance string    `json:"stream_instance,omitempty"`
	FirstSeen      time.Time `json:"first_seen"`
	LastSeen       time.Time `json:"last_seen"`
	// ServerURL is the NATS server the run last reached the stream
	// through (RecordServer), without credentials; empty when not known.
	ServerURL string `json:"server_url,omitempty"`
}

// RememberConsumer records that this database serves durable on stream, so
// that tools reading it later can tell which one without being told, and
// which instance of the stream it is (empty: not known; an instance
// recorded before stays). A pair already recorded only has its last-seen
// time and instance moved; the others stay.
func (s *Store) RememberConsumer(ctx context.Context, stream, durable, instance string) error {
	if stream == "" || durable == "" {
		return errors.New("ledger: remember consumer: the stream and the durable need names")
	}
	now := s.cfg.Now().UnixMilli()
	var inst any
	if instance != "" {
		inst = instance
	}
	if _, err := s.writeExec(ctx, `INSERT INTO jetledger_consumers (stream, durable, first_seen, last_seen, stream_instance)
		VALUES (?1, ?2, ?3, ?3, ?4) ON CONFLICT (stream, durable) DO UPDATE SET last_seen = max(last_seen, excluded.last_seen),
		stream_instance = coalesce(excluded.stream_instance, stream_instance)`,
		stream, durable, now, inst); err != nil {
		return fmt.Errorf("ledger: remember consumer %s/%s: %w", stream, durable, interpret(err))
	}
	return nil
}

// Consumers returns the recorded consumers, the one seen last first.
func (s *Store) Consumers(ctx context.Context) ([]Consumer, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT stream, durable, coalesce(stream_instance, ''), first_seen, last_seen, coalesce(server_url, '')
		FROM jetledger_consumers ORDER BY last_seen DESC, stream, durable`)
	return collect("consumers", rows, err, func(sc scanner) (Consumer, error) {
		var c Consumer
		var first, last int64
		err := sc.Scan(&c.Stream, &c.Durable, &c.StreamInstance, &first, &last, &c.ServerURL)
		c.FirstSeen, c.LastSeen = time.UnixMilli(first), time.UnixMilli(last)
		return c, err
	})
}

// ForgetConsumer removes stream/durable from the consumers this ledger
// served (RememberConsumer): tools no longer ask which one to read. Its
// rows stay. Recorded as a person's action when a is set; one not
// recorded is ErrNotFound.
func (s *Store) ForgetConsumer(ctx context.Context, stream, durable string, a *Audit) error {
	res, err := s.audited(ctx, a, "forget", "consumer "+stream+"/"+durable,
		`DELETE FROM jetledger_consumers WHERE stream = ? AND durable = ?`, stream, durable)
	if err != nil {
		return fmt.Errorf("ledger: forget consumer %s/%s: %w", stream, durable, interpret(err))
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%w: consumer %s/%s was never recorded in this ledger", ErrNotFound, stream, durable)
	}
	return nil
}

// RecordServer records url as the NATS server through which stream's
// durable is served (Consumer.ServerURL), for the commands that pair
// the ledger with a server later. Give it without credentials. The pair
// must be remembered first (RememberConsumer).
func (s *Store) RecordServer(ctx context.Context, stream, durable, url string) error {
	if _, err := s.writeExec(ctx, `UPDATE jetledger_consumers SET server_url = ? WHERE stream = ? AND durable = ? AND coalesce(server_url, '') <> ?`,
		url, stream, durable, url); err != nil {
		return fmt.Errorf("ledger: record the server of %s/%s: %w", stream, durable, interpret(err))
	}
	return nil
}
