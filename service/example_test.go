package service_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/node"
	"github.com/jetledger/jetledger/service"
	"github.com/jetledger/jetledger/sqlhandler"
	"github.com/jetledger/jetledger/stream"
	"github.com/nats-io/nats.go/jetstream"
)

// A whole run in one process: an embedded node on a free port, the
// stream created with its subjects, and the SQL handler summing each
// customer's orders exactly once, a republished order included.
func ExampleStart() {
	dir, err := os.MkdirTemp("", "jetledger-service-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	s, err := service.Start(ctx, service.Config{
		DB:       filepath.Join(dir, "ledger.db"),
		Node:     node.Config{Listen: "127.0.0.1:0"},
		Stream:   stream.Config{Name: "ORDERS", Subjects: []string{"orders.>"}, Limits: stream.Limits{MaxAge: time.Hour}},
		Consumer: consumer.Config{Durable: "jetledger", Plan: ackwait.Plan{Deadline: 10 * time.Second, BatchSize: 100}},
		SQL: sqlhandler.Config{
			Schema: `CREATE TABLE IF NOT EXISTS totals (customer TEXT PRIMARY KEY, amount INTEGER NOT NULL)`,
			Apply: `INSERT INTO totals VALUES (json_extract(:data, '$.customer'), json_extract(:data, '$.amount'))
				ON CONFLICT (customer) DO UPDATE SET amount = amount + excluded.amount`,
		},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	for _, id := range []string{"o1", "o2", "o2"} { // o2 twice: a publisher's retry
		if _, err := s.JetStream().Publish(ctx, "orders.new", []byte(`{"customer":"alice","amount":5}`), jetstream.WithMsgID(id)); err != nil {
			log.Fatal(err)
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	var amount int
	for amount < 10 && ctx.Err() == nil {
		_ = s.Store().DB().QueryRowContext(ctx, `SELECT coalesce(sum(amount), 0) FROM totals`).Scan(&amount)
		time.Sleep(10 * time.Millisecond) // polling the example's own ledger
	}
	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	fmt.Println("alice:", amount)
	// Output: alice: 10
}
