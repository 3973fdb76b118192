package replay_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/jetledger/jetledger/consumer/replay"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A durable that was delivered 2 of 3 messages and acked the first: a
// replay goes up to 2, the effect of 1 is suppressed, that of 2 in review,
// and without a sink it is refused.
func ExampleReadBounds() {
	dir, err := os.MkdirTemp("", "jetledger-replay-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		log.Fatal(err)
	}
	srv.Start()
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	if !srv.ReadyForConnections(10 * time.Second) {
		log.Fatal("server not ready")
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
		log.Fatal(err)
	}
	for range 3 {
		if _, err := js.Publish(ctx, "orders.new", []byte("x")); err != nil {
			log.Fatal(err)
		}
	}
	cons, err := js.CreateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: "billing", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		log.Fatal(err)
	}
	batch, err := cons.Fetch(2)
	if err != nil {
		log.Fatal(err)
	}
	first := true
	for m := range batch.Messages() {
		if first {
			if err := m.DoubleAck(ctx); err != nil {
				log.Fatal(err)
			}
			first = false
		}
	}
	st, err := ledger.Open(filepath.Join(dir, "ledger.db"), ledger.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	b, err := replay.ReadBounds(ctx, js, "ORDERS", "billing", 0)
	fmt.Printf("%+v %v\n", b, err)
	err = replay.CheckEffects(ctx, st, "ORDERS", b, false)
	fmt.Println(errors.Is(err, replay.ErrEffectsUndecided))
	_, err = replay.ReadBounds(ctx, js, "ORDERS", "other", 0)
	fmt.Println(errors.Is(err, replay.ErrNoDurable))
	// Output:
	// {UpTo:2 Floor:1 Delivered:2} <nil>
	// true
	// true
}
