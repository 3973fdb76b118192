package stream_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/stream"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// embedded starts a JetStream server on a random port with its store in a
// temporary directory; stop shuts it down and removes the store.
func embedded() (url string, stop func()) {
	dir, err := os.MkdirTemp("", "jetledger-example")
	if err != nil {
		log.Fatal(err)
	}
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		log.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		log.Fatal("server not ready")
	}
	return s.ClientURL(), func() { s.Shutdown(); s.WaitForShutdown(); os.RemoveAll(dir) }
}

func ExampleEnsure() {
	url, stop := embedded()
	defer stop()
	nc, err := nats.Connect(url)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	cfg := stream.Config{Name: "ORDERS", Subjects: []string{"orders.>"}, Duplicates: 2 * time.Minute,
		Limits: stream.Limits{MaxAge: 24 * time.Hour}, Logger: quiet}
	info, err := stream.Ensure(ctx, js, cfg)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.Config.Name, info.Config.Subjects, info.Config.MaxAge, info.Config.Metadata[consumer.MetadataCreatedBy])
	// Ensured again, the stream is used as it is.
	again, err := stream.Ensure(ctx, js, cfg)
	fmt.Println(again.Created.Equal(info.Created), err)
	// Without subjects, it must exist.
	_, err = stream.Ensure(ctx, js, stream.Config{Name: "MISSING", Logger: quiet})
	fmt.Println(errors.Is(err, stream.ErrNotFound))
	// Output:
	// ORDERS [orders.>] 24h0m0s jetledger
	// true <nil>
	// true
}
