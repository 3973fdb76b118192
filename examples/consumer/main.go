// Command consumer is a library consumer of jetledger: it applies the ORDERS
// stream to its own orders table, enqueues a webhook for each order in the
// same transaction (the outbox), sends them with a signed webhook sink, and
// prunes the ledger's old rows. Every error is returned and printed: with
// NATS down it exits 1 with the reason, it does not panic.
//
//	go run ./examples/consumer -nats nats://127.0.0.1:4222 -db app.db -hook http://127.0.0.1:8080/hooks -secret s3cret
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/consumer/prune"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/stream"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Config is what run needs; main fills it from flags.
type Config struct {
	NATSURL string // the NATS server, e.g. nats://127.0.0.1:4222
	DB      string // the ledger file, created if missing
	HookURL string // the webhook destination
	Secret  string // signs each webhook (Jetledger-Signature)
	Logger  *slog.Logger
}

func main() {
	var cfg Config
	flag.StringVar(&cfg.NATSURL, "nats", nats.DefaultURL, "NATS server URL")
	flag.StringVar(&cfg.DB, "db", "app.db", "ledger database file")
	flag.StringVar(&cfg.HookURL, "hook", "http://127.0.0.1:8080/hooks", "webhook destination URL")
	flag.StringVar(&cfg.Secret, "secret", os.Getenv("HOOK_SECRET"), "webhook signing secret")
	flag.Parse()
	cfg.Logger = slog.Default()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		os.Exit(1)
	}
}

// snippet:consumer-order
type order struct {
	ID    string `json:"id"`
	Total int    `json:"total"`
}

// apply is the handler: it runs inside the batch's transaction, so the
// order row, the webhook row and the message's "processed" mark commit
// together or not at all.
func apply(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
	var o order
	if err := json.Unmarshal(d.Data, &o); err != nil {
		return consumer.Term(err) // permanent: dead letter, never retried
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id, total) VALUES (?, ?)`, o.ID, o.Total); err != nil {
		return err // nak with backoff, dead letter at MaxDeliver
	}
	_, err := tx.Enqueue(ctx, "webhook", d.Data) // sent after the commit, by the dispatcher
	return err
}

// end snippet

func run(ctx context.Context, cfg Config) error {
	// snippet:consumer-open
	st, err := ledger.Open(cfg.DB, ledger.Config{
		Sinks:  []string{"webhook"}, // an Enqueue to any other sink name fails at once
		Logger: cfg.Logger,
	})
	if err != nil {
		return err
	}
	defer st.Close()
	// The ledger holds jetledger's tables; the application's own live beside them.
	if _, err := st.Exec(ctx, `CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, total INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("create orders: %w", err)
	}
	nc, err := nats.Connect(cfg.NATSURL)
	if err != nil {
		return fmt.Errorf("connect to NATS: %w", err) // NATS down: an error, not a panic
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	// The stream must exist before a consumer binds to it: Ensure creates it
	// when missing (and never edits an existing one).
	if _, err := stream.Ensure(ctx, js, stream.Config{
		Name: "ORDERS", Subjects: []string{"orders.>"}, Duplicates: 2 * time.Minute, Logger: cfg.Logger,
	}); err != nil {
		return fmt.Errorf("ensure stream: %w", err)
	}
	// end snippet
	return consume(ctx, cfg, st, js)
}

func consume(ctx context.Context, cfg Config, st *ledger.Store, js jetstream.JetStream) error {
	// snippet:consumer-run
	plan := ackwait.Plan{Deadline: 10 * time.Second, BatchSize: 100}
	c, err := consumer.New(ctx, js, st, consumer.Config{
		Stream: "ORDERS", Durable: "billing", Plan: plan, Handler: apply, Logger: cfg.Logger,
	})
	if err != nil {
		return err // errors.Is(err, ackwait.ErrAckWaitTooShort) for an unsafe existing durable
	}
	sink, err := webhook.New(webhook.Config{URL: cfg.HookURL, Secret: cfg.Secret})
	if err != nil {
		return err
	}
	d, err := outbox.New(st, outbox.Config{Sink: sink, Lease: plan.ClaimLease(sink.Timeout()), Logger: cfg.Logger})
	if err != nil {
		return err
	}
	p := &prune.Pruner{
		Ledger: st, JetStream: js, Stream: "ORDERS", Durable: "billing",
		Retention: 7 * 24 * time.Hour, Interval: time.Hour, Logger: cfg.Logger,
	}
	if _, err := p.Check(ctx); err != nil {
		return err // prune.ErrRetentionShort: the retention is under the duplicate window
	}
	// Each returns when ctx ends (the consumer after committing and acking
	// the batch in hand); the first to fail stops the others.
	err = all(ctx, c.Run, d.Run, p.Run)
	// end snippet
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// all runs each fn until ctx ends or one of them fails, and returns the
// first error.
func all(ctx context.Context, fns ...func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(fns))
	for _, fn := range fns {
		go func() { errs <- fn(ctx) }()
	}
	var first error
	for range fns {
		if err := <-errs; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	return first
}
