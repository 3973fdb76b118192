package prune_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/jetledger/jetledger/consumer/prune"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/stream"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// An embedded server on a random port, its store in a temporary
// directory; a stream ensured, a ledger, and the prune options derived
// from the live stream.
func ExampleOptions() {
	dir, err := os.MkdirTemp("", "jetledger-prune-example")
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
	quiet := slog.New(slog.DiscardHandler)

	if _, err := stream.Ensure(ctx, js, stream.Config{Name: "ORDERS", Subjects: []string{"orders.>"}, Duplicates: 2 * time.Minute, Logger: quiet}); err != nil {
		log.Fatal(err)
	}
	for i := range 3 {
		if _, err := js.Publish(ctx, "orders.new", []byte("x"), jetstream.WithMsgID(fmt.Sprint("o", i))); err != nil {
			log.Fatal(err)
		}
	}
	st, err := ledger.Open(filepath.Join(dir, "ledger.db"), ledger.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	o, err := prune.Options(ctx, js, st, "ORDERS", "billing")
	if err != nil {
		log.Fatal(err)
	}
	// No durable "billing" yet: a consumer made later starts at the
	// stream's start, so its first message holds the retention back.
	fmt.Println(o.Stream, o.FirstSeq, o.DuplicateWindow, !o.Unconsumed.IsZero(), len(o.Floors))

	p := &prune.Pruner{Ledger: st, JetStream: js, Stream: "ORDERS", Durable: "billing", Retention: time.Minute, Logger: quiet}
	_, err = p.Check(ctx)
	fmt.Println(err != nil, errors.Is(err, prune.ErrRetentionShort))
	// Output:
	// ORDERS 1 2m0s true 0
	// true true
}
