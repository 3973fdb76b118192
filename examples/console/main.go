// Command console mounts jetledger's web console in a Go program's own
// HTTP server, under /ops/, beside the program's routes. The console
// shows every run and site its NATS connection reaches, and lets the users
// of the users file act.
//
//	go run ./examples/console -nats nats://127.0.0.1:4222 -users users.txt
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/jetledger/jetledger/console"
	"github.com/nats-io/nats.go"
)

func main() {
	natsURL := flag.String("nats", nats.DefaultURL, "the NATS server whose runs the console shows")
	users := flag.String("users", "", "the users file: \"name role secret\" per line")
	listen := flag.String("listen", "127.0.0.1:8080", "where to serve")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := serve(ctx, *natsURL, *users, *listen); err != nil {
		log.Fatal(err)
	}
}

func serve(ctx context.Context, natsURL, usersFile, listen string) error {
	nc, err := nats.Connect(natsURL)
	if err != nil {
		return err
	}
	defer nc.Close()
	users, err := console.LoadUsers(usersFile)
	if err != nil {
		return err
	}
	// snippet:console-mount
	ops, err := console.NewHandler(&console.Options{Conn: nc, Users: users, Prefix: "/ops"})
	if err != nil {
		return err
	}
	ops.Start(ctx) // reads the sites in the background until ctx ends
	mux := http.NewServeMux()
	mux.Handle("/ops/", ops)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "the program's own page") })
	// end snippet
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	fmt.Printf("serving http://%s/ops/\n", l.Addr())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { <-ctx.Done(); srv.Close() }()
	if err := srv.Serve(l); err != http.ErrServerClosed {
		return err
	}
	return nil
}
