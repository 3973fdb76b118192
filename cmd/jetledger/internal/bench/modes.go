package bench

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// payload is message i's JSON, padded with a "pad" string up to size bytes
// when it is shorter.
func payload(rng *rand.Rand, i, size int) []byte {
	b := fmt.Appendf(nil, `{"account":"acct-%d","amount":%d,"n":%d}`, rng.IntN(100), 1+rng.IntN(1000), i)
	const padding = `,"pad":""` // the field added, without its value
	if pad := size - len(b) - len(padding); pad > 0 {
		b = append(b[:len(b)-1], padding[:len(padding)-1]...)
		b = append(b, bytes.Repeat([]byte("x"), pad)...)
		b = append(b, `"}`...)
	}
	return b
}

// publish creates the stream, fills it with n messages with ids and
// payloads of size (payload), and returns the rate of acked publishes and
// the mean payload size.
func publish(ctx context.Context, js jetstream.JetStream, stream, subject string, n, size int, idKind string) (float64, int, error) {
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject}, Storage: jetstream.FileStorage}); err != nil {
		return 0, 0, fmt.Errorf("create stream %s: %w", stream, err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	id := idMaker(idKind)
	var bytes int
	rate, err := publishAsync(ctx, js, n, func(i int) *nats.Msg {
		msg := &nats.Msg{Subject: subject, Data: payload(rng, i, size), Header: nats.Header{}}
		msg.Header.Set(jetstream.MsgIDHeader, id(i))
		bytes += len(msg.Data)
		return msg
	})
	return rate, bytes / n, err
}

// publishAsync publishes the n messages msg makes, 2 000 acks in flight,
// and returns the rate of acked publishes.
func publishAsync(ctx context.Context, js jetstream.JetStream, n int, msg func(i int) *nats.Msg) (float64, error) {
	const window = 2000
	futures := make([]jetstream.PubAckFuture, 0, window)
	start := time.Now()
	for i := range n {
		f, err := js.PublishMsgAsync(msg(i))
		if err != nil {
			return 0, fmt.Errorf("publish: %w", err)
		}
		futures = append(futures, f)
		if len(futures) < window && i < n-1 {
			continue
		}
		for _, f := range futures {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return 0, fmt.Errorf("publish: %w", err)
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		futures = futures[:0]
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// raw consumes n messages with a plain Consume callback that acks each.
func raw(ctx context.Context, js jetstream.JetStream, n int) (float64, error) {
	cons, err := js.CreateConsumer(ctx, "BENCH", jetstream.ConsumerConfig{Durable: "raw", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
	if err != nil {
		return 0, err
	}
	var got atomic.Int64
	done := make(chan struct{})
	start := time.Now()
	cc, err := cons.Consume(func(m jetstream.Msg) {
		m.Ack() //nolint:errcheck // the raw baseline does no more than this
		if got.Add(1) == int64(n) {
			close(done)
		}
	})
	if err != nil {
		return 0, err
	}
	defer cc.Stop()
	select {
	case <-done:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	if err := js.Conn().Flush(); err != nil {
		return 0, err
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// openLedger opens a ledger at path with the balance table and run's
// built-in handler applying Apply, recording its changes to log if not nil.
func openLedger(ctx context.Context, cfg Config, path string, log ledger.Changelog) (*ledger.Store, ledger.Handler, error) {
	st, err := ledger.Open(path, ledger.Config{Logger: quiet, Changelog: log})
	if err != nil {
		return nil, nil, err
	}
	if _, err := st.DB().ExecContext(ctx, Schema); err != nil {
		st.Close()
		return nil, nil, err
	}
	h, err := cfg.Handler(ctx, st, Apply)
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, h, nil
}

// warmIndex reads the index of ids of the ledger at path, as run does
// before its first batch, and returns how long it took.
func warmIndex(ctx context.Context, path string) (time.Duration, error) {
	st, err := ledger.Open(path, ledger.Config{Logger: quiet})
	if err != nil {
		return 0, err
	}
	defer st.Close()
	start := time.Now()
	err = st.WarmIndex(ctx)
	return time.Since(start), err
}

// consumeLedger consumes cfg.Messages messages of BENCH through a ledger at
// path, cfg.Batch messages per transaction, and returns the open ledger.
// The handler is run's built-in one, as wrap makes it if set.
func consumeLedger(ctx context.Context, cfg Config, path, durable string, wrap func(ledger.Handler) ledger.Handler) (float64, *ledger.Store, error) {
	st, h, err := openLedger(ctx, cfg, path, nil)
	if err != nil {
		return 0, nil, err
	}
	if wrap != nil {
		h = wrap(h)
	}
	defer cfg.startAlongside(ctx, st)()
	// As run does before its first batch: throughput is the steady state's.
	if err := st.WarmIndex(ctx); err != nil {
		st.Close()
		return 0, nil, err
	}
	var done atomic.Int64
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	c, err := consumer.New(ctx, cfg.JS, st, consumer.Config{
		Stream: "BENCH", Durable: durable, Handler: h, Logger: quiet,
		Plan: ackwait.Plan{BatchSize: cfg.Batch},
		AfterCommit: func(r consumer.BatchReport) {
			if done.Add(int64(len(r.Results))) >= int64(cfg.Messages) {
				cancel()
			}
		},
	})
	if err == nil {
		start := time.Now()
		if err = c.Run(runCtx); err == nil && ctx.Err() != nil {
			err = ctx.Err()
		}
		if err == nil {
			return float64(done.Load()) / time.Since(start).Seconds(), st, nil
		}
	}
	st.Close()
	return 0, nil, err
}

// failing runs (c) with a handler that fails one message in
// cfg.FailEvery, on its first delivery, after doing its work (which the
// ledger then undoes): the cost of failures to the messages around them.
// The rate counts every outcome, failures included, up to cfg.Messages.
func failing(ctx context.Context, cfg Config) (float64, error) {
	rate, st, err := consumeLedger(ctx, cfg, filepath.Join(cfg.Dir, "failing.db"), "failing", func(h ledger.Handler) ledger.Handler {
		return func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
			if err := h(ctx, tx, d); err != nil {
				return err
			}
			if d.Delivered == 1 && d.Sequence%uint64(cfg.FailEvery) == 0 {
				return errors.New("bench: this message fails once")
			}
			return nil
		}
	})
	if err != nil {
		return 0, err
	}
	return rate, st.Close()
}

// perMessage is the per-message framework's shape: messages are fetched in
// batches like (c), but each is applied in a transaction of its own
// (ApplyBatch of one) and acked after that commit.
func perMessage(ctx context.Context, cfg Config) (float64, error) {
	st, h, err := openLedger(ctx, cfg, filepath.Join(cfg.Dir, "per-msg.db"), nil)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	cons, err := cfg.JS.CreateConsumer(ctx, "BENCH", jetstream.ConsumerConfig{Durable: "permsg", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
	if err != nil {
		return 0, err
	}
	n := cfg.PerMsgMessages
	start := time.Now()
	for done := 0; done < n; {
		b, err := cons.Fetch(min(cfg.Batch, n-done), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return 0, err
		}
		for m := range b.Messages() {
			meta, err := m.Metadata()
			if err != nil {
				return 0, err
			}
			d := ledger.Delivery{MessageID: m.Headers().Get(jetstream.MsgIDHeader), Stream: meta.Stream,
				Sequence: meta.Sequence.Stream, Subject: m.Subject(), Data: m.Data(), Delivered: meta.NumDelivered}
			if _, err := st.ApplyBatch(ctx, []ledger.Delivery{d}, h, ledger.Budget{Work: ackwait.DeadlineDefault}); err != nil {
				return 0, err
			}
			m.Ack() //nolint:errcheck // as (a) and (c)
			done++
		}
		if err := b.Error(); err != nil {
			return 0, err
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// ledgerBytes reports the bytes per message of the ledger's rows with
// their indexes (processed_messages, and its runs of fingerprints), of the
// events table with its own, and of the whole database file after a
// checkpoint.
func ledgerBytes(ctx context.Context, st *ledger.Store, n int) (ledgerPerMsg, eventsPerMsg, filePerMsg float64, err error) {
	if _, err := st.DB().ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		return 0, 0, 0, err
	}
	var ledgerTotal, eventsTotal int64
	if err := st.DB().QueryRowContext(ctx, `SELECT
		coalesce((SELECT sum(pgsize) FROM dbstat WHERE name IN (SELECT name FROM sqlite_master WHERE tbl_name IN ('processed_messages', 'processed_runs', 'processed_fingerprints'))), 0),
		coalesce((SELECT sum(pgsize) FROM dbstat WHERE name IN (SELECT name FROM sqlite_master WHERE tbl_name = 'events')), 0)`).Scan(&ledgerTotal, &eventsTotal); err != nil {
		return 0, 0, 0, fmt.Errorf("dbstat: %w", err)
	}
	fi, err := os.Stat(st.Path())
	if err != nil {
		return 0, 0, 0, err
	}
	return float64(ledgerTotal) / float64(n), float64(eventsTotal) / float64(n), float64(fi.Size()) / float64(n), nil
}

// expertSchema is (e)'s database: what a careful engineer writes by hand.
const expertSchema = `CREATE TABLE IF NOT EXISTS processed (msg_id TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS balances (account TEXT PRIMARY KEY, amount INTEGER NOT NULL)`

// expert is (e): the batch loop an expert writes by hand over the same
// SQLite engine (synchronous FULL, as the ledger's default): Fetch a batch,
// one transaction with a prepared INSERT OR IGNORE of the id and, when it
// inserted, the balance upsert (Apply) per message, commit, ack each. No
// deadline, no dead letters, no conflict check, no events row, no
// pipelining of the next batch with this one's fsync.
func expert(ctx context.Context, cfg Config) (float64, error) {
	db, err := sql.Open("sqlite", filepath.Join(cfg.Dir, "expert.db")+
		"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(5000)&_txlock=immediate")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, expertSchema); err != nil {
		return 0, err
	}
	seen, err := db.PrepareContext(ctx, `INSERT OR IGNORE INTO processed (msg_id) VALUES (?)`)
	if err != nil {
		return 0, err
	}
	defer seen.Close()
	apply, err := db.PrepareContext(ctx, Apply)
	if err != nil {
		return 0, err
	}
	defer apply.Close()
	cons, err := cfg.JS.CreateConsumer(ctx, "BENCH", jetstream.ConsumerConfig{Durable: "expert", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
	if err != nil {
		return 0, err
	}
	start := time.Now()
	for done := 0; done < cfg.Messages; {
		b, err := cons.Fetch(min(cfg.Batch, cfg.Messages-done), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return 0, err
		}
		var msgs []jetstream.Msg
		for m := range b.Messages() {
			msgs = append(msgs, m)
		}
		if err := b.Error(); err != nil {
			return 0, err
		}
		if err := expertBatch(ctx, db, seen, apply, msgs); err != nil {
			return 0, err
		}
		for _, m := range msgs {
			m.Ack() //nolint:errcheck // as (a) and (c)
		}
		done += len(msgs)
	}
	return float64(cfg.Messages) / time.Since(start).Seconds(), nil
}

// expertBatch is one batch of (e) in one transaction.
func expertBatch(ctx context.Context, db *sql.DB, seen, apply *sql.Stmt, msgs []jetstream.Msg) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	s, a := tx.StmtContext(ctx, seen), tx.StmtContext(ctx, apply)
	for _, m := range msgs {
		res, err := s.ExecContext(ctx, m.Headers().Get(jetstream.MsgIDHeader))
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			continue // a duplicate
		}
		if _, err := a.ExecContext(ctx, sql.Named("data", string(m.Data()))); err != nil {
			return err
		}
	}
	return tx.Commit()
}
