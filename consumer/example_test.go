package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

type order struct {
	ID       string
	Supplier string
	Total    int
}

// The README's library quick start, compiled here so it keeps working as
// written. (No Output: it needs a NATS server.)
func ExampleNew() {
	ctx := context.Background()
	run := func() error {
		st, err := ledger.Open("app.db", ledger.Config{}) // WAL, synchronous=FULL, one writer, migrations
		if err != nil {
			return err
		}
		defer st.Close()

		nc, _ := nats.Connect(nats.DefaultURL)
		js, _ := jetstream.New(nc)

		c, err := consumer.New(ctx, js, st, consumer.Config{
			Stream:  "ORDERS",
			Durable: "billing",
			Plan:    ackwait.Plan{Deadline: 10 * time.Second, BatchSize: 100},
			Handler: func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
				var o order
				if err := json.Unmarshal(d.Data, &o); err != nil {
					return consumer.Term(err) // permanent: dead letter, never retried
				}
				if o.Supplier == "" {
					return consumer.RetryAfter(time.Minute, errors.New("supplier not synced yet"))
				}
				_, err := tx.ExecContext(ctx, `INSERT INTO orders (id, total) VALUES (?, ?)`, o.ID, o.Total)
				return err // any other error: nak with exponential backoff, dead letter at MaxDeliver
			},
		})
		if err != nil {
			return err // errors.Is(err, ackwait.ErrAckWaitTooShort) for an unsafe consumer
		}
		return c.Run(ctx) // returns after committing and acking the batch in hand when ctx ends
	}
	_ = run
}
