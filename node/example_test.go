package node_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/jetledger/jetledger/node"
	"github.com/nats-io/nats.go/jetstream"
)

// A standalone node in a temporary directory on a free port, and a stream
// made through its JetStream client.
func ExampleStart() {
	dir, err := os.MkdirTemp("", "node-example-*")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	n, err := node.Start(ctx, node.Config{
		StoreDir: filepath.Join(dir, "nats"),
		Listen:   "127.0.0.1:0", // a free port
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		panic(err)
	}
	defer n.Close()

	js, err := n.JetStream()
	if err != nil {
		panic(err)
	}
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	if err != nil {
		panic(err)
	}
	if _, err := js.Publish(ctx, "orders.1", []byte("one")); err != nil {
		panic(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(info.Config.Name, info.State.Msgs)
	// Output: ORDERS 1
}
